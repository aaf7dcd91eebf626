#pragma once
/// @file
/// `migrate`: locality-aware minimal migration (docs/DESIGN.md §5.1). Instead of re-placing every
/// item as `lpt` does (on a random current placement nearly every byte moves), start from
/// where the items are, unload only the ranks above a target maximum, and move as few bytes
/// as possible, preferring destinations on the same node.

#include <mmbal/balance/constraints.hpp>
#include <mmbal/balance/detail/bin_queue.hpp>
#include <mmbal/balance/detail/count_limits.hpp>
#include <mmbal/balance/detail/units.hpp>
#include <mmbal/balance/detail/validate.hpp>
#include <mmbal/balance/lpt.hpp>
#include <mmbal/balance/padded_binary_search.hpp>
#include <mmbal/balance/problem.hpp>
#include <mmbal/balance/refine.hpp>
#include <mmbal/core/concepts.hpp>
#include <mmbal/core/detail/order.hpp>
#include <mmbal/core/error.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/cost/metrics.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <queue>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace mmbal::balance {

/// Options of `migrate`.
struct migrate_options {
  /// Allowed excess of the maximum over the reference (the best shipped algorithm's maximum
  /// for the cost, or a lower bound, see `migrate`): target = (1 + epsilon) · reference.
  /// Default 0.001 (0.1 %). Must be ≥ 0 (NaN rejected); +∞ or any value that puts the target
  /// above the current maximum moves nothing.
  double epsilon = 0.001;
  /// Ranks per node (node = rank / ranks_per_node), for preferring destinations on the same
  /// node and counting inter-node bytes. Default 0: a single node.
  rank_t ranks_per_node = 0;
};

/// How `migrate` built its placement.
enum class migrate_strategy {
  unload,   ///< from the current placement: overloaded ranks give units away (nothing moves if none is)
  relabel,  ///< the reference algorithm's placement, its bins renamed to the ranks that keep the most bytes
  regroup,  ///< padded costs: each rank takes a (cap, count) profile of the reference, keeps what fits
};

/// What `migrate` decided.
struct migrate_result {
  assignment placement;        ///< new placement; items that stay keep their order, arrivals go last
  double target_max = 0;       ///< (1 + ε) · reference_max, capped by the capacity if one is given
  double reference_max = 0;    ///< the maximum the target was derived from (see `migrate`)
  double reached_max = 0;      ///< the placement's maximum cost
  bool target_reached = true;  ///< reached_max ≤ target_max
  migrate_strategy strategy = migrate_strategy::unload;  ///< how the placement was built
  std::uint64_t moved_items = 0;                         ///< items whose rank changes
  std::uint64_t moved_bytes = 0;                         ///< Σ bytes of those items
  std::uint64_t inter_node_bytes = 0;                    ///< Σ bytes of the moved items whose node changes
};

namespace detail {

/// Reusable buffers of `choose_removals` (one allocation per `migrate` call, not per rank).
struct choose_scratch {
  std::vector<std::size_t> order, fill;
  std::vector<std::uint64_t> keys, spare;
  std::vector<bool> taken;
};

/// `choose_removals` into `scratch` (the result lives there until the next call).
inline std::span<const std::size_t> choose_removals(std::span<const double> relief,
                                                    std::span<const std::uint64_t> bytes, double excess,
                                                    choose_scratch& scratch) {
  const std::size_t s = relief.size();
  auto cheaper_cover = [&](std::size_t a, std::size_t b) {  // is a a better single cover than b?
    if (bytes[a] != bytes[b]) return bytes[a] < bytes[b];
    if (relief[a] != relief[b]) return relief[a] < relief[b];
    return a < b;
  };
  // One pass: (a) the best single unit, the units with positive relief (the candidates of
  // (b)) and whether the fast order below applies.
  std::size_t single = s;
  std::vector<std::size_t>& order = scratch.order;
  order.clear();
  // Common case: the same bytes per relief for every unit (e.g. bytes ∝ tokens). Then the
  // order is (relief, index), sorted as packed keys when the reliefs are integers < 2^32.
  bool proportional = true, integral = true;
  for (std::size_t k = 0; k < s; ++k) {
    const double r = relief[k];
    if (r >= excess && (single == s || cheaper_cover(k, single))) single = k;
    if (!(r > 0)) continue;
    if (!order.empty())
      proportional &= static_cast<double>(bytes[k]) * relief[order[0]] == static_cast<double>(bytes[order[0]]) * r;
    // r == floor(r) for 0 < r < 2^32, without a call to floor.
    integral &= r < 0x1p32 && static_cast<double>(static_cast<std::uint32_t>(r)) == r;
    order.push_back(k);
  }
  std::vector<std::size_t>& fill = scratch.fill;
  fill.clear();
  double missing = excess;
  std::uint64_t fill_bytes = 0;
  auto finish = [&] {
    if (single != s && (missing > 0 || bytes[single] <= fill_bytes)) fill.assign(1, single);
    return std::span<const std::size_t>(fill);  // may fall short; the caller loops
  };
  if (proportional && integral) {
    std::vector<std::uint64_t>& keys = scratch.keys;
    keys.resize(order.size());
    std::uint64_t any_relief = 0;
    for (std::size_t j = 0; j < order.size(); ++j) {
      const auto r = static_cast<std::uint64_t>(relief[order[j]]);
      any_relief |= r;
      keys[j] = (r << 32) | order[j];
    }
    // The positions ascend in `keys`, so a stable sort by relief alone is the sort of the keys.
    // One rank's few dozen words: 8-bit digits (histograms of 256) and a comparison sort only
    // below 32 words — mispredicted comparisons were most of the removal choice's time.
    mmbal::detail::sort_packed<8>(keys, scratch.spare, any_relief, 32);
    // (b) in ascending relief: once a unit overshoots what is missing, so does every later
    // one (missing only changes when a unit is taken), so the fill is a prefix and the units
    // not taken are exactly the rest of the order, every one of them a cover (relief > missing).
    std::size_t p = 0;
    for (; p < keys.size() && missing > 0; ++p) {
      const auto k = static_cast<std::size_t>(keys[p] & 0xffffffffu);
      if (relief[k] > missing) break;
      fill.push_back(k);
      missing -= relief[k];
      fill_bytes += bytes[k];
    }
    if (missing > 0 && p < keys.size()) {
      std::size_t cover = static_cast<std::size_t>(keys[p] & 0xffffffffu);
      for (std::size_t j = p + 1; j < keys.size(); ++j)
        if (const auto k = static_cast<std::size_t>(keys[j] & 0xffffffffu); cheaper_cover(k, cover)) cover = k;
      fill.push_back(cover);
      fill_bytes += bytes[cover];
      missing = 0;
    }
    return finish();
  }
  // (b) greedy fill by bytes per unit of relief.
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    // bytes[a] / relief[a] < bytes[b] / relief[b], cross-multiplied (relief > 0).
    const double ra = static_cast<double>(bytes[a]) * relief[b], rb = static_cast<double>(bytes[b]) * relief[a];
    if (ra != rb) return ra < rb;
    // Equal bytes per relief (e.g. bytes = weights): smaller units first, they pack better.
    if (relief[a] != relief[b]) return relief[a] < relief[b];
    return a < b;
  });
  std::vector<bool>& taken = scratch.taken;
  taken.assign(s, false);
  for (std::size_t k : order) {
    if (!(missing > 0)) break;
    if (relief[k] <= missing) {
      fill.push_back(k);
      taken[k] = true;
      missing -= relief[k];
      fill_bytes += bytes[k];
    }
  }
  if (missing > 0) {
    std::size_t cover = s;
    for (std::size_t k = 0; k < s; ++k)
      if (!taken[k] && relief[k] >= missing && (cover == s || cheaper_cover(k, cover))) cover = k;
    if (cover != s) {
      fill.push_back(cover);
      fill_bytes += bytes[cover];
      missing = 0;
    }
  }
  return finish();
}

/// Picks the units to take out of one bin so that its cost drops by at least `excess`, with few
/// bytes: the better (fewer bytes) of (a) the single unit with the fewest bytes among those
/// that cover the excess alone, and (b) a greedy fill in increasing bytes per unit of cost
/// relief, taking each unit that does not overshoot what is still missing and finishing with
/// the cheapest unit that covers the rest. Ties: fewer bytes, then smaller relief, then index.
/// `relief[k]` is what removing `units[k]` alone saves. Returns positions into `units`.
inline std::vector<std::size_t> choose_removals(std::span<const double> relief, std::span<const std::uint64_t> bytes,
                                                double excess) {
  choose_scratch scratch;
  const std::span<const std::size_t> out = choose_removals(relief, bytes, excess, scratch);
  return {out.begin(), out.end()};
}

