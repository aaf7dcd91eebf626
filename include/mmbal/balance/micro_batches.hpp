#pragma once
/// @file
/// Micro-batches: splitting a global batch over d ranks × m micro-batches so that the sum over
/// micro-batch rounds of the slowest rank, Σ_k max_r cost(r, k), is small (docs/DESIGN.md §5.1),
/// and DistTrain's intra-microbatch reordering as a named helper.

#include <mmbal/balance/constraints.hpp>
#include <mmbal/balance/greedy_ascending.hpp>
#include <mmbal/balance/lpt.hpp>
#include <mmbal/core/concepts.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/cost/metrics.hpp>

#include <algorithm>
#include <compare>
#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

namespace mmbal::balance {

/// Where an item runs: on `rank`, in micro-batch `micro_batch`, at position `slot` of that
/// (rank, micro-batch) batch.
struct micro_batch_location {
  rank_t rank = 0;
  std::uint32_t micro_batch = 0;
  std::uint32_t slot = 0;
  friend constexpr auto operator<=>(const micro_batch_location&, const micro_batch_location&) = default;
};

/// The result of `split_micro_batches`.
struct micro_batch_plan {
  rank_t ranks = 0;
  std::uint32_t micro_batches = 0;
  std::vector<micro_batch_location> where;  ///< per item
  std::vector<double> costs;                ///< cost of (rank r, micro-batch k) at [k · ranks + r]

