#pragma once
/// @file
/// The one exact re-split of a few pooled bins (namespace mmbal::balance::detail): `refine`'s
/// last escape and `kk`'s re-differencing both split the units of 2 or 3 bins anew with it.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace mmbal::balance::detail {

/// Result of `resplit_search`.
struct resplit_result {
  std::vector<std::uint8_t> part;  ///< part (0 .. ways − 1) of each pooled unit, in the input order
  std::vector<double> load;        ///< the parts' loads (summed in the input order) when `found`
  double max_load = 0;             ///< its costliest part; the incumbent if nothing better was found
  bool found = false;              ///< a split strictly below the incumbent was found
  std::uint64_t nodes = 0;         ///< nodes visited (≤ the budget)
};

/// Depth-first branch and bound (complete greedy, Korf 1998) over the splits of pooled units
/// into `ways` (2 or 3) parts whose item counts each lie in [lo, hi], for the lowest maximum
/// part strictly below `incumbent`. `cost` holds the units' costs sorted descending (≥ 0),
/// `size` their items (≥ 1, a group is one unit). Any counts the bounds admit are allowed, so
/// it serves free counts, `count_cap` fixed and equal (`kk`'s re-differencing: [⌊q/w⌋, ⌈q/w⌉]
/// with unit sizes 1), and groups.
///
/// Units are placed in order, each first into the cheapest part with room (ties: index),
/// skipping a part identical in (cost, count) to one already tried. A node is cut when some
/// part cannot end below the best maximum so far: its cost, its cost plus the smallest remaining
/// units it still needs for its count, or the remaining cost minus the largest remaining units
/// the other parts have room for; or when the counts can no longer be met. Stops at a split
/// reaching the root's bound (the mean, rounded up when every cost is an integer), or after
/// `node_budget` nodes.
/// - Guarantee: deterministic; `found` ⇒ every part's count is in [lo, hi] and its load <
///   `incumbent`; exhaustive within the budget (no split below `max_load` was skipped).
/// - Complexity: O(node_budget · ways) time, O(q) memory, recursion depth q.
/// @see Korf (1998) "A complete anytime algorithm for number partitioning"; docs/DESIGN.md §5.1.
inline resplit_result resplit_search(std::span<const double> cost, std::span<const std::uint32_t> size,
                                     std::size_t ways, std::uint64_t lo, std::uint64_t hi, double incumbent,
                                     std::uint64_t node_budget) {
  constexpr std::size_t max_ways = 3;
  resplit_result out;
  out.max_load = incumbent;
  const std::size_t q = cost.size();
  if (ways < 2 || ways > max_ways || q == 0) return out;
  std::vector<double> prefix(q + 1, 0.0);            // prefix[i] = Σ cost[0 .. i)
  std::vector<std::uint64_t> items_after(q + 1, 0);  // items of units i .. q − 1
  bool integral = true;
  std::uint64_t smax = 1;
  for (std::size_t i = 0; i < q; ++i) {
    prefix[i + 1] = prefix[i] + cost[i];
    integral = integral && cost[i] == std::floor(cost[i]);
    smax = std::max<std::uint64_t>(smax, size[i]);
  }
  for (std::size_t i = q; i-- > 0;) items_after[i] = items_after[i + 1] + size[i];
  const double total = prefix[q];
  integral = integral && total < 0x1.0p52;
  const std::uint64_t items = items_after[0], w = ways;
  // Every part ends in [lo, hi] and the parts hold all items: each part in [elo, ehi].
  hi = std::min(hi, items);
  if (items < (w - 1) * lo || items > w * hi) return out;
  const std::uint64_t elo = std::max(lo, items > (w - 1) * hi ? items - (w - 1) * hi : 0);
  const std::uint64_t ehi = std::min(hi, items - (w - 1) * lo);
  if (elo > ehi) return out;
  std::array<double, max_ways> load{};
  std::array<std::uint64_t, max_ways> count{};
  std::vector<std::uint8_t> part(q, 0);
  constexpr double never = std::numeric_limits<double>::infinity();
  // Lower bound on the final maximum below a node at depth i (units i .. q − 1 remain).
  auto bound = [&](std::size_t i) {
    const std::uint64_t rest_items = items_after[i];
    const std::size_t rest = q - i;
    const double rest_sum = total - prefix[i];
    std::uint64_t need_all = 0, room_all = 0;
    for (std::size_t b = 0; b < ways; ++b) {
      need_all += count[b] < elo ? elo - count[b] : 0;
      room_all += ehi - count[b];
    }
    if (need_all > rest_items || room_all < rest_items) return never;
    double lower = 0;
    for (std::size_t b = 0; b < ways; ++b) {
      const std::uint64_t need = count[b] < elo ? elo - count[b] : 0;
      const auto take = static_cast<std::size_t>(std::min<std::uint64_t>(rest, (need + smax - 1) / smax));
      const double at_least = load[b] + (prefix[q] - prefix[q - take]);  // its smallest needed units
      // The other parts take at most their room in items, so at most that many units.
      const auto others = static_cast<std::size_t>(std::min<std::uint64_t>(rest, room_all - (ehi - count[b])));
      const double left_over = load[b] + rest_sum - (prefix[i + others] - prefix[i]);
      lower = std::max({lower, load[b], at_least, left_over});
    }
    return lower;
  };
  double goal = total / static_cast<double>(ways);
  if (integral) goal = std::ceil(goal);
  goal = std::max(goal, bound(0));
  if (!(goal < incumbent)) return out;  // nothing below the incumbent can exist
  std::uint64_t nodes = 0;
  bool stop = false;
  auto descend = [&](auto& self, std::size_t i) -> void {
    if (++nodes > node_budget) {
      stop = true;
      return;
    }
    if (i == q) {
      for (std::size_t b = 0; b < ways; ++b)
        if (count[b] < elo) return;
      const double top = *std::max_element(load.begin(), load.begin() + static_cast<std::ptrdiff_t>(ways));
      if (top < out.max_load) {
        out.max_load = top;
        out.part = part;
        out.found = true;
        if (top <= goal) stop = true;
      }
      return;
    }
    if (!(bound(i) < out.max_load)) return;
    std::array<std::size_t, max_ways> order{};
    for (std::size_t b = 0; b < ways; ++b) order[b] = b;
    std::sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(ways),
              [&](std::size_t x, std::size_t y) { return load[x] != load[y] ? load[x] < load[y] : x < y; });
    for (std::size_t r = 0; r < ways && !stop; ++r) {
      const std::size_t b = order[r];
      bool same = false;  // an identical part was already tried: same subtree
      for (std::size_t t = 0; t < r; ++t) same = same || (load[order[t]] == load[b] && count[order[t]] == count[b]);
      if (same || count[b] + size[i] > ehi || !(load[b] + cost[i] < out.max_load)) continue;
      const double saved = load[b];  // restored exactly (no subtraction round-off)
      load[b] += cost[i];
      count[b] += size[i];
      part[i] = static_cast<std::uint8_t>(b);
      self(self, i + 1);
      load[b] = saved;
      count[b] -= size[i];
    }
  };
  descend(descend, 0);
  out.nodes = std::min(nodes, node_budget);
  if (out.found) {
    out.load.assign(ways, 0.0);
    for (std::size_t i = 0; i < q; ++i) out.load[out.part[i]] += cost[i];
  }
  return out;
}

}  // namespace mmbal::balance::detail