/// Renames the bins of a reference placement (`ref_bin`: bin per unit) to ranks so that as
/// many bytes as possible stay where they are, then, among units of one item with equal
/// weights, lets the ones whose current rank holds a slot of their weight take it (largest
/// bytes first). Neither step changes any bin's multiset of weights, so every bin keeps its
/// cost. Renaming: greedy matching on the (bin, current rank) byte overlaps in decreasing
/// bytes (ties: bin, then rank), unmatched bins to unmatched ranks in ascending order; kept
/// only if it keeps more bytes than the identity. The result therefore never moves more bytes
/// than the reference placement itself. Returns the rank per unit. O(n log n).
inline std::vector<rank_t> relabel_to_origin(std::span<const rank_t> ref_bin, std::span<const rank_t> unit_origin,
                                             std::span<const std::uint64_t> unit_bytes, const units& u,
                                             std::span<const length_t> weights, rank_t bins) {
  const std::size_t m = ref_bin.size();
  // 1. Byte overlap of every (reference bin, current rank) pair that shares a unit.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> pairs(m);  // (bin · bins + rank, bytes)
  for (std::size_t k = 0; k < m; ++k) pairs[k] = {std::uint64_t{ref_bin[k]} * bins + unit_origin[k], unit_bytes[k]};
  std::sort(pairs.begin(), pairs.end());
  struct overlap {
    std::uint64_t bytes;
    rank_t bin, rank;
  };
  std::vector<overlap> overlaps;
  std::uint64_t identity_kept = 0;
  for (std::size_t k = 0; k < m;) {
    std::size_t e = k;
    std::uint64_t bytes = 0;
    while (e < m && pairs[e].first == pairs[k].first) bytes += pairs[e++].second;
    const auto bin = static_cast<rank_t>(pairs[k].first / bins), rank = static_cast<rank_t>(pairs[k].first % bins);
    if (bin == rank) identity_kept += bytes;
    overlaps.push_back({bytes, bin, rank});
    k = e;
  }
  std::sort(overlaps.begin(), overlaps.end(), [](const overlap& a, const overlap& b) {
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    return a.bin != b.bin ? a.bin < b.bin : a.rank < b.rank;
  });
  std::vector<rank_t> rank_of(bins, bins);
  std::vector<bool> used(bins, false);
  std::uint64_t greedy_kept = 0;
  for (const overlap& o : overlaps)
    if (rank_of[o.bin] == bins && !used[o.rank]) {
      rank_of[o.bin] = o.rank;
      used[o.rank] = true;
      greedy_kept += o.bytes;
    }
  if (greedy_kept > identity_kept) {
    rank_t next_free = 0;
    for (rank_t b = 0; b < bins; ++b) {
      if (rank_of[b] != bins) continue;
      while (used[next_free]) ++next_free;
      rank_of[b] = next_free;
      used[next_free] = true;
    }
  } else {
    for (rank_t b = 0; b < bins; ++b) rank_of[b] = b;
  }
  std::vector<rank_t> dest(m);
  for (std::size_t k = 0; k < m; ++k) dest[k] = rank_of[ref_bin[k]];
  if (!u.trivial) return dest;
  // 2. Equal weights are interchangeable: per weight, home slots go to the units of that rank.
  std::vector<std::uint32_t> order(m);
  for (std::uint32_t k = 0; k < m; ++k) order[k] = k;
  std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    if (weights[a] != weights[b]) return weights[a] < weights[b];
    if (unit_bytes[a] != unit_bytes[b]) return unit_bytes[a] > unit_bytes[b];
    return a < b;
  });
  std::vector<std::uint32_t> slots(bins, 0);
  std::vector<rank_t> touched, free_slots;
  std::vector<std::uint32_t> waiting;
  for (std::size_t s = 0; s < m;) {
    std::size_t e = s;
    while (e < m && weights[order[e]] == weights[order[s]]) ++e;
    if (e - s > 1) {
      touched.clear();
      for (std::size_t j = s; j < e; ++j)
        if (slots[dest[order[j]]]++ == 0) touched.push_back(dest[order[j]]);
      waiting.clear();
      for (std::size_t j = s; j < e; ++j) {  // largest bytes first
        const std::uint32_t k = order[j];
        if (slots[unit_origin[k]] > 0) {
          --slots[unit_origin[k]];
          dest[k] = unit_origin[k];
        } else {
          waiting.push_back(k);
        }
      }
      std::sort(touched.begin(), touched.end());
      std::size_t t = 0;
      for (const std::uint32_t k : waiting) {  // the rest fill the remaining slots, ascending rank
        while (slots[touched[t]] == 0) ++t;
        --slots[touched[t]];
        dest[k] = touched[t];
      }
    }
    s = e;
  }
  return dest;
}

/// The largest count c ≥ `lo` (which must satisfy it) with `cost.padded_value(c, cap)` ≤
/// `target`, at most `most`: a galloping search (padded values grow with the count).
/// O(log² (c − lo)).
template <padded_cost C>
[[nodiscard]] std::uint64_t padded_count(const C& cost, length_t cap, double target, std::uint64_t lo,
                                         std::uint64_t most) {
  std::uint64_t step = 1;
  while (lo < most) {
    const std::uint64_t next = lo + std::min(step, most - lo);
    if (cost.padded_value(next, cap) <= target) {
      lo = next;
      step *= 2;
    } else if (step == 1) {
      break;
    } else {
      step = 1;
    }
  }
  return lo;
}

