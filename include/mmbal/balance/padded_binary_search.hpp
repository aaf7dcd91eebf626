#pragma once
/// @file
/// OrchMLLM's post-balancing algorithm with paddings (§5.1, Alg. 2): binary search on the
/// batch bound over contiguous groups of the ascending lengths.

#include <mmbal/balance/constraints.hpp>
#include <mmbal/balance/detail/common.hpp>
#include <mmbal/core/concepts.hpp>
#include <mmbal/core/types.hpp>

#include <bit>
#include <cstdint>
#include <span>
#include <vector>

namespace mmbal::balance {

/// Padded binary search for a `padded_cost` (a batch costs `c.padded_value(b, max l)`, e.g.
/// `padded`: b · max l, or `padded_attention`).
///
/// Sort the items by length ascending (ties by id). For a bound B, GetLeastBatches fills
/// batches in that order and starts a new batch when the item would push the current one
/// above B (for `padded`: (size + 1) · l > B) — the fewest contiguous batches within B,
/// because a contiguous batch's cost only grows when it is extended to the right and only
/// shrinks when cut on the left. Binary search finds the least B that needs ≤ d batches;
/// batch j goes to bin j (bins past the last batch stay empty).
///
/// The search runs over the IEEE-754 bit patterns of non-negative doubles between the
/// largest single-item cost and padded_value(⌈n/d⌉, max l) (DESIGN.md's range
/// [max l, max l · ⌈n/d⌉] for `padded`), so it ends on the exact least bound for any padded
/// cost, integral or not.
///
/// - Guarantee: optimal among groupings into contiguous runs of the sorted order (the
///   paper's claim); not optimal among all partitions.
/// - Complexity: O(n log n) sort + O(n) per probe, ≤ 64 probes.
/// - Slot order: ascending length (ties by id) within each bin.
/// - Constraints: `count_cap` fixed (a batch also closes at the cap; still optimal for
///   contiguous runs); `capacity` (error when the best contiguous grouping exceeds it, naming
///   both). Rejected: `count_cap` equal, `groups`.
/// @see OrchMLLM §5.1, Alg. 2; DESIGN.md §5.1.
struct padded_binary_search {
  static constexpr const char* name = "padded";

  template <padded_cost C>
  [[nodiscard]] assignment operator()(std::span<const length_t> weights, rank_t bins, const C& cost,
                                      const constraints& limits = {}) const {
    detail::check_problem(name, weights, bins, limits);
    if (limits.counts.kind == count_cap::mode::equal) detail::reject_constraint(name, "count_cap equal");
    if (!limits.groups.empty()) detail::reject_constraint(name, "groups");
    const std::size_t n = weights.size();
    const detail::units u = detail::make_units(n, {});
    detail::check_solo_capacity(name, u, weights, cost, limits);
    if (n == 0) return assignment{bins, {}};
    const std::uint64_t cap = limits.counts.kind == count_cap::mode::fixed ? limits.counts.cap : n;
    const std::vector<item_id> order = detail::ascending_order(weights);

    // Number of batches GetLeastBatches needs under bound B (stops counting past `bins`).
    auto batches_for = [&](double bound) {
      std::uint64_t batches = 1, size = 0;
      for (const item_id i : order) {
        if (size >= cap || cost.padded_value(size + 1, weights[i]) > bound) {
          if (++batches > bins) return batches;
          size = 0;
        }
        ++size;
      }
      return batches;
    };

    const length_t longest = weights[order.back()];
    const std::uint64_t per_bin = (n + bins - 1) / bins;
    double lo = 0;
    for (const item_id i : order) lo = std::max(lo, cost.padded_value(1, weights[i]));
    double hi = std::max(lo, cost.padded_value(std::min<std::uint64_t>(per_bin, cap), longest));
    // hi is feasible: ⌈n/d⌉ (or cap) consecutive items per batch cost at most hi each, and
    // cap·d ≥ n is checked. Bisect on bit patterns: non-negative doubles order like them.
    std::uint64_t lo_bits = std::bit_cast<std::uint64_t>(lo + 0.0), hi_bits = std::bit_cast<std::uint64_t>(hi + 0.0);
    if (batches_for(lo) <= bins) hi_bits = lo_bits;
    while (hi_bits - lo_bits > 1) {
      const std::uint64_t mid = lo_bits + (hi_bits - lo_bits) / 2;
      if (batches_for(std::bit_cast<double>(mid)) <= bins)
        hi_bits = mid;
      else
        lo_bits = mid;
    }
    const double bound = std::bit_cast<double>(hi_bits);
    if (limits.capacity && bound > *limits.capacity)
      mmbal::detail::throw_invalid(name, ": the best contiguous grouping costs ", bound,
                                   " per bin, above the capacity ", *limits.capacity,
                                   " (try lpt, which packs non-contiguously)");

    detail::placement_builder out(n, bins);
    rank_t b = 0;
    std::uint64_t size = 0;
    for (const item_id i : order) {
      if (size >= cap || cost.padded_value(size + 1, weights[i]) > bound) {
        ++b;
        size = 0;
      }
      out.place(i, b);
      ++size;
    }
    return std::move(out).finish();
  }
};

}  // namespace mmbal::balance
