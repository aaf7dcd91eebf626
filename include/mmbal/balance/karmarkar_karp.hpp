#pragma once
/// @file
/// Karmarkar–Karp k-way largest differencing (LDM), unconstrained and equal-count.

#include <mmbal/balance/constraints.hpp>
#include <mmbal/balance/detail/placement.hpp>
#include <mmbal/balance/detail/units.hpp>
#include <mmbal/balance/detail/validate.hpp>
#include <mmbal/core/concepts.hpp>
#include <mmbal/core/types.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <queue>
#include <span>
#include <utility>
#include <vector>

namespace mmbal::balance {

/// Karmarkar–Karp largest differencing for an `additive_cost`.
///
/// A *tuple* is a tentative partition into d subsets, kept sorted by subset cost. Each item
/// starts as the tuple (c(w), 0, …, 0). Repeatedly the two tuples with the largest spread
/// (max − min subset cost; ties by creation order) are combined: the i-th largest subset of
/// one joins the i-th smallest of the other, so the two spreads cancel as far as possible.
/// The last tuple is the partition; its subsets go to bins in descending cost (ties by first
/// item). With `count_cap::equal` a balanced variant (BLDM) is used: the items, by cost
/// descending, are cut into chunks of d items (the last one padded with empty subsets), each
/// chunk is one tuple with one item per subset, and every combination keeps exactly one subset
/// of each chunk per subset — so each bin gets ⌊n/d⌋ or ⌈n/d⌉ items. Classic BLDM cuts the
/// chunks as consecutive ranks; then the bins holding the d heaviest items must each take one
/// item of every band, however heavy (1.27× the equal-count bound on omni at 8 per rank). Here
/// chunk 0 is the d heaviest items and each lower chunk takes `light` items of the light tail
/// (dealt round-robin over the lower chunks) plus consecutive middle items, so a heavy subset
/// can pair with the lightest items as capped LPT does while the consecutive middle keeps the
/// small-spread tuples that do the fine balancing at the end. The differencing runs for
/// light ∈ {0, d/4, d/2, 3d/4, d} (light = 0 is classic BLDM) and keeps the partition with the
/// lowest maximum subset cost (ties: the smaller light).
///
/// Index back-tracking: a subset is a (cost, head, tail) of an intrusive singly linked list
/// over the items (`next[item]`); joining two subsets links one list behind the other in
/// O(1). Tuples store only their non-empty subsets (a fresh item's tuple has one), so no
/// d-length list is ever copied.
///
/// - Guarantee: a heuristic; for d = 2 usually far better than LPT (Karmarkar & Karp 1982);
///   never claimed to be optimal. Equal counts: on the generated omni LLM phase at 8 and 64
///   items per bin it matched or beat capped `lpt` (bench/RESULTS.md); on random instances it
///   is sometimes worse (≈ 1.5 % of them, by up to 3 %). Costs are summed in double in a fixed order.
/// - Complexity: O(n log n) for the heap of tuples plus, per combination, O(k + o log o) with
///   k the non-empty subsets of the two tuples (≤ 2d) and o those that meet (both sides
///   non-empty): the rest are two already sorted runs, merged; equal-count: five
///   differencing runs, O(n log n + 5 · (n/d) · d log d).
/// - Slot order: the order of the subset's linked list (the combination order).
/// - Constraints: `count_cap` equal (BLDM); `groups` without count caps (each group is one
///   unit of cost Σ c(w)). Rejected: `count_cap` fixed, `capacity`, groups with equal counts.
/// @see Karmarkar & Karp (1982); Michiels, Korst, Aarts, van Leeuwen (2003) for the balanced
///      k-way variant; Zhang, Mouratidis, Pang (IJCAI 2011) on BLDM's weakness with skewed
///      numbers; docs/DESIGN.md §5.1.
struct karmarkar_karp {
  static constexpr const char* name = "kk";

