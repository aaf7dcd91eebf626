#pragma once
/// @file
/// OrchMLLM's post-balancing algorithm for ConvTransformer encoders (appendix A, Alg. 5):
/// cost Σl + λ · b · (max l)², convolution unpadded, attention padded.

#include <mmbal/balance/constraints.hpp>
#include <mmbal/balance/detail/bin_queue.hpp>
#include <mmbal/balance/detail/placement.hpp>
#include <mmbal/balance/detail/validate.hpp>
#include <mmbal/balance/lpt.hpp>
#include <mmbal/core/detail/loser_tree.hpp>
#include <mmbal/core/detail/order.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/cost/functions.hpp>

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace mmbal::balance {

/// Conv LPT for `cost::conv_attention` (Σl + λ·b·(max l)²).
///
/// 1. B = the maximum Σl that LPT on Σl reaches (OrchMLLM Alg. 1's objective value).
/// 2. Over the items by weight descending (ties by id), fill batches in order: an item opens
///    a new batch when (size + 1) · l > B — the padded attention area of every batch stays
///    within B — until d batches are open; the first item that would open batch d + 1 ends
///    this phase.
/// 3. Each remaining item goes to the bin whose cost after adding it is least (ties by bin
///    index). Every bin is non-empty then and its max is fixed (items come in descending
///    order), so that cost is Σl + l + λ·(b + 1)·max², kept in a flat heap. The paper orders
///    this phase by Σl only; with λ = 0 both rules coincide, with λ > 0 the padded term of
///    the bin is counted too.
///
/// - Guarantee: a heuristic (no bound claimed by the paper).
/// - Complexity: O(n log n + n log d) (one LPT run for B, a sort, one heap pass).
/// - Slot order: placement order (descending length within each bin).
/// - Constraints: `count_cap` fixed (a full batch closes in phase 2, full bins are skipped in
///   phase 3). Rejected: `count_cap` equal, `capacity`, `groups`.
/// @see OrchMLLM appendix A, Alg. 5; docs/DESIGN.md §5.1.
struct conv_lpt {
  static constexpr const char* name = "conv";

  [[nodiscard]] assignment operator()(std::span<const length_t> weights, rank_t bins, const cost::conv_attention& cost,
                                      const constraints& limits = {}) const {
    detail::check_problem(name, weights, bins, limits);
    if (limits.counts.kind == count_cap::mode::equal) detail::reject_constraint(name, "count_cap equal");
    if (limits.capacity) detail::reject_constraint(name, "capacity");
    if (!limits.groups.empty()) detail::reject_constraint(name, "groups");
    const std::size_t n = weights.size();
    const std::uint32_t cap =
        limits.counts.kind == count_cap::mode::fixed ? limits.counts.cap : static_cast<std::uint32_t>(n);

    // Phase 1: B = LPT's max Σl.
    const assignment base = lpt{}(weights, bins, cost::tokens{});
    std::vector<std::uint64_t> sums(bins, 0);
    for (std::size_t i = 0; i < n; ++i) sums[base.where[i].rank] += weights[i];
    const std::uint64_t bound = n == 0 ? 0 : *std::max_element(sums.begin(), sums.end());

    // Phase 2: contiguous batches over descending lengths with padded area ≤ B.
    const std::vector<item_id> order = mmbal::detail::descending_order(weights);
    detail::placement_builder out(n, bins);
    std::vector<std::uint64_t> sum(bins, 0);
    std::vector<length_t> longest(bins, 0);
    rank_t open = 0;  // batches opened so far; the current one is open − 1
    std::size_t next = 0;
    for (; next < n; ++next) {
      const item_id i = order[next];
      const length_t l = weights[i];
      if (open == 0) {
        open = 1;
      } else {
        const std::uint32_t size = out.count(open - 1);
        if ((std::uint64_t{size} + 1) * l > bound || size >= cap) {
          if (open == bins) break;
          ++open;
        }
      }
      const rank_t b = open - 1;
      out.place(i, b);
      sum[b] += l;
      longest[b] = std::max(longest[b], l);
    }

    // Phase 3: remaining items to the bin with the least cost after adding.
    if (next < n) {
      const double lambda = cost.lambda();
      auto key_of = [&](rank_t b) {
        // Cost after adding one more item of length l, minus l (the same for every bin).
        const double m = longest[b];
        return mmbal::detail::wide_key::make(
            static_cast<double>(sum[b]) + lambda * static_cast<double>(out.count(b) + 1) * (m * m), b);
      };
      // All d bins are open and non-empty here; build the heap by pushing in bin order.
      detail::min_queue<mmbal::detail::wide_key> heap;
      heap.reserve(bins);
      for (rank_t b = 0; b < bins; ++b)
        if (out.count(b) < cap) heap.push(key_of(b));
      for (; next < n; ++next) {
        const item_id i = order[next];
        if (heap.empty())
          mmbal::detail::throw_invalid(name, ": no bin can take item ", i, " (weight ", weights[i],
                                       "): every bin is at its count cap");
        const rank_t b = heap.top().bin;
        out.place(i, b);
        sum[b] += weights[i];
        heap.pop();
        if (out.count(b) < cap) heap.push(key_of(b));
      }
    }
    return std::move(out).finish();
  }
};

}  // namespace mmbal::balance
