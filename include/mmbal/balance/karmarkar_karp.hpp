#pragma once
/// @file
/// Karmarkar–Karp k-way largest differencing (LDM), unconstrained and equal-count.

#include <mmbal/balance/constraints.hpp>
#include <mmbal/balance/detail/placement.hpp>
#include <mmbal/balance/detail/resplit.hpp>
#include <mmbal/balance/detail/units.hpp>
#include <mmbal/balance/detail/validate.hpp>
#include <mmbal/core/concepts.hpp>
#include <mmbal/core/types.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <queue>
#include <set>
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
/// lowest maximum subset cost (ties: the smaller light). Then *re-differencing*: the costliest
/// bin and one of its 8 cheapest partners (cheapest first) pool their items and split them
/// again — by two-way balanced differencing (the same five chunkings with d = 2; ≤ 64 pairs
/// by complete differencing of the pair differences, CKK, ≤ 256 nodes), then, for ≤ 64 pooled
/// items, by the complete search `detail::resplit_search` started from that result (exact
/// unless it runs out of 1,024 nodes). If no partner helps, the costliest bin and two of its 8
/// cheapest partners (≤ 64 pooled items) are re-split three ways the same way. The new parts
/// hold ⌊q/w⌋ or ⌈q/w⌉ of the q pooled items, so the counts stay within ⌊n/d⌋..⌈n/d⌉. The
/// first re-split whose parts all end below the costliest bin is taken; it stops when the
/// costliest bin gains from no group or after 2d + 52 re-split attempts (2d + 16 and one full
/// round of 8 pairs and 28 triples). Every accepted step lowers the sorted load vector
/// lexicographically, so it terminates. Capped LPT is never run: differencing plus exact local
/// re-splits.
///
/// Index back-tracking: a subset is a (cost, head, tail) of an intrusive singly linked list
/// over the items (`next[item]`); joining two subsets links one list behind the other in
/// O(1). Tuples store only their non-empty subsets (a fresh item's tuple has one), so no
/// d-length list is ever copied.
///
/// - Guarantee: a heuristic; for d = 2 usually far better than LPT (Karmarkar & Karp 1982);
///   never claimed to be optimal. Equal counts: each bin holds ⌊n/d⌋ or ⌈n/d⌉ items. On the
///   generated omni LLM phase at 8 and 64 items per bin it matched or beat capped `lpt`, and
///   on all 5,160 random instances with ≥ 2 items per bin of bench/RESULTS.md ("Session 12")
///   it is never worse (tests/balance/kk_equal_test.cpp); not a proven bound. Costs are summed in double in a fixed
///   order; every choice has a deterministic tie-break.
/// - Complexity: O(n log n) for the heap of tuples plus, per combination, O(k + o log o) with
///   k the non-empty subsets of the two tuples (≤ 2d) and o those that meet (both sides
///   non-empty): the rest are two already sorted runs, merged; equal-count: five
///   differencing runs, O(n log n + 5 · (n/d) · d log d), plus ≤ 2d + 52 re-splits of
///   O(q log q + 5 · 256 · q) each (q = the pooled items, ≤ 3⌈n/d⌉; the CKK budget applies
///   when a two-way split has ≤ 64 pairs, the search's 1,024 nodes of O(w) when q ≤ 64).
/// - Slot order: the order of the subset's linked list (the combination order); equal counts:
///   the order of the last split that formed the bin.
/// - Constraints: `count_cap` equal (BLDM); `groups` without count caps (each group is one
///   unit of cost Σ c(w)). Rejected: `count_cap` fixed, `capacity`, groups with equal counts.
/// @see Karmarkar & Karp (1982); Michiels, Korst, Aarts, van Leeuwen (2003) for the balanced
///      k-way variant; Korf (1998) for the complete differencing (CKK); Yakir (1996) for the
///      two-way balanced pair differencing; Zhang, Mouratidis, Pang (IJCAI 2011) on BLDM's weakness with skewed
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
    // `ways` subsets per tuple: `bins` for the partition, 2 for the pairwise re-splits.
    auto spread = [](const std::vector<subset>& t, std::size_t ways) {
      if (t.empty()) return 0.0;
      return t.front().cost - (t.size() < ways ? 0.0 : t.back().cost);
    };

    // One differencing run over `tuples` (consumed): the last tuple, its subsets' lists in `next`.
    auto differencing = [&](std::vector<std::vector<subset>>& tuples, std::vector<std::uint32_t>& next,
                            std::size_t ways) {
      // Max-heap by spread, ties by smaller tuple id (creation order).
      using entry = std::pair<double, std::uint32_t>;
      auto lower = [](const entry& a, const entry& b) {
        return a.first != b.first ? a.first < b.first : a.second > b.second;
      };
      std::priority_queue<entry, std::vector<entry>, decltype(lower)> heap(lower);
      for (std::uint32_t t = 0; t < tuples.size(); ++t) heap.emplace(spread(tuples[t], ways), t);
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
        const std::size_t a_alone = std::min<std::size_t>(ka, ways - kb);
        const std::size_t b_alone = std::min<std::size_t>(kb, ways - ka);
        overlap.clear();
        for (std::size_t i = a_alone; i < ka; ++i) {
          const std::size_t j = ways - 1 - i;
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
        heap.emplace(spread(tuples[id], ways), id);
      }
      return heap.empty() ? std::vector<subset>{} : std::move(tuples[heap.top().second]);
    };

    std::vector<std::uint32_t> next(m, ~std::uint32_t{0});
    if (!equal) {
      std::vector<std::vector<subset>> tuples(m);
      for (std::uint32_t k = 0; k < m; ++k) tuples[k].push_back(subset{unit_cost[k], k, k});
      const std::vector<subset> last = differencing(tuples, next, bins);
      detail::placement_builder out(n, bins);
      for (std::size_t s = 0; s < last.size(); ++s)
        for (std::uint32_t k = last[s].head;; k = next[k]) {
          u.for_each(k, [&](item_id i) { out.place(i, static_cast<rank_t>(s)); });
          if (k == last[s].tail) break;
        }
      return std::move(out).finish();
    }

    // Equal counts (units are single items here). BLDM over `ways` subsets of the units in
    // `desc` (by cost descending, ties by id): chunk 0 is the `ways` costliest units; each
    // lower chunk takes `light` units of the tail (the costliest-last units, dealt round-robin
    // over the lower chunks) and fills up with consecutive units from the middle. light = 0
    // is classic BLDM (each subset gets one unit per rank band, so the subsets holding the
    // heaviest units must also take a mid-size one); light > 0 lets those subsets pair with
    // the lightest units as capped LPT does, while the consecutive middle keeps small-spread
    // tuples for the fine balancing at the end. Runs light ∈ {0, w/4, w/2, 3w/4, w} and keeps
    // the lowest maximum (ties: the smaller light). Result: the subsets' unit lists, costliest
    // first, each with ⌊|desc|/w⌋ or ⌈|desc|/w⌉ units.
    struct split {
      std::vector<std::vector<std::uint32_t>> lists;
      std::vector<double> costs;
    };
    // Complete two-way differencing: at most 64 pairs, 256 nodes per run (bounds its cost).
    constexpr std::size_t node_budget = 256, complete_pairs = 64;
    auto balanced_differencing = [&](std::span<const std::uint32_t> desc, std::size_t ways) {
      const std::size_t count = desc.size();
      const std::size_t chunks = (count + ways - 1) / ways;
      auto chunked = [&](std::size_t light) {
        std::vector<std::vector<subset>> tuples(std::max<std::size_t>(chunks, 1));
        if (count == 0) return tuples;
        std::vector<std::size_t> room(chunks, ways);
        room[chunks - 1] = count - (chunks - 1) * ways;
        auto put = [&](std::size_t c, std::uint32_t k) {
          tuples[c].push_back(subset{unit_cost[k], k, k});
          --room[c];
        };
        const std::size_t first_mid = std::min(count, ways);
        for (std::size_t j = 0; j < first_mid; ++j) put(0, desc[j]);
        if (chunks > 1) {
          const std::size_t lower = chunks - 1;
          const std::size_t tail = std::min(count - first_mid, light * lower);
          std::size_t c = 0;
          for (std::size_t j = count - tail; j < count; ++j) {
            while (room[1 + c] == 0) c = (c + 1) % lower;
            put(1 + c, desc[j]);
            c = (c + 1) % lower;
          }
          std::size_t fill = 1;
          for (std::size_t j = first_mid; j < count - tail; ++j) {
            while (room[fill] == 0) ++fill;
            put(fill, desc[j]);
          }
        }
        for (auto& t : tuples) std::sort(t.begin(), t.end(), by_cost_desc);
        return tuples;
      };
      // Two ways and few pairs: the complete differencing of the pairs (Korf's CKK over the
      // pair differences, depth first, the differencing branch first, so its first leaf is the
      // plain differencing result) with a budget of nodes; a pair's sign says which subset
      // takes its heavier unit, so counts stay balanced whatever the signs.
      auto complete_two_way = [&](const std::vector<std::vector<subset>>& tuples, split& out) {
        struct composite {
          double value;
          std::int32_t left, right;  // leaf: left = pair, right = -1
          bool sum;
        };
        std::vector<composite> pool;
        for (std::size_t p = 0; p < tuples.size(); ++p)
          pool.push_back({tuples[p][0].cost - (tuples[p].size() > 1 ? tuples[p][1].cost : 0.0),
                          static_cast<std::int32_t>(p), -1, false});
        const std::size_t pairs = pool.size();
        std::vector<std::int8_t> sign(pairs, 1), best_sign(pairs, 1);
        double best_gap = std::numeric_limits<double>::infinity();
        std::size_t visited = 0;
        std::vector<std::pair<std::int32_t, std::int8_t>> stack;
        auto assign = [&](std::int32_t c, std::int8_t sg) {
          stack.assign(1, {c, sg});
          while (!stack.empty()) {
            const auto [id, sgn] = stack.back();
            stack.pop_back();
            const composite& x = pool[static_cast<std::size_t>(id)];
            if (x.right < 0) {
              sign[static_cast<std::size_t>(x.left)] = sgn;
              continue;
            }
            stack.emplace_back(x.left, sgn);
            stack.emplace_back(x.right, x.sum ? sgn : static_cast<std::int8_t>(-sgn));
          }
        };
        auto before = [&](std::int32_t a, std::int32_t b) {
          const double va = pool[static_cast<std::size_t>(a)].value, vb = pool[static_cast<std::size_t>(b)].value;
          return va != vb ? va > vb : a < b;
        };
        auto search = [&](auto& self, const std::vector<std::int32_t>& list) -> void {
          ++visited;
          double rest = 0;
          for (std::size_t i = 1; i < list.size(); ++i) rest += pool[static_cast<std::size_t>(list[i])].value;
          const double first = pool[static_cast<std::size_t>(list[0])].value;
          if (list.size() == 1 || first >= rest) {
            if (first - rest < best_gap) {
              best_gap = first - rest;
              for (std::size_t i = 0; i < list.size(); ++i) assign(list[i], i == 0 ? 1 : -1);
              best_sign = sign;
            }
            return;
          }
          const double second = pool[static_cast<std::size_t>(list[1])].value;
          for (const bool sum : {false, true}) {
            if (visited >= node_budget || best_gap == 0) return;
            if (sum && first + second - (rest - second) >= best_gap) return;
            pool.push_back({sum ? first + second : first - second, list[0], list[1], sum});
            const auto id = static_cast<std::int32_t>(pool.size() - 1);
            std::vector<std::int32_t> child(list.begin() + 2, list.end());
            child.insert(std::lower_bound(child.begin(), child.end(), id, before), id);
            self(self, child);
          }
        };
        std::vector<std::int32_t> all(pairs);
        for (std::size_t p = 0; p < pairs; ++p) all[p] = static_cast<std::int32_t>(p);
        std::sort(all.begin(), all.end(), before);
        search(search, all);
        out.lists.assign(2, {});
        out.costs.assign(2, 0.0);
        for (std::size_t p = 0; p < pairs; ++p) {
          const std::size_t heavy = best_sign[p] > 0 ? 0 : 1;
          out.lists[heavy].push_back(tuples[p][0].head);
          out.costs[heavy] += tuples[p][0].cost;
          if (tuples[p].size() > 1) {
            out.lists[1 - heavy].push_back(tuples[p][1].head);
            out.costs[1 - heavy] += tuples[p][1].cost;
          }
        }
        if (out.costs[1] > out.costs[0]) {
          std::swap(out.lists[0], out.lists[1]);
          std::swap(out.costs[0], out.costs[1]);
        }
      };
      split best;
      bool have = false;
      std::size_t previous_light = ~std::size_t{0};
      for (const std::size_t light : {std::size_t{0}, ways / 4, ways / 2, ways * 3 / 4, ways}) {
        if (light == previous_light) continue;  // same chunking as the last run (small `ways`)
        previous_light = light;
        std::vector<std::vector<subset>> tuples = chunked(light);
        if (ways == 2 && count > 1 && chunks <= complete_pairs) {
          split trial;
          complete_two_way(tuples, trial);
          if (!have || trial.costs.front() < best.costs.front()) best = std::move(trial);
          have = true;
          continue;
        }
        const std::vector<subset> result = differencing(tuples, next, ways);
        const double top = result.empty() ? 0.0 : result.front().cost;
        if (!have || top < best.costs.front()) {
          best.lists.assign(result.size(), {});
          best.costs.assign(result.size(), 0.0);
          for (std::size_t s = 0; s < result.size(); ++s) {
            for (std::uint32_t k = result[s].head;; k = next[k]) {
              best.lists[s].push_back(k);
              if (k == result[s].tail) break;
            }
            best.costs[s] = result[s].cost;
          }
          if (best.costs.empty()) best.costs.push_back(0.0);
          have = true;
        }
        if (chunks <= 1) break;  // one chunk: every chunking is the same
      }
      return best;
    };
    auto desc_order = [&](std::vector<std::uint32_t>& v) {
      std::sort(v.begin(), v.end(), [&](std::uint32_t a, std::uint32_t b) {
        return unit_cost[a] != unit_cost[b] ? unit_cost[a] > unit_cost[b] : a < b;
      });
    };

    std::vector<std::uint32_t> order(m);
    for (std::uint32_t k = 0; k < m; ++k) order[k] = k;
    desc_order(order);
    split partition = balanced_differencing(order, bins);
    std::vector<std::vector<std::uint32_t>>& lists = partition.lists;
    lists.resize(bins);
    std::vector<double> load(bins, 0.0);
    for (std::size_t b = 0; b < lists.size(); ++b)
      for (const std::uint32_t k : lists[b]) load[b] += unit_cost[k];

    // Re-differencing: the costliest bin and one of the `partners` cheapest (then, if none
    // helps, two of the `triple_partners` cheapest, ≤ `exact_units` units) pool their units and split them again: by
    // balanced differencing, then, for at most `exact_units` units, by the complete search
    // `detail::resplit_search` from that result (exact unless it runs out of
    // `split_nodes`). The new parts hold ⌊q/w⌋ or ⌈q/w⌉ of the q pooled units, which stays
    // within the bins' counts ⌊n/d⌋..⌈n/d⌉. The first re-split whose parts all end below the
    // costliest bin is taken. Stops when the costliest bin gains from no group or after
    // `budget` re-splits. Every accepted step lowers the sorted load vector lexicographically
    // (one bin at the maximum leaves it, no bin reaches it), so it terminates.
    constexpr std::size_t partners = 8, triple_partners = 8, exact_units = 64, split_nodes = 1024;
    // 2d + 16, plus one full round (every pair and triple), so the last round is never cut short.
    std::size_t budget = 2 * std::size_t{bins} + 16 + partners + triple_partners * (triple_partners - 1) / 2;
    std::set<std::pair<double, rank_t>> by_load;
    for (rank_t b = 0; b < bins; ++b) by_load.emplace(load[b], b);
    std::vector<std::uint32_t> pooled;
    std::vector<double> pooled_cost;
    const std::vector<std::uint32_t> unit_sizes(exact_units, 1);  // kk pools single items
    auto resplit = [&](std::span<const rank_t> group, double top_load) {
      const std::size_t ways = group.size();
      pooled.clear();
      for (const rank_t b : group) pooled.insert(pooled.end(), lists[b].begin(), lists[b].end());
      desc_order(pooled);
      split parts = balanced_differencing(pooled, ways);
      parts.lists.resize(ways);
      auto loads_of = [&] {
        std::vector<double> l(ways, 0.0);
        for (std::size_t s = 0; s < ways; ++s)
          for (const std::uint32_t k : parts.lists[s]) l[s] += unit_cost[k];
        return l;
      };
      std::vector<double> part_load = loads_of();
      if (pooled.size() <= exact_units) {
        pooled_cost.clear();
        for (const std::uint32_t k : pooled) pooled_cost.push_back(unit_cost[k]);
        const std::uint64_t q = pooled.size();
        const detail::resplit_result better = detail::resplit_search(
            pooled_cost, std::span(unit_sizes).first(pooled.size()), ways, q / ways, (q + ways - 1) / ways,
            *std::max_element(part_load.begin(), part_load.end()), split_nodes);
        if (better.found) {
          for (auto& l : parts.lists) l.clear();
          for (std::size_t i = 0; i < pooled.size(); ++i) parts.lists[better.part[i]].push_back(pooled[i]);
          part_load = loads_of();
        }
      }
      if (*std::max_element(part_load.begin(), part_load.end()) >= top_load) return false;
      for (std::size_t s = 0; s < ways; ++s) {
        by_load.erase({load[group[s]], group[s]});
        lists[group[s]] = std::move(parts.lists[s]);
        load[group[s]] = part_load[s];
        by_load.emplace(load[group[s]], group[s]);
      }
      return true;
    };
    std::vector<rank_t> cheap;
    while (budget > 0 && bins > 1) {
      const auto [top_load, top] = *by_load.rbegin();
      cheap.clear();
      for (auto it = by_load.begin(); it != by_load.end() && cheap.size() < partners && it->first < top_load; ++it)
        cheap.push_back(it->second);
      bool improved = false;
      for (std::size_t a = 0; a < cheap.size() && !improved && budget > 0; ++a) {
        const rank_t group[2] = {top, cheap[a]};
        --budget;
        improved = resplit(group, top_load);
      }
      const std::size_t few = std::min(cheap.size(), triple_partners);
      for (std::size_t a = 0; a < few && !improved; ++a)
        for (std::size_t b = a + 1; b < few && !improved && budget > 0; ++b) {
          const rank_t group[3] = {top, cheap[a], cheap[b]};
          if (lists[top].size() + lists[cheap[a]].size() + lists[cheap[b]].size() > exact_units) continue;
          --budget;
          improved = resplit(group, top_load);
        }
      if (!improved) break;
    }

    detail::placement_builder out(n, bins);
    for (rank_t b = 0; b < bins; ++b)
      for (const std::uint32_t k : lists[b]) u.for_each(k, [&](item_id i) { out.place(i, b); });
    return std::move(out).finish();
  }
};

}  // namespace mmbal::balance
