#pragma once
/// @file
/// `problem`: one balancing problem as `migrate` and the orchestrator's phase balancers take it
/// (docs/DESIGN.md §5.1), the `problem_partitioner` concept for partitioners that need the whole
/// problem (origins, item bytes), and `partition_problem`, which runs either kind of partitioner on
/// a problem.

#include <mmbal/balance/constraints.hpp>
#include <mmbal/core/error.hpp>
#include <mmbal/core/types.hpp>

#include <concepts>
#include <cstdint>
#include <span>

namespace mmbal::balance {

/// One balancing problem: what every algorithm may look at.
struct problem {
  std::span<const length_t> weights;            ///< cost weight (length) per item
  rank_t bins = 0;                              ///< number of bins (ranks); must be > 0
  constraints limits{};                         ///< count cap, capacity, groups (default: none)
  std::span<const rank_t> origin{};             ///< current rank per item (used by migrate; may be empty)
  std::span<const std::uint64_t> item_bytes{};  ///< bytes per item (migrate; empty = weights as bytes)
  rank_t ranks_per_node = 0;                    ///< ranks per node; 0 = a single node
};

/// A partitioner that looks at the whole problem, e.g. one that keeps items near their
/// origin (`migrate_partitioner`): `p(problem, cost)` returns an assignment of
/// `problem.weights` to `problem.bins` bins, as a `partitioner` does.
template <class P, class C>
concept problem_partitioner = batch_cost<C> && requires(const P& p, const problem& prob, const C& cost) {
  { p(prob, cost) } -> std::same_as<assignment>;
};

/// Runs `part` on `prob` with `cost`: a `problem_partitioner` gets the whole problem, a
/// `partitioner` its weights, bins and constraints. The partitioner's cost and errors.
template <class P, batch_cost C>
requires partitioner<P, C> || problem_partitioner<P, C>
[[nodiscard]] assignment partition_problem(const P& part, const problem& prob, const C& cost) {
  if constexpr (problem_partitioner<P, C>)
    return part(prob, cost);
  else
    return part(prob.weights, prob.bins, cost, prob.limits);
}

/// Throws `invalid_input` unless the problem's spans agree with each other and the bin count
/// (0 < bins ≤ `max_ranks`, origin empty or one rank < bins per item, item_bytes empty or one
/// per item). O(n).
inline void check_problem_spans(const problem& p) {
  (void)checked_ranks(p.bins, "balance: bins");
  checked_count(p.weights.size(), "item count");
  if (!p.origin.empty()) {
    if (p.origin.size() != p.weights.size())
      mmbal::detail::throw_invalid("balance: origin has ", p.origin.size(), " entries but there are ", p.weights.size(),
                                   " items");
    for (std::size_t i = 0; i < p.origin.size(); ++i)
      if (p.origin[i] >= p.bins)
        mmbal::detail::throw_invalid("balance: origin of item ", i, " is rank ", p.origin[i], " >= bins ", p.bins);
  }
  if (!p.item_bytes.empty() && p.item_bytes.size() != p.weights.size())
    mmbal::detail::throw_invalid("balance: item_bytes has ", p.item_bytes.size(), " entries but there are ",
                                 p.weights.size(), " items");
}

}  // namespace mmbal::balance