/// The regrouping move of `migrate` for padded costs (single items). Every rank takes the
/// (cap M, count c) profile of one reference bin — M its longest item, c the most items of
/// length ≤ M whose padded value stays ≤ `target` — keeps items of its current placement that
/// fit (≤ M, at most c) and receives others. The reference placement fills these profiles, so
/// for every length x the slots of cap ≥ x number at least the items ≥ x; a kept item of
/// length l on a rank of cap M uses up one slot of every level in (l, M], and the levels with
/// few spare slots are what limits keeping. Those are priced (a Lagrangian relaxation of the
/// spare-slot constraints, prices raised by a subgradient step where a level is over-used):
/// a kept item is worth its bytes minus the prices of the levels it uses up. Per round:
/// (1) profiles go to ranks by a greedy matching on that worth (candidates: for each length a
/// rank holds, the free profile with the least cap ≥ it; repeated until no candidate is worth
/// anything, then the remaining profiles to the remaining ranks in ascending order); (2) each
/// rank keeps the ≤ c items ≤ M of positive worth, most first; (3) the rest are placed longest
/// first, each into a free slot of cap ≥ its length (its own node first); when none is free,
/// the kept item with the fewest bytes among those shorter than it on a rank of cap ≥ it is
/// sent away instead (placed later, being shorter; one always exists by the count above).
/// Every rank ends with ≤ c items, all ≤ M: its cost is ≤ padded_value(c, M) ≤ `target`.
/// The round that moves the fewest bytes wins (ties: the earlier). Returns the rank per item,
/// or an empty vector when a reference bin is above `target`. O(rounds · (n log n + Σ_r s_r ·
/// min(s_r, 64))) for ranks of s_r items (a rank offers at most ~64 cap thresholds).
template <padded_cost C>
[[nodiscard]] std::vector<rank_t> regroup_to_origin(std::span<const length_t> weights, std::span<const rank_t> origin,
                                                    std::span<const std::uint64_t> bytes, rank_t bins, const C& cost,
                                                    const assignment& ref, double target, rank_t ranks_per_node,
                                                    int rounds) {
  const std::size_t n = weights.size();
  constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();
  // 1. Profiles of the reference bins, grouped by cap (the count is a function of the cap).
  std::vector<length_t> bin_cap(bins, 0);
  std::vector<std::uint64_t> bin_count(bins, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const rank_t b = ref.where[i].rank;
    bin_cap[b] = std::max(bin_cap[b], weights[i]);
    ++bin_count[b];
  }
  for (rank_t b = 0; b < bins; ++b)
    if (bin_count[b] > 0 && !(cost.padded_value(bin_count[b], bin_cap[b]) <= target)) return {};
  std::vector<length_t> caps(bin_cap);
  std::sort(caps.begin(), caps.end());
  caps.erase(std::unique(caps.begin(), caps.end()), caps.end());
  const std::size_t classes = caps.size();
  std::vector<std::uint64_t> class_count(classes, 0);  // c of the class
  std::vector<std::uint32_t> class_bins(classes, 0);   // reference bins of the class
  auto class_index = [&](length_t cap) {
    return static_cast<std::size_t>(std::lower_bound(caps.begin(), caps.end(), cap) - caps.begin());
  };
  for (rank_t b = 0; b < bins; ++b) {
    const std::size_t q = class_index(bin_cap[b]);
    ++class_bins[q];
    class_count[q] = std::max(class_count[q], bin_count[b]);
  }
  for (std::size_t q = 0; q < classes; ++q) class_count[q] = padded_count(cost, caps[q], target, class_count[q], n);

  // 2. Items per current rank, ascending (length, id): a stable counting sort by rank of the
  // length order. Levels: the distinct lengths; pos(v) = how many levels are ≤ v.
  const std::vector<std::uint32_t> by_length = mmbal::detail::ascending_order(weights);
  std::vector<std::uint32_t> rank_begin(std::size_t{bins} + 1, 0);
  for (std::size_t i = 0; i < n; ++i) ++rank_begin[std::size_t{origin[i]} + 1];
  for (rank_t b = 0; b < bins; ++b) rank_begin[std::size_t{b} + 1] += rank_begin[b];
  std::vector<std::uint32_t> held(n);
  {
    std::vector<std::uint32_t> fill(rank_begin.begin(), rank_begin.end() - 1);
    for (const std::uint32_t i : by_length) held[fill[origin[i]]++] = i;
  }
  std::vector<length_t> levels;
  std::vector<std::uint32_t> item_pos(n);  // pos(length of item)
  for (const std::uint32_t i : by_length) {
    if (levels.empty() || levels.back() != weights[i]) levels.push_back(weights[i]);
    item_pos[i] = static_cast<std::uint32_t>(levels.size());
  }
  const std::size_t level_count = levels.size();
  std::vector<std::uint32_t> cap_pos(classes);
  for (std::size_t q = 0; q < classes; ++q)
    cap_pos[q] = static_cast<std::uint32_t>(std::upper_bound(levels.begin(), levels.end(), caps[q]) - levels.begin());
  // Spare slots of level v (index pos(v) − 1): slots of cap ≥ v minus items ≥ v (≥ 0).
  std::vector<double> spare(level_count, 0.0);
  {
    std::vector<double> slots_at(level_count + 1, 0.0), items_at(level_count + 1, 0.0);
    for (std::size_t q = 0; q < classes; ++q)
      if (cap_pos[q] > 0) slots_at[cap_pos[q] - 1] += static_cast<double>(class_count[q]) * class_bins[q];
    for (std::size_t i = 0; i < n; ++i) items_at[item_pos[i] - 1] += 1;
    double slots = 0, items = 0;
    for (std::size_t v = level_count; v-- > 0;) {
      slots += slots_at[v];
      items += items_at[v];
      spare[v] = slots - items;
    }
  }
  // Prices per level and their prefix sums: a kept item of pos a on a rank of cap pos b uses
  // up the levels a … b − 1 (indices), at price[b] − price[a] of the prefix.
  std::vector<double> price(level_count, 0.0), prefix(level_count + 1, 0.0);
  double mean_bytes = 0;
  for (std::size_t i = 0; i < n; ++i) mean_bytes += static_cast<double>(bytes[i]);
  mean_bytes /= static_cast<double>(std::max<std::size_t>(n, 1));

  // Worth of keeping rank r's items under class q: the ≤ c items ≤ the cap of positive worth,
  // most first (ties: more bytes, longer, lower id); `end` advances over the items ≤ the cap.
  struct worth_entry {
    double worth;
    std::uint32_t item;
  };
  std::vector<worth_entry> buffer;
  auto better = [&](const worth_entry& a, const worth_entry& b) {
    if (a.worth != b.worth) return a.worth > b.worth;
    if (bytes[a.item] != bytes[b.item]) return bytes[a.item] > bytes[b.item];
    return weights[a.item] != weights[b.item] ? weights[a.item] > weights[b.item] : a.item < b.item;
  };
  auto choose = [&](rank_t r, std::size_t q, std::uint32_t& end) {
    while (end < rank_begin[std::size_t{r} + 1] && weights[held[end]] <= caps[q]) ++end;
    buffer.clear();
    const double top = prefix[cap_pos[q]];
    for (std::uint32_t p = rank_begin[r]; p < end; ++p) {
      const std::uint32_t i = held[p];
      const double w = static_cast<double>(bytes[i]) - (top - prefix[item_pos[i]]);
      if (w > 0) buffer.push_back({w, i});
    }
    const std::size_t c = static_cast<std::size_t>(std::min<std::uint64_t>(class_count[q], buffer.size()));
    if (c < buffer.size())
      std::nth_element(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(c), buffer.end(), better);
    buffer.resize(c);
    double sum = 0;
    for (const worth_entry& e : buffer) sum += e.worth;
    return sum;
  };

  constexpr std::uint64_t max_thresholds = 64;
  std::vector<rank_t> best;
  std::uint64_t best_moved = std::numeric_limits<std::uint64_t>::max();
  std::vector<std::uint32_t> class_of(bins), left(classes), next_free(classes + 1);
  struct candidate {
    double worth;
    rank_t rank;
    std::uint32_t cls;
  };
  std::vector<candidate> cands;
  std::vector<rank_t> open(bins), by_cap(bins), any_open;
  std::vector<char> kept(n);
  std::vector<std::uint64_t> free_slots(bins);
  std::vector<double> used(level_count + 1);
  const rank_t per_node = ranks_per_node == 0 ? bins : ranks_per_node;
  std::vector<std::vector<rank_t>> node_open((bins + per_node - 1) / per_node);
  using evict_key = std::tuple<std::uint64_t, length_t, std::uint32_t>;
  std::vector<evict_key> aside;
  std::vector<rank_t> dest(n);
  std::vector<std::uint64_t> home_count(bins);
  std::vector<length_t> home_max(bins);
  std::vector<std::uint32_t> returning;
  for (int round = 0; round < rounds; ++round) {
    for (std::size_t v = 0; v < level_count; ++v) prefix[v + 1] = prefix[v] + price[v];
    // 3. Matching of profiles to ranks.
    std::copy(class_bins.begin(), class_bins.end(), left.begin());
    std::iota(next_free.begin(), next_free.end(), 0u);
    auto free_from = [&](std::size_t q) {  // least class ≥ q with a bin left (`classes`: none)
      while (next_free[q] != q) {
        next_free[q] = next_free[next_free[q]];
        q = next_free[q];
      }
      return q;
    };
    auto take_class = [&](rank_t r, std::size_t q) {
      class_of[r] = static_cast<std::uint32_t>(q);
      if (--left[q] == 0) next_free[q] = static_cast<std::uint32_t>(q + 1);
    };
    std::fill(class_of.begin(), class_of.end(), none);
    open.resize(bins);
    std::iota(open.begin(), open.end(), rank_t{0});
    for (;;) {
      cands.clear();
      for (const rank_t r : open) {
        std::uint32_t end = rank_begin[r];
        std::size_t last = classes;
        // A rank of s > 64 items offers at most ~64 thresholds, spread evenly over its lengths
        // (each costs O(s)): O(64 · n) per round, not O(n²) when one rank holds everything.
        const std::uint32_t first = rank_begin[r], stop = rank_begin[std::size_t{r} + 1];
        const std::uint64_t s_r = stop - first;
        std::uint64_t last_bucket = std::numeric_limits<std::uint64_t>::max();
        for (std::uint32_t p = first; p < stop; ++p) {
          if (p + 1 < stop && weights[held[p + 1]] == weights[held[p]]) continue;
          if (s_r > max_thresholds && p + 1 < stop) {
            const std::uint64_t bucket = std::uint64_t{p - first} * max_thresholds / s_r;
            if (bucket == last_bucket) continue;
            last_bucket = bucket;
          }
          const std::size_t q = free_from(class_index(weights[held[p]]));
          if (q == classes) break;
          if (q == last) continue;
          last = q;
          if (const double w = choose(r, q, end); w > 0) cands.push_back({w, r, static_cast<std::uint32_t>(q)});
        }
      }
      if (cands.empty()) break;
      std::sort(cands.begin(), cands.end(), [](const candidate& a, const candidate& b) {
        if (a.worth != b.worth) return a.worth > b.worth;
        return a.rank != b.rank ? a.rank < b.rank : a.cls < b.cls;
      });
      for (const candidate& c : cands)
        if (class_of[c.rank] == none && left[c.cls] > 0) take_class(c.rank, c.cls);
      std::erase_if(open, [&](rank_t r) { return class_of[r] != none; });
    }
    for (const rank_t r : open) take_class(r, free_from(0));  // the rest in ascending order

    // 4. What stays, and what the kept items use up per level.
    std::fill(kept.begin(), kept.end(), 0);
    std::fill(used.begin(), used.end(), 0.0);
    for (rank_t r = 0; r < bins; ++r) {
      const std::size_t q = class_of[r];
      std::uint32_t end = rank_begin[r];
      choose(r, q, end);
      for (const worth_entry& e : buffer) {
        kept[e.item] = 1;
        used[item_pos[e.item]] += 1;
        used[cap_pos[q]] -= 1;
      }
      free_slots[r] = class_count[q] - buffer.size();
    }

    // 5. Place the rest, longest first, into free slots of cap ≥ its length.
    std::copy(origin.begin(), origin.end(), dest.begin());
    std::iota(by_cap.begin(), by_cap.end(), rank_t{0});
    std::sort(by_cap.begin(), by_cap.end(), [&](rank_t a, rank_t b) {
      const length_t ca = caps[class_of[a]], cb = caps[class_of[b]];
      return ca != cb ? ca > cb : a < b;
    });
    for (auto& s : node_open) s.clear();
    any_open.clear();
    // Kept items on ranks of cap ≥ the current length, fewest bytes first.
    std::priority_queue<evict_key, std::vector<evict_key>, std::greater<>> evictable;
    std::size_t next_rank = 0;
    auto open_rank = [&](std::vector<rank_t>& stack) -> rank_t {
      while (!stack.empty() && free_slots[stack.back()] == 0) stack.pop_back();
      return stack.empty() ? bins : stack.back();
    };
    bool failed = false;
    for (std::size_t j = n; j-- > 0 && !failed;) {
      const std::uint32_t i = by_length[j];
      const length_t l = weights[i];
      for (; next_rank < bins && caps[class_of[by_cap[next_rank]]] >= l; ++next_rank) {
        const rank_t r = by_cap[next_rank];
        if (free_slots[r] > 0) {
          node_open[r / per_node].push_back(r);
          any_open.push_back(r);
        }
        for (std::uint32_t p = rank_begin[r]; p < rank_begin[std::size_t{r} + 1]; ++p)
          if (kept[held[p]]) evictable.emplace(bytes[held[p]], weights[held[p]], held[p]);
      }
      if (kept[i]) continue;
      rank_t to = open_rank(node_open[origin[i] / per_node]);
      if (to == bins) to = open_rank(any_open);
      if (to == bins) {  // send a shorter kept item away instead
        aside.clear();
        while (!evictable.empty()) {
          const evict_key e = evictable.top();
          evictable.pop();
          const std::uint32_t k = std::get<2>(e);
          if (!kept[k] || std::get<1>(e) > l) continue;  // gone, or longer (already passed)
          if (std::get<1>(e) == l) {                     // equal length: no slot gained
            aside.push_back(e);
            continue;
          }
          kept[k] = 0;
          to = origin[k];
          break;
        }
        for (const evict_key& e : aside) evictable.push(e);
        if (to == bins) failed = true;
      } else {
        --free_slots[to];
      }
      dest[i] = to;
    }
    if (!failed) {
      // 6. Homecoming: the profiles leave spare room (fewer items than c, or a shorter longest
      // item than M); a moved item goes back home, most bytes first, where its rank's padded
      // value stays ≤ the target. Counts are exact, the longest items upper bounds (a rank's
      // longest only falls when an item leaves), so every rank stays within the target.
      std::fill(home_count.begin(), home_count.end(), 0);
      std::fill(home_max.begin(), home_max.end(), 0);
      returning.clear();
      for (std::size_t i = 0; i < n; ++i) {
        ++home_count[dest[i]];
        home_max[dest[i]] = std::max(home_max[dest[i]], weights[i]);
        if (dest[i] != origin[i]) returning.push_back(static_cast<std::uint32_t>(i));
      }
      std::sort(returning.begin(), returning.end(),
                [&](std::uint32_t a, std::uint32_t b) { return bytes[a] != bytes[b] ? bytes[a] > bytes[b] : a < b; });
      for (const std::uint32_t i : returning) {
        const rank_t h = origin[i];
        const length_t longest = std::max(home_max[h], weights[i]);
        if (!(cost.padded_value(home_count[h] + 1, longest) <= target)) continue;
        --home_count[dest[i]];
        ++home_count[h];
        home_max[h] = longest;
        dest[i] = h;
      }
      std::uint64_t moved = 0;
      for (std::size_t i = 0; i < n; ++i)
        if (dest[i] != origin[i]) moved += bytes[i];
      if (moved < best_moved) {
        best_moved = moved;
        best = dest;
      }
    }
    // Subgradient step on the prices: raise them where kept items over-use a level's spare slots.
    double over = 0;
    for (std::size_t v = 0; v < level_count; ++v) {
      used[v + 1] += used[v];  // prefix sums: used[v] = kept items using level v up
      over = std::max(over, used[v] - spare[v]);
    }
    if (over <= 0) break;
    const double step = 0.3 * mean_bytes / over / (1.0 + round);
    for (std::size_t v = 0; v < level_count; ++v) price[v] = std::max(0.0, price[v] + step * (used[v] - spare[v]));
  }
  return best;
}