  /// Cost of (rank r, micro-batch k). Throws `invalid_input` naming r or k when out of range,
  /// or when `costs` does not hold ranks × micro_batches entries.
  [[nodiscard]] double cost(rank_t r, std::uint32_t k) const {
    if (r >= ranks) mmbal::detail::throw_invalid("micro_batch_plan: rank ", r, " >= ranks ", ranks);
    if (k >= micro_batches)
      mmbal::detail::throw_invalid("micro_batch_plan: micro-batch ", k, " >= micro_batches ", micro_batches);
    if (costs.size() != std::size_t{ranks} * micro_batches)
      mmbal::detail::throw_invalid("micro_batch_plan: ", costs.size(), " costs for ", ranks, " ranks x ", micro_batches,
                                   " micro-batches");
    return costs[std::size_t{k} * ranks + r];
  }
  /// Throws `invalid_input` unless every item's rank is < ranks, its micro-batch < micro_batches,
  /// and the slots of every (rank, micro-batch) are exactly 0..k-1 (each item placed once),
  /// naming the first offending item. O(n + d·m).
  void validate() const {
    const std::size_t batch_count = std::size_t{ranks} * micro_batches;
    std::vector<std::uint32_t> sizes(batch_count, 0);
    for (std::size_t i = 0; i < where.size(); ++i) {
      const micro_batch_location& l = where[i];
      if (l.rank >= ranks || l.micro_batch >= micro_batches)
        mmbal::detail::throw_invalid("micro_batch_plan: item ", i, " is on rank ", l.rank, ", micro-batch ",
                                     l.micro_batch, " outside ", ranks, " ranks x ", micro_batches, " micro-batches");
      ++sizes[std::size_t{l.micro_batch} * ranks + l.rank];
    }
    std::vector<std::vector<bool>> taken(batch_count);
    for (std::size_t b = 0; b < batch_count; ++b) taken[b].assign(sizes[b], false);
    for (std::size_t i = 0; i < where.size(); ++i) {
      const micro_batch_location& l = where[i];
      const std::size_t b = std::size_t{l.micro_batch} * ranks + l.rank;
      if (l.slot >= sizes[b] || taken[b][l.slot])
        mmbal::detail::throw_invalid("micro_batch_plan: item ", i, " has slot ", l.slot, " in (rank ", l.rank,
                                     ", micro-batch ", l.micro_batch, ") which is out of range or taken (it holds ",
                                     sizes[b], " items)");
      taken[b][l.slot] = true;
    }
  }
  /// Σ_k max_r cost(r, k): the step time when every micro-batch round waits for its slowest rank.
  [[nodiscard]] double sum_of_max() const {
    double total = 0;
    for (std::uint32_t k = 0; k < micro_batches; ++k) {
      double m = 0;
      for (rank_t r = 0; r < ranks; ++r) m = std::max(m, cost(r, k));
      total += m;
    }
    return total;
  }
  /// Items of every (rank, micro-batch) in slot order, at [k · ranks + r]. O(n + d·m).
  /// Validates first (see `validate`).
  [[nodiscard]] std::vector<std::vector<item_id>> batches() const {
    validate();
    std::vector<std::vector<item_id>> out(std::size_t{ranks} * micro_batches);
    for (const micro_batch_location& l : where) out[std::size_t{l.micro_batch} * ranks + l.rank].emplace_back();
    for (item_id i = 0; i < where.size(); ++i)
      out[std::size_t{where[i].micro_batch} * ranks + where[i].rank][where[i].slot] = i;
    return out;
  }
};

/// Lower bound on Σ_k max_r cost(r, k) over every split of the items into `ranks` ×
/// `micro_batches` batches: max(Σ c(w) / ranks, max c(w)) with c(w) an item's cost alone. Each
/// round's max is at least its mean over the ranks and a batch costs at least the sum of its
/// items' solo costs (true of every built-in cost), so the rounds add up to ≥ Σ c / ranks; the
/// round holding the costliest item costs at least that item. O(n).
template <batch_cost C>
[[nodiscard]] double micro_batch_lower_bound(std::span<const length_t> weights, rank_t ranks, const C& cost) {
  return lower_bound(weights, ranks, cost);
}

namespace detail {

inline void check_micro_batches(const char* name, rank_t ranks, std::uint32_t m) {
  if (ranks == 0 || ranks > max_ranks) (void)checked_ranks(ranks, mmbal::detail::concat(name, ": ranks"));
  if (m == 0) mmbal::detail::throw_invalid(name, ": micro_batches = 0 (need at least one micro-batch)");
  // The plan holds a cost per (rank, micro-batch), and the global split balances over that
  // many bins: the product is a rank count of the plan.
  if (std::uint64_t{ranks} * m > max_ranks)
    mmbal::detail::throw_invalid(name, ": ranks x micro_batches = ", std::uint64_t{ranks} * m, " exceeds ", max_ranks,
                                 ", the most ranks a plan may have");
}

/// The partitioner's result must place every one of `n` items once on `bins` bins: a user's
/// partitioner that returns fewer bins would have the split index past its bin costs.
inline void check_split(const assignment& a, std::size_t n, rank_t bins) {
  if (a.bins != bins || a.size() != n)
    mmbal::detail::throw_invalid("split_micro_batches: the partitioner returned ", a.size(), " items on ", a.bins,
                                 " bins for ", n, " items on ", bins, " bins");
  a.validate();
}

}  // namespace detail

/// Splits a global batch over `ranks` × `micro_batches` batches (items may go to any rank):
/// 1. `part` (default `lpt`; any `partitioner` for the cost) into d·m bins;
/// 2. sort the bins by cost descending (ties by bin index) and cut the sorted list into m
///    rounds of d consecutive bins — round k is micro-batch k, so each round holds bins of
///    similar cost and Σ_k max_r is small;
/// 3. within a round, the costliest bin goes to the rank with the least cost accumulated over
///    the earlier rounds (ties by rank index), the next to the next one, and so on, which
///    also evens out the per-rank totals (gradient-accumulation steps).
///
/// - Guarantee (additive costs): Σ_k max_r ≤ Σ c / d + (max bin − min bin of the LPT step) ≤
///   Σ c / d + max c ≤ 2 × optimum (each round's max is at most its mean plus its spread, and
///   the spreads of consecutive sorted rounds add up to at most the total spread).
/// - Complexity: O(n log n + d·m log(d·m)).
/// - Slot order: the partitioner's (lpt: placement order, heaviest first).
/// - Errors (`invalid_input`): ranks = 0 or above `max_ranks`, micro_batches = 0,
///   ranks × micro_batches above `max_ranks`.
/// @see docs/DESIGN.md §5.1; OrchMLLM §5.1 (balancing is per micro-batch when gradients are
///      accumulated); DistTrain §6.1–6.2.
template <batch_cost C, class P = lpt>
requires partitioner<P, C>
[[nodiscard]] micro_batch_plan split_micro_batches(std::span<const length_t> weights, rank_t ranks,
                                                   std::uint32_t micro_batches, const C& cost, const P& part = {}) {
  detail::check_micro_batches("split_micro_batches", ranks, micro_batches);
  const rank_t bins = ranks * micro_batches;
  const assignment a = part(weights, bins, cost, constraints{});
  detail::check_split(a, weights.size(), bins);
  const std::vector<double> bin_cost = bin_loads(a, weights, cost);
  std::vector<rank_t> sorted(bins);
  std::iota(sorted.begin(), sorted.end(), rank_t{0});
  std::sort(sorted.begin(), sorted.end(),
            [&](rank_t x, rank_t y) { return bin_cost[x] != bin_cost[y] ? bin_cost[x] > bin_cost[y] : x < y; });
  micro_batch_plan plan{ranks, micro_batches, std::vector<micro_batch_location>(weights.size()),
                        std::vector<double>(std::size_t{bins}, 0.0)};
  std::vector<rank_t> rank_of_bin(bins), round_of_bin(bins);
  std::vector<double> accumulated(ranks, 0.0);
  std::vector<rank_t> by_total(ranks);
  for (std::uint32_t k = 0; k < micro_batches; ++k) {
    std::iota(by_total.begin(), by_total.end(), rank_t{0});
    std::sort(by_total.begin(), by_total.end(), [&](rank_t x, rank_t y) {
      return accumulated[x] != accumulated[y] ? accumulated[x] < accumulated[y] : x < y;
    });
    for (rank_t j = 0; j < ranks; ++j) {
      const rank_t b = sorted[std::size_t{k} * ranks + j], r = by_total[j];
      rank_of_bin[b] = r;
      round_of_bin[b] = k;
      accumulated[r] += bin_cost[b];
      plan.costs[std::size_t{k} * ranks + r] = bin_cost[b];
    }
  }
  for (item_id i = 0; i < weights.size(); ++i) {
    const location l = a.where[i];
    plan.where[i] = micro_batch_location{rank_of_bin[l.rank], round_of_bin[l.rank], l.slot};
  }
  return plan;
}

/// Splits each rank's items into `micro_batches` micro-batches, keeping every item on the rank
/// `p` gives it (e.g. after a DP balancer): each rank's items go by `part` (default `lpt`) into m bins, each
/// rank's bins are sorted by cost descending (ties by bin index), and micro-batch k of every
/// rank is its k-th costliest bin. Aligning sorted columns minimises Σ_k max_r over all ways
/// to order each rank's bins (an exchange argument: swapping two rounds of one rank that are
/// out of order never lowers the sum).
///
/// - Complexity: O(n log n + d·m log m).
/// - Slot order: the partitioner's within each (rank, micro-batch) (lpt: placement order).
/// - Errors (`invalid_input`): micro_batches = 0, `p.bins` = 0, sizes that differ.
/// @see docs/DESIGN.md §5.1 `split_micro_batches(weights, partition, m, cost)`.
template <batch_cost C, class P = lpt>
requires partitioner<P, C>
[[nodiscard]] micro_batch_plan split_micro_batches(std::span<const length_t> weights, const partition& p,
                                                   std::uint32_t micro_batches, const C& cost, const P& part = {}) {
  detail::check_micro_batches("split_micro_batches", p.bins, micro_batches);
  if (p.bin_of.size() != weights.size())
    mmbal::detail::throw_invalid("split_micro_batches: partition has ", p.bin_of.size(), " items, weights ",
                                 weights.size());
  const rank_t ranks = p.bins;
  micro_batch_plan plan{ranks, micro_batches, std::vector<micro_batch_location>(weights.size()),
                        std::vector<double>(std::size_t{ranks} * micro_batches, 0.0)};
  std::vector<std::vector<item_id>> members(ranks);
  for (item_id i = 0; i < weights.size(); ++i) {
    if (p.bin_of[i] >= ranks)
      mmbal::detail::throw_invalid("split_micro_batches: item ", i, " on rank ", p.bin_of[i], " >= ", ranks);
    members[p.bin_of[i]].push_back(i);
  }
  std::vector<length_t> local;
  std::vector<std::uint32_t> sorted(micro_batches), round(micro_batches);
  for (rank_t r = 0; r < ranks; ++r) {
    local.clear();
    for (item_id i : members[r]) local.push_back(weights[i]);
    const assignment a = part(local, micro_batches, cost, constraints{});
    detail::check_split(a, local.size(), micro_batches);
    const std::vector<double> c = bin_loads(a, local, cost);
    std::iota(sorted.begin(), sorted.end(), 0u);
    std::sort(sorted.begin(), sorted.end(),
              [&](std::uint32_t x, std::uint32_t y) { return c[x] != c[y] ? c[x] > c[y] : x < y; });
    for (std::uint32_t k = 0; k < micro_batches; ++k) {
      round[sorted[k]] = k;
      plan.costs[std::size_t{k} * ranks + r] = c[sorted[k]];
    }
    for (std::size_t j = 0; j < members[r].size(); ++j)
      plan.where[members[r][j]] = micro_batch_location{r, round[a.where[j].rank], a.where[j].slot};
  }
  return plan;
}

/// DistTrain's intra-microbatch reordering (INTRAREORDER, Alg. 2): the samples of one global
/// (micro-)batch are sorted by size ascending (ties by id), each goes to the DP group with the
/// lowest current load (ties by group index), and the groups are concatenated — group 0's
/// samples, then group 1's, … — so that handing out the reordered sequence in these
/// contiguous chunks gives every DP rank a balanced share without changing the global batch
/// (synchronous semantics are kept: only the order within the batch changes).
struct reordered_batch {
  std::vector<item_id> order;          ///< the reordered samples (ids into the input)
  std::vector<std::uint32_t> offsets;  ///< DP group g holds order[offsets[g] .. offsets[g+1]); size dp + 1
};

/// @param sizes   per-sample size (tokens; the load is `cost` of a group, Σ sizes for
///                `cost::tokens`, the paper's choice)
/// @param dp_size number of DP groups m (> 0)
/// - Guarantee: none beyond list scheduling (max ≤ Σ/m + max size for additive costs); `lpt`
///   order (descending) is usually better — kept as the paper's baseline. The groups are
///   exactly those of `greedy_ascending` (this helper is its named, order-returning form).
/// - Complexity: O(n log n + n log m) (the paper scans the m groups: O(n log n + m·n)).
/// - Within a group, samples keep placement order (ascending size).
/// @see DistTrain §6.1, Alg. 2; `greedy_ascending`.
template <batch_cost C>
[[nodiscard]] reordered_batch intra_microbatch_reorder(std::span<const length_t> sizes, rank_t dp_size, const C& cost) {
  if (dp_size == 0) mmbal::detail::throw_invalid("intra_microbatch_reorder: dp_size = 0 (need at least one group)");
  const assignment a = greedy_ascending{}(sizes, dp_size, cost);
  const auto groups = a.items_by_bin();
  reordered_batch out;
  out.order.reserve(sizes.size());
  out.offsets.reserve(std::size_t{dp_size} + 1);
  for (const auto& g : groups) {
    out.offsets.push_back(static_cast<std::uint32_t>(out.order.size()));
    out.order.insert(out.order.end(), g.begin(), g.end());
  }
  out.offsets.push_back(static_cast<std::uint32_t>(out.order.size()));
  return out;
}

}  // namespace mmbal::balance
