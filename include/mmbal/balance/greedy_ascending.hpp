#pragma once
/// @file
/// DistTrain's intra-batch reordering: greedy number partitioning over ascending sizes.

#include <mmbal/balance/constraints.hpp>
#include <mmbal/balance/detail/validate.hpp>
#include <mmbal/balance/lpt.hpp>
#include <mmbal/core/concepts.hpp>
#include <mmbal/core/types.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace mmbal::balance {

/// Greedy ascending: sort the items by weight ascending (ties by id) and put each on the bin
/// with the lowest current cost (ties by bin index). DistTrain Alg. 2 (INTRAREORDER), any
/// `batch_cost`.
///
/// - Guarantee: none beyond max ≤ Σ/d + max item for additive costs (the list-scheduling
///   bound, 2 − 1/d); processing small items first leaves the large ones to land last, so it
///   is usually worse than `lpt`. Kept as the paper's baseline.
/// - Complexity: O(n · ⌈bits(max w)/11⌉) radix sort + O(n log d) heap updates.
/// - Slot order: placement order (lightest first within each bin).
/// - Constraints: as `lpt` (count caps skip full bins; capacity picks the least-loaded bin that
///   stays within the cap; groups are units of weight Σ w, ascending; `count_cap::equal` with
///   `groups` is rejected).
/// @see DistTrain §6.1, Alg. 2; docs/DESIGN.md §5.1.
struct greedy_ascending {
  static constexpr const char* name = "greedy-ascending";

  template <batch_cost C>
  [[nodiscard]] assignment operator()(std::span<const length_t> weights, rank_t bins, const C& cost,
                                      const constraints& limits = {}) const {
    detail::check_problem(name, weights, bins, limits);
    return detail::greedy_in_weight_order(name, false, weights, bins, cost, limits);
  }
};

}  // namespace mmbal::balance