/// The least loaded bin (ties: smaller index) under point updates: a winner tree of
/// (load, bin) keys over a power-of-two number of leaves. Loads are non-negative doubles,
/// compared through their bit patterns (same order), so every level is a branch-free select.
/// O(log d) per update, O(1) query.
class least_loaded_tree {
 public:
  explicit least_loaded_tree(std::span<const double> loads)
      : leaves_(std::bit_ceil(std::max<std::size_t>(loads.size(), 1))), tree_(2 * leaves_, key{~std::uint64_t{0}, 0}) {
    for (std::size_t b = 0; b < loads.size(); ++b) tree_[leaves_ + b] = key{bits(loads[b]), static_cast<rank_t>(b)};
    for (std::size_t b = loads.size(); b < leaves_; ++b) tree_[leaves_ + b].bin = std::numeric_limits<rank_t>::max();
    for (std::size_t node = leaves_ - 1; node >= 1; --node) tree_[node] = least(tree_[2 * node], tree_[2 * node + 1]);
  }
  /// The least loaded bin, or a bin ≥ the bin count when every bin is hidden.
  [[nodiscard]] rank_t top() const noexcept { return tree_[1].bin; }
  /// Bin b's load is now `load` (+∞ hides it).
  void set(rank_t b, double load) noexcept {
    std::size_t node = leaves_ + b;
    key cur{bits(load), b};
    tree_[node] = cur;
    // The path's winner stays in a register: each level reads only the sibling (an address
    // known up front), instead of reloading the child just stored. `least` is symmetric on
    // distinct keys, and equal keys are the same value, so the tree is the same as before.
    for (; node > 1; node >>= 1) {
      cur = least(tree_[node ^ 1], cur);
      tree_[node >> 1] = cur;
    }
  }
  /// Whether the tree holds exactly `load` for bin b.
  [[nodiscard]] bool holds(rank_t b, double load) const noexcept { return tree_[leaves_ + b].load_bits == bits(load); }

 private:
  struct key {
    std::uint64_t load_bits;
    rank_t bin;
  };
  static std::uint64_t bits(double load) noexcept { return std::bit_cast<std::uint64_t>(load + 0.0); }
  static key least(const key& a, const key& b) noexcept {
    // Selected through a mask, not a branch (which would mispredict about every other level
    // on a path whose winner changed; g++ 12 turns the plain `?:` into one).
    const bool a_first = (a.load_bits < b.load_bits) | ((a.load_bits == b.load_bits) & (a.bin < b.bin));
    const std::uint64_t m = std::uint64_t{0} - static_cast<std::uint64_t>(a_first);
    return key{(a.load_bits & m) | (b.load_bits & ~m), static_cast<rank_t>((a.bin & m) | (b.bin & ~m))};
  }
  std::size_t leaves_;
  std::vector<key> tree_;
};

/// Where the unloading greedy of `migrate` ended.
struct unload_outcome {
  assignment placement;
  double reached = 0;  ///< its maximum cost
  /// Whether the next three are set (not after a polish; then the caller counts them).
  bool traffic_known = false;
  std::uint64_t moved_items = 0, moved_bytes = 0, inter_node_bytes = 0;
};