  template <additive_cost C>
  [[nodiscard]] assignment operator()(std::span<const length_t> weights, rank_t bins, const C& cost,
                                      const constraints& limits = {}) const {
    detail::check_problem(name, weights, bins, limits);
    if (limits.counts.kind == count_cap::mode::fixed) detail::reject_constraint(name, "count_cap fixed");
    if (limits.capacity) detail::reject_constraint(name, "capacity");
    const bool equal = limits.counts.kind == count_cap::mode::equal;
    if (equal && !limits.groups.empty()) detail::reject_constraint(name, "count_cap equal with groups");
    const std::size_t n = weights.size();
    const detail::units u = detail::make_units(n, limits.groups);
    const std::uint32_t m = u.count;

    std::vector<double> unit_cost(m, 0.0);
    for (std::uint32_t k = 0; k < m; ++k) u.for_each(k, [&](item_id i) { unit_cost[k] += cost.item(weights[i]); });

    struct subset {
      double cost;
      std::uint32_t head, tail;  // units
    };
    // Tuples: non-empty subsets sorted by (cost desc, head asc); the other d − k are empty.
    auto by_cost_desc = [](const subset& a, const subset& b) {
      return a.cost != b.cost ? a.cost > b.cost : a.head < b.head;
    };
    auto spread = [&](const std::vector<subset>& t) {
      if (t.empty()) return 0.0;
      return t.front().cost - (t.size() < bins ? 0.0 : t.back().cost);
    };

    // One differencing run over `tuples` (consumed): the last tuple, its subsets' lists in `next`.
    auto differencing = [&](std::vector<std::vector<subset>>& tuples, std::vector<std::uint32_t>& next) {
      // Max-heap by spread, ties by smaller tuple id (creation order).
      using entry = std::pair<double, std::uint32_t>;
      auto lower = [](const entry& a, const entry& b) {
        return a.first != b.first ? a.first < b.first : a.second > b.second;
      };
      std::priority_queue<entry, std::vector<entry>, decltype(lower)> heap(lower);
      for (std::uint32_t t = 0; t < tuples.size(); ++t) heap.emplace(spread(tuples[t]), t);
      std::vector<subset> merged, overlap, alone;
      while (heap.size() > 1) {
        const std::uint32_t a = heap.top().second;
        heap.pop();
        const std::uint32_t b = heap.top().second;
        heap.pop();
        const std::vector<subset>& ta = tuples[a];
        const std::vector<subset>& tb = tuples[b];
        // Slot i of A (descending, empties last) meets slot d−1−i of B. A's first
        // min(ka, d−kb) subsets meet empty slots, as do B's first min(kb, d−ka): both runs
        // stay sorted. Only the overlap (both sides non-empty) needs a sort, then two merges.
        const std::size_t ka = ta.size(), kb = tb.size();
        const std::size_t a_alone = std::min<std::size_t>(ka, bins - kb);
        const std::size_t b_alone = std::min<std::size_t>(kb, bins - ka);
        overlap.clear();
        for (std::size_t i = a_alone; i < ka; ++i) {
          const std::size_t j = bins - 1 - i;
          subset s = ta[i];
          s.cost += tb[j].cost;
          next[s.tail] = tb[j].head;
          s.tail = tb[j].tail;
          overlap.push_back(s);
        }
        std::sort(overlap.begin(), overlap.end(), by_cost_desc);
        alone.clear();
        std::merge(ta.begin(), ta.begin() + static_cast<std::ptrdiff_t>(a_alone), tb.begin(),
                   tb.begin() + static_cast<std::ptrdiff_t>(b_alone), std::back_inserter(alone), by_cost_desc);
        merged.clear();
        std::merge(alone.begin(), alone.end(), overlap.begin(), overlap.end(), std::back_inserter(merged),
                   by_cost_desc);
        const auto id = static_cast<std::uint32_t>(tuples.size());
        tuples.emplace_back();
        tuples.back().swap(merged);
        merged.swap(tuples[a]);  // reuse A's storage as the next scratch
        std::vector<subset>().swap(tuples[b]);
        heap.emplace(spread(tuples[id]), id);
      }
      return heap.empty() ? std::vector<subset>{} : std::move(tuples[heap.top().second]);
    };

    std::vector<subset> last;
    std::vector<std::uint32_t> next(m, ~std::uint32_t{0});
    if (equal) {
      // Units by cost descending, ties by id.
      std::vector<std::uint32_t> order(m);
      for (std::uint32_t k = 0; k < m; ++k) order[k] = k;
      std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
        return unit_cost[a] != unit_cost[b] ? unit_cost[a] > unit_cost[b] : a < b;
      });
      // Chunk 0 is the d costliest units. Each lower chunk takes `light` units of the tail (the
      // costliest-last units, dealt round-robin over the lower chunks) and fills up with
      // consecutive units from the middle. light = 0 is classic BLDM (each bin gets one unit
      // per rank band, so the bins holding the heaviest units must also take a mid-size one);
      // light > 0 lets those bins pair with the lightest units as capped LPT does, while
      // the consecutive middle keeps small-spread tuples for the fine balancing at the end.
      const std::size_t chunks = (m + bins - 1) / bins;
      auto chunked = [&](std::size_t light) {
        std::vector<std::vector<subset>> tuples(std::max<std::size_t>(chunks, 1));
        if (m == 0) return tuples;
        std::vector<std::size_t> room(chunks, bins);
        room[chunks - 1] = m - (chunks - 1) * std::size_t{bins};
        auto put = [&](std::size_t c, std::uint32_t k) {
          tuples[c].push_back(subset{unit_cost[k], k, k});
          --room[c];
        };
        const std::size_t first_mid = std::min<std::size_t>(m, bins);
        for (std::size_t j = 0; j < first_mid; ++j) put(0, order[j]);
        if (chunks > 1) {
          const std::size_t lower = chunks - 1;
          const std::size_t tail = std::min(m - first_mid, light * lower);
          std::size_t c = 0;
          for (std::size_t j = m - tail; j < m; ++j) {
            while (room[1 + c] == 0) c = (c + 1) % lower;
            put(1 + c, order[j]);
            c = (c + 1) % lower;
          }
          std::size_t fill = 1;
          for (std::size_t j = first_mid; j < m - tail; ++j) {
            while (room[fill] == 0) ++fill;
            put(fill, order[j]);
          }
        }
        for (auto& t : tuples) std::sort(t.begin(), t.end(), by_cost_desc);
        return tuples;
      };
      // Three chunkings (no tail, half of each chunk, all of it); the one whose differencing
      // ends with the lowest maximum wins (ties: the earlier).
      std::vector<std::uint32_t> trial_next;
      bool have = false;
      for (const std::size_t light : {std::size_t{0}, std::size_t{bins} / 4, std::size_t{bins} / 2,
                                      std::size_t{bins} * 3 / 4, std::size_t{bins}}) {
        std::vector<std::vector<subset>> tuples = chunked(light);
        trial_next.assign(m, ~std::uint32_t{0});
        std::vector<subset> result = differencing(tuples, trial_next);
        const double top = result.empty() ? 0.0 : result.front().cost;
        if (!have || top < (last.empty() ? 0.0 : last.front().cost)) {
          last = std::move(result);
          next.swap(trial_next);
          have = true;
        }
        if (chunks <= 1) break;  // one chunk: every chunking is the same
      }
    } else {
      std::vector<std::vector<subset>> tuples(m);
      for (std::uint32_t k = 0; k < m; ++k) tuples[k].push_back(subset{unit_cost[k], k, k});
      last = differencing(tuples, next);
    }

    detail::placement_builder out(n, bins);
    for (std::size_t s = 0; s < last.size(); ++s)
      for (std::uint32_t k = last[s].head;; k = next[k]) {
        u.for_each(k, [&](item_id i) { out.place(i, static_cast<rank_t>(s)); });
        if (k == last[s].tail) break;
      }
    return std::move(out).finish();
  }
};

}  // namespace mmbal::balance