/// Steps 2–4 of `migrate` for one target: unload the ranks above `target`, place what left,
/// polish if needed and `polish`. Flat arrays: each rank's staying units are a segment of one
/// array (in ascending unit) carrying their weight and bytes, arrivals one list grouped by rank
/// at the end; the least loaded rank comes from a winner tree refreshed lazily.
template <batch_cost C>
[[nodiscard]] unload_outcome unload_to_target(const units& u, std::span<const length_t> weights,
                                              std::span<const rank_t> unit_origin,
                                              std::span<const std::uint64_t> unit_bytes, rank_t bins, const C& cost,
                                              const constraints& limits, rank_t ranks_per_node, double target,
                                              const refine_options& polish) {
  const char* name = "migrate";
  const std::size_t n = weights.size();
  using state = typename C::state;
  constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();

  // Current bins as segments of `seg` (ascending unit = current slot order). An entry carries
  // what the unloading reads, so that it scans each bin contiguously.
  struct seg_entry {
    std::uint32_t unit;
    length_t weight;  // of a single-item unit (0 for groups)
    std::uint64_t bytes;
  };
  std::vector<std::uint32_t> seg_begin(std::size_t{bins} + 1, 0), seg_len(bins, 0);
  for (std::uint32_t k = 0; k < u.count; ++k) ++seg_begin[std::size_t{unit_origin[k]} + 1];
  for (rank_t b = 0; b < bins; ++b) seg_begin[std::size_t{b} + 1] += seg_begin[b];
  std::vector<seg_entry> seg(u.count);
  std::vector<state> states(bins, cost.empty());
  for (std::uint32_t k = 0; k < u.count; ++k) {
    const rank_t b = unit_origin[k];
    seg[seg_begin[b] + seg_len[b]++] = seg_entry{k, u.trivial ? weights[k] : 0, unit_bytes[k]};
    // Single items: the same fold as `fold(b, none)` below (ascending id within a bin).
    if (u.trivial) states[b] = cost.add(states[b], weights[k]);
  }
  auto live = [&](rank_t b) { return std::span<seg_entry>(seg.data() + seg_begin[b], seg_len[b]); };
  auto add_entry = [&](const state& s, const seg_entry& e) {
    return u.trivial ? cost.add(s, e.weight) : unit_state(u, e.unit, weights, cost, s);
  };
  // Units placed on a rank they do not come from, in placement order, and how many per rank.
  std::vector<std::pair<rank_t, std::uint32_t>> arrivals;
  std::vector<std::uint32_t> arrival_count(bins, 0);
  // A rank's state: its staying units in order, then its arrivals (only a repair refolds a
  // rank that already received units, so the scan of `arrivals` is rare).
  auto fold = [&](rank_t b, std::uint32_t skip) {
    state s = cost.empty();
    for (const seg_entry& e : live(b))
      if (e.unit != skip) s = add_entry(s, e);
    if (arrival_count[b] > 0)
      for (const auto& [to, k] : arrivals)
        if (to == b) s = unit_state(u, k, weights, cost, s);
    return s;
  };
  std::vector<double> load(bins);
  if (!u.trivial)
    for (rank_t b = 0; b < bins; ++b) states[b] = fold(b, none);
  for (rank_t b = 0; b < bins; ++b) load[b] = cost.value(states[b]);
  const std::vector<double> initial_load = load;
  auto solo_of = [&](std::uint32_t k, length_t weight) {
    return cost.value(u.trivial ? cost.add(cost.empty(), weight) : unit_state(u, k, weights, cost, cost.empty()));
  };

  // Relief of every unit of bin b that `eligible` accepts, with `extra` (a unit or `none`)
  // counted as part of the bin; then the removal plan (`take`) for the excess over the target.
  std::vector<double> relief;
  std::vector<std::uint64_t> rbytes;
  std::vector<seg_entry> candidates, take;
  choose_scratch scratch;
  auto plan = [&](rank_t b, std::uint32_t extra, double bin_load, auto&& eligible) {
    candidates.clear();
    for (const seg_entry& e : live(b))
      if (eligible(e)) candidates.push_back(e);
    relief.assign(candidates.size(), 0.0);
    rbytes.resize(candidates.size());
    for (std::size_t j = 0; j < candidates.size(); ++j) {
      if constexpr (additive_cost<C>) {
        if (u.trivial)
          relief[j] = cost.item(candidates[j].weight);
        else
          u.for_each(candidates[j].unit, [&](item_id i) { relief[j] += cost.item(weights[i]); });
      } else {
        state s = fold(b, candidates[j].unit);
        if (extra != none) s = unit_state(u, extra, weights, cost, s);
        relief[j] = bin_load - cost.value(s);
      }
      rbytes[j] = candidates[j].bytes;
    }
    take.clear();
    for (std::size_t j : choose_removals(relief, rbytes, bin_load - target, scratch)) take.push_back(candidates[j]);
  };
  std::vector<bool> leaving(u.count, false);
  auto remove_units = [&](rank_t b, std::span<const seg_entry> gone) {
    for (const seg_entry& e : gone) leaving[e.unit] = true;
    // Compacts the segment in order (as std::remove_if) and folds what stays on the way: the
    // same state as `fold(b, none)` afterwards, in one pass.
    const auto c = live(b);
    state s = cost.empty();
    std::uint32_t kept = 0;
    for (const seg_entry& e : c)
      if (!leaving[e.unit]) {
        c[kept++] = e;
        s = add_entry(s, e);
      }
    seg_len[b] = kept;
    for (const seg_entry& e : gone) leaving[e.unit] = false;
    if (arrival_count[b] > 0)
      for (const auto& [to, k] : arrivals)
        if (to == b) s = unit_state(u, k, weights, cost, s);
    states[b] = s;
    load[b] = cost.value(s);
  };

  // A unit that left, with what the placement reads of it (no chasing into per-item arrays).
  struct pooled {
    std::pair<double, std::uint32_t> key;  // (−cost alone, unit): the placement order
    rank_t home;
    length_t weight;  // of a single-item unit
    std::uint64_t bytes;
  };
  auto pooled_of = [&](const seg_entry& e, rank_t home) {
    return pooled{{-solo_of(e.unit, e.weight), e.unit}, home, e.weight, e.bytes};
  };

  // 2. Unload overloaded ranks, most loaded first.
  std::vector<rank_t> over;
  for (rank_t b = 0; b < bins; ++b)
    if (load[b] > target) over.push_back(b);
  std::sort(over.begin(), over.end(),
            [&](rank_t a, rank_t b) { return load[a] != load[b] ? load[a] > load[b] : a < b; });
  std::vector<pooled> sorted_pool;
  for (rank_t b : over) {
    while (load[b] > target && seg_len[b] > 0) {
      plan(b, none, load[b], [](const seg_entry&) { return true; });
      if (take.empty()) take.push_back(live(b).back());  // only zero-relief units left
      for (const seg_entry& e : take) sorted_pool.push_back(pooled_of(e, b));
      remove_units(b, take);
    }
  }

  // 3. Place the removed units, largest cost first (ties: in the order they left). Integer
  // costs below 2^32 (e.g. tokens) are radix-sorted as (max − cost) << 32 | position.
  std::vector<std::uint32_t> placement_order(sorted_pool.size());
  {
    const std::vector<pooled>& pool = sorted_pool;
    double largest = 0;
    bool integral = true;
    for (const pooled& q : pool) {
      const double c = -q.key.first;
      largest = std::max(largest, c);
      integral &= c >= 0 && c == std::floor(c);
    }
    if (integral && largest < 0x1p32) {
      const auto top = static_cast<std::uint64_t>(largest);
      std::vector<std::uint64_t> words(pool.size()), spare;
      for (std::size_t j = 0; j < pool.size(); ++j)
        words[j] = ((top - static_cast<std::uint64_t>(-pool[j].key.first)) << 32) | j;
      mmbal::detail::sort_packed(words, spare, top);
      for (std::size_t j = 0; j < pool.size(); ++j) placement_order[j] = static_cast<std::uint32_t>(words[j]);
    } else {
      std::iota(placement_order.begin(), placement_order.end(), 0u);
      std::stable_sort(placement_order.begin(), placement_order.end(),
                       [&](std::uint32_t a, std::uint32_t b) { return pool[a].key.first < pool[b].key.first; });
    }
  }
  std::vector<pooled> pool(sorted_pool.size());  // in placement order: the loop below reads it in sequence
  for (std::size_t j = 0; j < pool.size(); ++j) pool[j] = sorted_pool[placement_order[j]];
  // The state of bin b with the unit added.
  auto with_unit = [&](const pooled& p, rank_t b) {
    return u.trivial ? cost.add(states[b], p.weight) : unit_state(u, p.key.second, weights, cost, states[b]);
  };
  // Its cost alone, for scans (single items inline: a scan then computes only what the cost reads).
  auto value_with = [&](const pooled& p, rank_t b) {
    if (u.trivial) return cost.value(cost.add(states[b], p.weight));
    return cost.value(unit_state(u, p.key.second, weights, cost, states[b]));
  };
  // Units sent away by a repair are rare and wait in a small heap; the next unit is the
  // larger of the two heads.
  auto later = [](const std::pair<double, std::uint32_t>& a, const std::pair<double, std::uint32_t>& b) {
    return b < a;
  };
  auto later_pooled = [](const pooled& a, const pooled& b) { return b.key < a.key; };
  std::size_t next_sorted = 0;
  std::priority_queue<pooled, std::vector<pooled>, decltype(later_pooled)> repaired(later_pooled);
  least_loaded_tree by_load(load);
  // The least loaded visible bin (bins when every bin is hidden at +∞): a key below the bin's
  // load is stale; refreshing it can only raise it.
  auto fresh_top = [&] {
    for (rank_t top = by_load.top();; top = by_load.top()) {
      if (top >= bins || by_load.holds(top, std::numeric_limits<double>::infinity())) return bins;  // all hidden
      if (by_load.holds(top, load[top])) return top;
      by_load.set(top, load[top]);
    }
  };
  const rank_t per_node = ranks_per_node == 0 ? bins : ranks_per_node;
  std::vector<bool> pinned(u.count, false), arrived_flag(u.count, false);
  std::uint64_t repairs = 0;
  unload_outcome out;
  auto put = [&](const pooled& p, rank_t b, const state& next) {
    states[b] = next;
    load[b] = cost.value(next);
    // Loads only grow here: the tree keeps the old (lower) key until it surfaces (`fresh_top`).
    if (b == p.home) {
      seg[seg_begin[b] + seg_len[b]++] = seg_entry{p.key.second, p.weight, p.bytes};  // back home: its slot is free
    } else {
      arrivals.emplace_back(b, p.key.second);
      ++arrival_count[b];
      arrived_flag[p.key.second] = true;
      // Arrivals are final (only a rank's own units leave it), so they are the moved units.
      out.moved_items += u.size(p.key.second);
      out.moved_bytes += p.bytes;
      if (ranks_per_node > 0 && p.home / ranks_per_node != b / ranks_per_node) out.inter_node_bytes += p.bytes;
    }
  };
  std::vector<rank_t> set_aside;
  while (next_sorted < pool.size() || !repaired.empty()) {
    pooled p;
    if (repaired.empty() || (next_sorted < pool.size() && later(repaired.top().key, pool[next_sorted].key))) {
      p = pool[next_sorted++];
    } else {
      p = repaired.top();
      repaired.pop();
    }
    const std::pair<double, std::uint32_t> head = p.key;
    const std::uint32_t k = head.second;
    const rank_t home = p.home;
    const state at_home = with_unit(p, home);
    // (a) home, if it fits again (the removal overshot).
    if (cost.value(at_home) <= target) {
      put(p, home, at_home);
      continue;
    }
    // (b) same node: the most loaded rank that still fits (best fit; ties: smaller index).
    rank_t best = bins;
    state best_state{};
    if (per_node < bins) {
      const rank_t node_begin = home / per_node * per_node;
      const rank_t node_end = static_cast<rank_t>(std::min<std::uint64_t>(std::uint64_t{node_begin} + per_node, bins));
      for (rank_t b = node_begin; b < node_end; ++b) {
        if (b == home || (best != bins && !(load[b] > load[best]))) continue;
        if (value_with(p, b) <= target) best = b;
      }
      if (best != bins) best_state = with_unit(p, best);
    }
    // (c) anywhere: the least loaded rank that fits (worst fit, ties: smaller index) — the
    // unit of the largest cost left goes where the most room is. For an additive cost no
    // rank fits if the least loaded does not.
    if (best == bins) {
      if constexpr (additive_cost<C>) {
        rank_t top = fresh_top();
        if (top == home) {  // the next one: hide home for a moment
          by_load.set(home, std::numeric_limits<double>::infinity());
          top = fresh_top();
          by_load.set(home, load[home]);
        }
        if (top < bins) {
          const state s = with_unit(p, top);
          if (cost.value(s) <= target) {
            best = top;
            best_state = s;
          }
        }
      } else {
        // Bins looked at are hidden (+∞) until the search ends.
        for (rank_t top = fresh_top(); top < bins; top = fresh_top()) {
          by_load.set(top, std::numeric_limits<double>::infinity());
          set_aside.push_back(top);
          if (top == home) continue;
          const state s = with_unit(p, top);
          if (cost.value(s) <= target) {
            best = top;
            best_state = s;
            break;
          }
        }
        for (rank_t b : set_aside) by_load.set(b, load[b]);
        set_aside.clear();
      }
    }
    if (best != bins) {
      put(p, best, best_state);
      continue;
    }
    // (d) repair: the unit fits nowhere. Keep it at home for good and send smaller units of
    // the same (overloaded) home away instead; they are easier to fit. Bounded: at most one
    // repair per unit.
    if (repairs < u.count) {
      ++repairs;
      plan(home, k, cost.value(at_home), [&](const seg_entry& e) {
        return !pinned[e.unit] && later(pooled_of(e, home).key, head);  // a home unit placed after k
      });
      double relieved = 0;
      for (const seg_entry& e : take) relieved += -pooled_of(e, home).key.first;
      if (!take.empty() && (!additive_cost<C> || relieved >= cost.value(at_home) - target)) {
        pinned[k] = true;
        seg[seg_begin[home] + seg_len[home]++] = seg_entry{k, p.weight, p.bytes};
        const std::vector<seg_entry> gone(take.begin(), take.end());
        remove_units(home, gone);
        by_load.set(home, load[home]);
        for (const seg_entry& e : gone) repaired.push(pooled_of(e, home));
        continue;
      }
    }
    // (e) nothing helps: where the unit's cost ends lowest (ties: smaller index), within the
    // capacity if one is given. The maximum then exceeds the target; the caller sees it.
    double best_value = std::numeric_limits<double>::infinity();
    for (rank_t b = 0; b < bins; ++b) {
      const state s = with_unit(p, b);
      const double v = cost.value(s);
      if (v < best_value && (!limits.capacity || v <= *limits.capacity)) {
        best_value = v;
        best = b;
        best_state = s;
      }
    }
    if (best == bins)
      mmbal::detail::throw_invalid(name, ": the capacity ", *limits.capacity, " cannot be kept: the unit of item ",
                                   u.trivial ? k : u.members[u.offsets[k]],
                                   " fits on no rank without moving items off ranks that are not overloaded");
    put(p, best, best_state);
  }

  double reached = 0;
  for (rank_t b = 0; b < bins; ++b) reached = std::max(reached, load[b]);
  if (reached <= target || polish.max_passes == 0) {
    // Staying units in ascending first id, then arrivals in placement order. One pass over
    // the units in id order (a unit that is not an arrival stayed at its origin; arrivals are
    // marked with the invalid rank `bins` first), then the arrivals in placement order: the
    // same slots as walking each rank's sorted segment and then its arrivals, without the
    // per-rank sorts and the grouping of the arrivals. The traffic was counted as the
    // arrivals came (every moved unit is one, all of a unit's items share origin and destination).
    out.placement = assignment{bins, std::vector<location>(n)};
    std::vector<location>& where = out.placement.where;
    std::vector<std::uint32_t> slot(bins, 0);
    for (std::uint32_t k = 0; k < u.count; ++k) {
      if (arrived_flag[k]) continue;
      const rank_t b = unit_origin[k];
      if (u.trivial)
        where[k] = location{b, slot[b]++};
      else
        u.for_each(k, [&](item_id i) { where[i] = location{b, slot[b]++}; });
    }
    for (const auto& arrival : arrivals) {
      const rank_t b = arrival.first;  // not a structured binding: clang 14 cannot capture one
      u.for_each(arrival.second, [&](item_id i) { where[i] = location{b, slot[b]++}; });
    }
    out.traffic_known = true;
    out.reached = reached;
    return out;
  }
  // Arrivals grouped by bin, in placement order (stable counting sort).
  std::vector<std::uint32_t> arrival_begin(std::size_t{bins} + 1, 0);
  for (const auto& [b, k] : arrivals) ++arrival_begin[std::size_t{b} + 1];
  for (rank_t b = 0; b < bins; ++b) arrival_begin[std::size_t{b} + 1] += arrival_begin[b];
  std::vector<std::uint32_t> arrived(arrivals.size());
  {
    std::vector<std::uint32_t> fill(arrival_begin.begin(), arrival_begin.end() - 1);
    for (const auto& [b, k] : arrivals) arrived[fill[b]++] = k;
  }
  auto arrivals_of = [&](rank_t b) {
    return std::span<const std::uint32_t>(arrived.data() + arrival_begin[b],
                                          arrival_begin[std::size_t{b} + 1] - arrival_begin[b]);
  };
  for (rank_t b = 0; b < bins; ++b) {
    const auto c = live(b);
    // Units are numbered by first member: ascending unit = ascending id.
    std::sort(c.begin(), c.end(), [](const seg_entry& x, const seg_entry& y) { return x.unit < y.unit; });
  }
  // 4. Polish, only when the greedy left a rank above the target: `refine`'s moves and swaps,
  // restricted to units whose home rank was overloaded, stopping once the maximum is ≤ T.
  refine_state st;
  st.u = &u;
  st.unit_bin.assign(u.count, 0);
  st.counts.assign(bins, 0);
  st.key.assign(n, 0);
  st.next_key = n;
  for (rank_t b = 0; b < bins; ++b) {
    std::uint64_t slot = 0;
    auto place = [&](std::uint32_t k) {
      st.unit_bin[k] = b;
      st.counts[b] += u.size(k);
      u.for_each(k, [&](item_id i) { st.key[i] = slot++; });
    };
    for (const seg_entry& e : live(b)) place(e.unit);
    for (std::uint32_t k : arrivals_of(b)) place(k);
  }
  std::vector<bool> movable(u.count);
  for (std::uint32_t k = 0; k < u.count; ++k) movable[k] = initial_load[unit_origin[k]] > target;
  const count_bounds unlimited{};
  if constexpr (additive_cost<C>)
    refine_additive(st, weights, cost, limits, unlimited, bins, polish, &movable, target);
  else
    refine_general(st, weights, cost, limits, unlimited, bins, polish, &movable, target);
  out.placement = st.build(bins);
  const std::vector<double> l = bin_loads(out.placement, weights, cost);
  out.reached = l.empty() ? 0.0 : *std::max_element(l.begin(), l.end());
  return out;
}

/// The maximum cost of a placement (0 without bins).
template <batch_cost C>
[[nodiscard]] double max_load(const assignment& a, std::span<const length_t> weights, const C& cost) {
  const std::vector<double> l = bin_loads(a, weights, cost);
  return l.empty() ? 0.0 : *std::max_element(l.begin(), l.end());
}

// The body of `migrate` (same arguments).
template <batch_cost C>
[[nodiscard]] migrate_result migrate_impl(std::span<const length_t> weights, std::span<const rank_t> origin,
                                          std::span<const std::uint64_t> item_bytes_in, rank_t bins, const C& cost,
                                          const constraints& limits, const migrate_options& opts) {
  const char* name = "migrate";
  if (std::isnan(opts.epsilon) || opts.epsilon < 0)
    mmbal::detail::throw_invalid(name, ": epsilon = ", opts.epsilon, " must be >= 0");
  check_problem(name, weights, bins, limits);
  const std::size_t n = weights.size();
  if (origin.size() != n)
    mmbal::detail::throw_invalid(name, ": origin has ", origin.size(), " entries but there are ", n, " items");
  for (std::size_t i = 0; i < n; ++i)
    if (origin[i] >= bins)
      mmbal::detail::throw_invalid(name, ": origin of item ", i, " is rank ", origin[i], " >= bins ", bins);
  if (!item_bytes_in.empty() && item_bytes_in.size() != n)
    mmbal::detail::throw_invalid(name, ": item_bytes has ", item_bytes_in.size(), " entries but there are ", n,
                                 " items");
  if (limits.counts.kind != count_cap::mode::none)
    reject_constraint(name, "count_cap", " (moving items off overloaded ranks cannot keep counts)");

  std::vector<std::uint64_t> item_bytes;
  if (item_bytes_in.empty()) item_bytes.assign(weights.begin(), weights.end());
  const std::span<const std::uint64_t> bytes_of = item_bytes_in.empty() ? item_bytes : item_bytes_in;

  const units u = make_units(n, limits.groups);
  // Per unit: its rank and bytes (without groups, the items' own arrays).
  std::vector<rank_t> group_origin;
  std::vector<std::uint64_t> group_bytes;
  if (!u.trivial) {
    group_origin.resize(u.count);
    group_bytes.assign(u.count, 0);
    std::vector<rank_t>& unit_origin = group_origin;
    std::vector<std::uint64_t>& unit_bytes = group_bytes;
    for (std::uint32_t k = 0; k < u.count; ++k) {
      bool first = true;
      u.for_each(k, [&](item_id i) {
        if (first)
          unit_origin[k] = origin[i];
        else if (origin[i] != unit_origin[k])
          mmbal::detail::throw_invalid(name, ": the current placement splits group ", limits.groups[i],
                                       " across ranks ", unit_origin[k], " and ", origin[i]);
        first = false;
        unit_bytes[k] += bytes_of[i];
      });
    }
  }
  const std::span<const rank_t> unit_origin = u.trivial ? origin : std::span<const rank_t>(group_origin);
  const std::span<const std::uint64_t> unit_bytes = u.trivial ? bytes_of : std::span<const std::uint64_t>(group_bytes);

  migrate_result r;
  auto finish = [&](assignment placement, double target, double reached, migrate_strategy how,
                    const unload_outcome* counted = nullptr) {
    r.placement = std::move(placement);
    r.target_max = target;
    r.reached_max = reached;
    r.target_reached = reached <= target;
    r.strategy = how;
    if (counted != nullptr && counted->traffic_known) {  // counted from the greedy's arrivals
      r.moved_items = counted->moved_items;
      r.moved_bytes = counted->moved_bytes;
      r.inter_node_bytes = counted->inter_node_bytes;
      return r;
    }
    // As `placement_traffic`, without copying the ranks out.
    const mmbal::detail::node_map node(bins, opts.ranks_per_node);
    traffic t;
    for (std::size_t i = 0; i < n; ++i)
      mmbal::detail::add_move(t, origin[i], r.placement.where[i].rank, bytes_of[i], node);
    r.moved_items = t.moved_items;
    r.moved_bytes = t.moved_bytes;
    r.inter_node_bytes = t.inter_node_bytes;
    return r;
  };
  // ε = ∞ means "any maximum is fine" (and ∞ · 0 would be NaN).
  auto target_of = [&](double reference) {
    double t = std::isinf(opts.epsilon) ? std::numeric_limits<double>::infinity() : reference * (1.0 + opts.epsilon);
    if (limits.capacity) t = std::min(t, *limits.capacity);
    return t;
  };
  auto unload = [&](double target, const refine_options& polish) {
    return unload_to_target(u, weights, unit_origin, unit_bytes, bins, cost, limits, opts.ranks_per_node, target,
                            polish);
  };
  // The placement that sends unit k to dest[k]: staying units first (ascending id), then
  // arrivals (ascending id).
  auto build = [&](const std::vector<rank_t>& dest) {
    assignment a{bins, std::vector<location>(n)};
    std::vector<std::uint32_t> slot(bins, 0);
    for (int pass = 0; pass < 2; ++pass)
      for (std::uint32_t k = 0; k < u.count; ++k)
        if ((dest[k] == unit_origin[k]) == (pass == 0))
          u.for_each(k, [&](item_id i) { a.where[i] = location{dest[k], slot[dest[k]]++}; });
    return a;
  };
  auto relabel_dest = [&](const assignment& ref) {
    std::vector<rank_t> ref_bin(u.count);
    for (std::uint32_t k = 0; k < u.count; ++k) ref_bin[k] = ref.where[u.trivial ? k : u.members[u.offsets[k]]].rank;
    return relabel_to_origin(ref_bin, unit_origin, unit_bytes, u, weights, bins);
  };
  auto relabel = [&](const assignment& ref, double target, double ref_max) {
    return finish(build(relabel_dest(ref)), target, ref_max, migrate_strategy::relabel);
  };
  if (n == 0) return finish(assignment{bins, {}}, target_of(0), 0, migrate_strategy::unload);

  // Padded costs: the reference is the better of `padded` and `lpt`; a random current
  // placement is far from any good padded grouping (a rank must hold items of similar
  // length), so the reference placement itself, renamed to keep the most bytes, is the move.
  if constexpr (padded_cost<C>) {
    if (u.trivial) {
      assignment ref = lpt{}(weights, bins, cost, limits);
      double ref_max = max_load(ref, weights, cost);
      try {
        assignment pad = padded_binary_search{}(weights, bins, cost, limits);
        if (const double m = max_load(pad, weights, cost); m <= ref_max) {
          ref = std::move(pad);
          ref_max = m;
        }
      } catch (const invalid_input&) {
        // above the capacity: lpt is the reference
      }
      r.reference_max = ref_max;
      const double target = target_of(ref_max);
      const double current =
          max_load(assignment::from_partition(partition{bins, {origin.begin(), origin.end()}}), weights, cost);
      if (current <= target) {
        return finish(assignment::from_partition(partition{bins, {origin.begin(), origin.end()}}), target, current,
                      migrate_strategy::unload);
      }
      // The regrouping keeps items in place wherever a rank's profile admits them; the
      // renamed reference is the fallback (and wins when it moves fewer bytes).
      std::vector<rank_t> dest = relabel_dest(ref);
      double reached = ref_max;
      migrate_strategy how = migrate_strategy::relabel;
      if (std::vector<rank_t> regrouped =
              regroup_to_origin(weights, origin, bytes_of, bins, cost, ref, target, opts.ranks_per_node, 2);
          !regrouped.empty()) {
        std::vector<typename C::state> states(bins, cost.empty());
        std::uint64_t regroup_bytes = 0, relabel_bytes = 0;
        for (std::size_t i = 0; i < n; ++i) {
          states[regrouped[i]] = cost.add(states[regrouped[i]], weights[i]);
          if (regrouped[i] != origin[i]) regroup_bytes += bytes_of[i];
          if (dest[i] != origin[i]) relabel_bytes += bytes_of[i];
        }
        double regroup_max = 0;
        for (const auto& st : states) regroup_max = std::max(regroup_max, cost.value(st));
        if (regroup_max <= target && regroup_bytes < relabel_bytes) {
          dest = std::move(regrouped);
          reached = regroup_max;
          how = migrate_strategy::regroup;
        }
      }
      return finish(build(dest), target, reached, how);
    }
  }

  // Other costs: first the lower bound max(Σ cost / d, largest unit) for additive costs
  // (lpt is rarely far above it), then lpt's maximum; the first target the greedy reaches wins.
  double lower_bound = 0;
  if constexpr (additive_cost<C>) {
    double total = 0;
    if (u.trivial) {
      // Locals, not captured references: the loop then carries them in registers. While every
      // cost is an integer in [0, 2^32) the sum is kept in integers too; if it stays ≤ 2^53
      // every partial double sum was exact, so the double total is that integer (no 4-cycle
      // add chain per item); otherwise the sum is redone in doubles.
      double largest = 0;
      std::uint64_t int_total = 0;
      bool exact = true;
      for (std::size_t i = 0; i < n; ++i) {
        const double c = cost.value(cost.add(cost.empty(), weights[i]));
        const bool small = c >= 0 && c < 0x1p32;
        const std::uint64_t ci = small ? static_cast<std::uint64_t>(c) : 0;
        exact &= small && static_cast<double>(ci) == c;
        int_total += ci;
        largest = std::max(largest, c);
      }
      if (exact && int_total <= (std::uint64_t{1} << 53)) {
        total = static_cast<double>(int_total);
      } else {
        for (std::size_t i = 0; i < n; ++i) total += cost.value(cost.add(cost.empty(), weights[i]));
      }
      lower_bound = largest;
    } else {
      for (std::uint32_t k = 0; k < u.count; ++k) {
        const double solo = cost.value(unit_state(u, k, weights, cost, cost.empty()));
        total += solo;
        lower_bound = std::max(lower_bound, solo);
      }
    }
    lower_bound = std::max(lower_bound, total / bins);
    const double target = target_of(lower_bound);
    // Polished toward the bound (a lighter polish or none often stops 0.4 % above it, e.g. the
    // omni image phase); a miss goes on to lpt's target.
    unload_outcome first = unload(target, refine_options{});
    if (first.reached <= target) {
      r.reference_max = lower_bound;
      return finish(std::move(first.placement), target, first.reached, migrate_strategy::unload, &first);
    }
  }
  const assignment ref = lpt{}(weights, bins, cost, limits);
  const double ref_max = max_load(ref, weights, cost);
  r.reference_max = ref_max;
  const double target = target_of(ref_max);
  unload_outcome second = unload(target, refine_options{});
  if (second.reached <= target || ref_max > target)
    return finish(std::move(second.placement), target, second.reached, migrate_strategy::unload, &second);
  // The greedy missed a target that lpt's own placement meets: move to that placement, renamed.
  return relabel(ref, target, ref_max);
}

}  // namespace detail

/// Locality-aware minimal migration, for every cost.
///
/// 1. Reference and target T = (1 + ε) · reference, lowered to the capacity if one is given:
///    - additive costs: first the lower bound max(Σ cost / d, largest unit); if steps 2–4 miss
///      that target, the maximum `lpt` reaches, and steps 2–4 run again from the start;
///    - padded costs (`padded_cost`, no groups): the better of `padded_binary_search` and
///      `lpt` (ties: padded). A rank's cost is its count times its longest item, so a good
///      placement keeps items of similar length together, which a current placement rarely
///      does: unless the current maximum is already ≤ T (then nothing moves), the move is the
///      one of two that moves fewer bytes (ties: the renaming): the reference's placement with
///      its bins renamed (step 5), or a regrouping (strategy `regroup`): every rank takes the
///      (cap M, count c) profile of one reference bin — M its longest item, c the most items
///      ≤ M whose padded value stays ≤ T — keeps ≤ c of its own items ≤ M and receives the
///      rest into free slots of sufficient cap (see `detail::regroup_to_origin`: profiles
///      matched to ranks by the bytes they keep, 2 rounds of prices on the lengths whose
///      spare slots kept items use up);
///    - other costs (and padded costs with groups): `lpt`'s maximum.
/// 2. Unload: every rank whose current load exceeds T (overloaded; in decreasing load, ties by
///    index) gives up units until its load is ≤ T, chosen to move few bytes (see below). Ranks
///    at or below T never give up anything. Costs are always evaluated on the rank's batch
///    state (count, Σl, Σl², max l), never approximated.
/// 3. Place: the removed units, largest cost first (ties: the order they left), go (a) back to
///    their own rank if it still fits under T (an over-removal), else (b) to the most loaded
///    rank of the same node (node = rank / ranks_per_node) that stays ≤ T (best fit), else
///    (c) to the least loaded rank that stays ≤ T (ties: smaller index), else (d) repair: the
///    unit stays home for good and smaller units of the same overloaded home leave instead
///    (at most one repair per unit), else (e) to the rank where its cost ends lowest (within
///    the capacity).
/// 4. Polish, only if a rank is still above T: `refine`'s moves and swaps restricted to units
///    whose home was overloaded, until the maximum is ≤ T or no step improves it.
/// 5. Fallback (strategy `relabel`): when steps 2–4 miss a target that the reference's own
///    placement meets, that placement is taken with its bins renamed to ranks: a greedy
///    matching of (bin, current rank) byte overlaps in decreasing bytes (at least half of the
///    bytes the best renaming keeps), kept only if it keeps more than the identity, then units
///    of one item with equal weights trade places so that those whose rank holds a slot of
///    their weight stay (largest bytes first). Every rank keeps its multiset of weights, so
///    its cost; the moved bytes never exceed the reference's own.
///
/// Which units leave an overloaded rank: the cheaper in bytes of the single unit that covers
/// the excess with the fewest bytes, and a greedy fill in increasing bytes per unit of cost
/// relief (ties: smaller units first), finishing with the cheapest covering unit; repeated
/// while the rank is above T (costs that are not additive can need a second round).
///
/// - Guarantees: the result is a valid placement of every item. Without a capacity the maximum
///   is ≤ `target_max` ≤ (1 + ε) · `lpt`'s maximum for additive costs, and ≤ (1 + ε) · the
///   better of `padded` and `lpt` for padded costs (moving no more bytes than the renamed
///   reference, hence than the reference itself); `target_reached` and `reached_max` report
///   it for every cost. With strategy `unload` no item leaves a rank whose current load is
///   ≤ T, and if the current maximum is ≤ T (e.g. ε large) nothing moves. Moved bytes are not
///   minimal in general (a knapsack problem).
/// - Bytes: `item_bytes` (empty = the weights); `opts.ranks_per_node` 0 means one node.
/// - Constraints: `capacity` honoured (T ≤ capacity; `invalid_input` if a unit fits nowhere
///   within it); `groups` move as one unit (the current placement must keep every group on one
///   rank); `count_cap` is rejected (`invalid_input`): moving items off overloaded ranks alone
///   cannot keep counts equal.
/// - Slot order: staying items keep their current order (ascending id within a rank), arrivals
///   are appended (in placement order; after a relabel in ascending id).
/// - Complexity: additive costs O(n) plus O(s log s) per overloaded rank of s units, a radix
///   sort of the removed units and O(ranks_per_node + log d) per placed unit — no `lpt` run
///   when the lower bound is met (the common case with many items per rank); padded costs
///   `padded` + `lpt` + O(n log n) for the renaming + 2 regrouping rounds of
///   O(n log n + Σ_r s_r²) (s_r items on rank r; 10–20 × `padded` alone at 2,560 × 60); other costs refold a rank per
///   removal round (O(s²)). The polish is bounded as `refine` is.
/// - Errors (`invalid_input`): ε < 0 or NaN, origin of the wrong size or a rank ≥ bins, item_bytes of
///   the wrong size, a group split by the current placement, count caps, plus what `lpt`
///   rejects.
/// @see docs/DESIGN.md §5.1 and §7 (goal: within 0.5 % of the best shipped algorithm's max, ≤ 25 % of
///      its bytes); OrchMLLM §5.1 (padded batches), §5.2 (communication volume of the
///      rearrangement, node-wise locality).
/// @param weights    cost weight (length) per item
/// @param origin     current rank per item (< bins)
/// @param item_bytes bytes per item, what a move costs (empty = the weights)
/// @param bins       number of ranks
/// @param limits     capacity and groups (count caps are rejected); default none
/// @param opts       ε and the node size, see `migrate_options`
template <batch_cost C>
[[nodiscard]] migrate_result migrate(std::span<const length_t> weights, std::span<const rank_t> origin,
                                     std::span<const std::uint64_t> item_bytes, rank_t bins, const C& cost,
                                     const constraints& limits = {}, const migrate_options& opts = {}) {
  return detail::migrate_impl(weights, origin, item_bytes, bins, cost, limits, opts);
}

/// `migrate` as a `problem_partitioner` (it needs the problem's origins and item bytes), so
/// that the orchestrator runs it like any other partitioner. Named `migrate:eps=<epsilon>`.
/// The problem's `ranks_per_node`, when set (non-zero), replaces `options.ranks_per_node`.
struct migrate_partitioner {
  migrate_options options{};

  template <batch_cost C>
  [[nodiscard]] assignment operator()(const problem& p, const C& cost) const {
    migrate_options o = options;
    if (p.ranks_per_node != 0) o.ranks_per_node = p.ranks_per_node;
    return migrate(p.weights, p.origin, p.item_bytes, p.bins, cost, p.limits, o).placement;
  }
  /// The canonical spec, e.g. `migrate:eps=0.001`.
  [[nodiscard]] std::string name() const { return mmbal::detail::concat("migrate:eps=", options.epsilon); }
};

}  // namespace mmbal::balance
