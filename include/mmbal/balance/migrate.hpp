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
#include <mmbal/balance/problem.hpp>
#include <mmbal/balance/refine.hpp>
#include <mmbal/core/concepts.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/cost/metrics.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <queue>
#include <set>
#include <span>
#include <string>
#include <vector>

namespace mmbal::balance {

/// Options of `migrate`.
struct migrate_options {
  /// Allowed excess of the maximum over what `lpt` reaches: target = (1 + epsilon) · max(lpt).
  /// Default 0.001 (0.1 %). Must be ≥ 0 (NaN rejected); +∞ or any value that puts the target
  /// above the current maximum moves nothing.
  double epsilon = 0.001;
  /// Ranks per node (node = rank / ranks_per_node), for preferring destinations on the same
  /// node and counting inter-node bytes. Default 0: a single node.
  rank_t ranks_per_node = 0;
};

/// What `migrate` decided.
struct migrate_result {
  assignment placement;                ///< new placement; items that stay keep their order, arrivals go last
  double target_max = 0;               ///< (1 + ε) · max(lpt), capped by the capacity if one is given
  std::uint64_t moved_items = 0;       ///< items whose rank changes
  std::uint64_t moved_bytes = 0;       ///< Σ bytes of those items
  std::uint64_t inter_node_bytes = 0;  ///< Σ bytes of the moved items whose node changes
};

namespace detail {

/// Picks the units to take out of one bin so that its cost drops by at least `excess`, with few
/// bytes: the better (fewer bytes) of (a) the single unit with the fewest bytes among those
/// that cover the excess alone, and (b) a greedy fill in increasing bytes per unit of cost
/// relief, taking each unit that does not overshoot what is still missing and finishing with
/// the cheapest unit that covers the rest. Ties: fewer bytes, then smaller relief, then index.
/// `relief[k]` is what removing `units[k]` alone saves. Returns positions into `units`.
inline std::vector<std::size_t> choose_removals(std::span<const double> relief, std::span<const std::uint64_t> bytes,
                                                double excess) {
  const std::size_t s = relief.size();
  auto cheaper_cover = [&](std::size_t a, std::size_t b) {  // is a a better single cover than b?
    if (bytes[a] != bytes[b]) return bytes[a] < bytes[b];
    if (relief[a] != relief[b]) return relief[a] < relief[b];
    return a < b;
  };
  // (a) one unit.
  std::size_t single = s;
  for (std::size_t k = 0; k < s; ++k)
    if (relief[k] >= excess && (single == s || cheaper_cover(k, single))) single = k;
  // (b) greedy fill by bytes per unit of relief.
  std::vector<std::size_t> order;
  for (std::size_t k = 0; k < s; ++k)
    if (relief[k] > 0) order.push_back(k);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    // bytes[a] / relief[a] < bytes[b] / relief[b], cross-multiplied (relief > 0).
    const double ra = static_cast<double>(bytes[a]) * relief[b], rb = static_cast<double>(bytes[b]) * relief[a];
    if (ra != rb) return ra < rb;
    // Equal bytes per relief (e.g. bytes = weights): smaller units first, they pack better.
    if (relief[a] != relief[b]) return relief[a] < relief[b];
    return a < b;
  });
  std::vector<std::size_t> fill;
  std::vector<bool> taken(s, false);
  double missing = excess;
  std::uint64_t fill_bytes = 0;
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
  if (single != s && (missing > 0 || bytes[single] <= fill_bytes)) return {single};
  return fill;  // may fall short when the bin cannot be relieved enough; the caller loops
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

  std::vector<std::uint64_t> item_bytes(n);
  for (std::size_t i = 0; i < n; ++i) item_bytes[i] = item_bytes_in.empty() ? weights[i] : item_bytes_in[i];

  const units u = make_units(n, limits.groups);
  std::vector<rank_t> unit_origin(u.count);
  std::vector<std::uint64_t> unit_bytes(u.count, 0);
  for (std::uint32_t k = 0; k < u.count; ++k) {
    bool first = true;
    u.for_each(k, [&](item_id i) {
      if (first)
        unit_origin[k] = origin[i];
      else if (origin[i] != unit_origin[k])
        mmbal::detail::throw_invalid(name, ": the current placement splits group ", limits.groups[i], " across ranks ",
                                     unit_origin[k], " and ", origin[i]);
      first = false;
      unit_bytes[k] += item_bytes[i];
    });
  }

  // 1. Target from lpt.
  double lpt_max = 0;
  if (n > 0) {
    const std::vector<double> l = bin_loads(lpt{}(weights, bins, cost, limits), weights, cost);
    lpt_max = *std::max_element(l.begin(), l.end());
  }
  // ε = ∞ means "any maximum is fine" (and ∞ · 0 would be NaN).
  double target = std::isinf(opts.epsilon) ? std::numeric_limits<double>::infinity() : lpt_max * (1.0 + opts.epsilon);
  if (limits.capacity) target = std::min(target, *limits.capacity);

  // Current bins: units in ascending first id (= current slot order).
  using state = typename C::state;
  std::vector<std::vector<std::uint32_t>> content(bins);
  for (std::uint32_t k = 0; k < u.count; ++k) content[unit_origin[k]].push_back(k);
  auto fold = [&](const std::vector<std::uint32_t>& c, std::uint32_t skip) {
    return fold_units(u, std::span<const std::uint32_t>(c), skip, weights, cost);
  };
  std::vector<state> states(bins);
  std::vector<double> load(bins);
  for (rank_t b = 0; b < bins; ++b) {
    states[b] = fold(content[b], std::numeric_limits<std::uint32_t>::max());
    load[b] = cost.value(states[b]);
  }

  // Relief of every unit of bin b that `eligible` accepts, with `extra` (a unit or `none`)
  // counted as part of the bin; then the removal plan for the excess over the target.
  constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();
  std::vector<double> relief;
  std::vector<std::uint64_t> rbytes;
  std::vector<std::uint32_t> candidates;
  auto plan = [&](rank_t b, std::uint32_t extra, double bin_load, auto&& eligible) {
    const auto& c = content[b];
    candidates.clear();
    for (std::uint32_t k : c)
      if (eligible(k)) candidates.push_back(k);
    relief.assign(candidates.size(), 0.0);
    rbytes.assign(candidates.size(), 0);
    for (std::size_t j = 0; j < candidates.size(); ++j) {
      if constexpr (additive_cost<C>) {
        u.for_each(candidates[j], [&](item_id i) { relief[j] += cost.item(weights[i]); });
      } else {
        state s = fold(c, candidates[j]);
        if (extra != none) s = unit_state(u, extra, weights, cost, s);
        relief[j] = bin_load - cost.value(s);
      }
      rbytes[j] = unit_bytes[candidates[j]];
    }
    std::vector<std::uint32_t> out;
    for (std::size_t j : choose_removals(relief, rbytes, bin_load - target)) out.push_back(candidates[j]);
    return out;
  };
  auto remove_units = [&](rank_t b, const std::vector<std::uint32_t>& gone) {
    auto& c = content[b];
    c.erase(std::remove_if(c.begin(), c.end(),
                           [&](std::uint32_t k) { return std::find(gone.begin(), gone.end(), k) != gone.end(); }),
            c.end());
    states[b] = fold(c, none);
    load[b] = cost.value(states[b]);
  };

  const std::vector<double> initial_load = load;

  // 2. Unload overloaded ranks, most loaded first.
  std::vector<rank_t> over;
  for (rank_t b = 0; b < bins; ++b)
    if (load[b] > target) over.push_back(b);
  std::sort(over.begin(), over.end(),
            [&](rank_t a, rank_t b) { return load[a] != load[b] ? load[a] > load[b] : a < b; });
  std::vector<std::uint32_t> pool;
  for (rank_t b : over) {
    while (load[b] > target && !content[b].empty()) {
      std::vector<std::uint32_t> take = plan(b, none, load[b], [](std::uint32_t) { return true; });
      if (take.empty()) take.push_back(content[b].back());  // only zero-relief units left
      pool.insert(pool.end(), take.begin(), take.end());
      remove_units(b, take);
    }
  }

  // 3. Place the removed units, largest cost first (ties: smaller index).
  std::vector<double> solo(u.count, 0.0);
  for (std::uint32_t k = 0; k < u.count; ++k) solo[k] = cost.value(unit_state(u, k, weights, cost, cost.empty()));
  auto later = [&](std::uint32_t a, std::uint32_t b) { return solo[a] != solo[b] ? solo[a] < solo[b] : a > b; };
  // The pool is sorted once (contiguous (cost, unit) pairs); units sent away by a repair are
  // rare and wait in a small heap; the next unit is the larger of the two heads.
  std::vector<std::pair<double, std::uint32_t>> sorted_pool;
  sorted_pool.reserve(pool.size());
  for (std::uint32_t k : pool) sorted_pool.emplace_back(-solo[k], k);
  std::sort(sorted_pool.begin(), sorted_pool.end());
  std::size_t next_sorted = 0;
  std::priority_queue<std::uint32_t, std::vector<std::uint32_t>, decltype(later)> repaired(later);
  std::set<bin_key> by_load;
  for (rank_t b = 0; b < bins; ++b) by_load.insert(bin_key{load[b], b});
  const rank_t per_node = opts.ranks_per_node == 0 ? bins : opts.ranks_per_node;
  std::vector<std::vector<std::uint32_t>> arrivals(bins);
  std::vector<bool> pinned(u.count, false);
  std::uint64_t repairs = 0;
  auto put = [&](std::uint32_t k, rank_t b, const state& next) {
    by_load.erase(bin_key{load[b], b});
    states[b] = next;
    load[b] = cost.value(next);
    by_load.insert(bin_key{load[b], b});
    if (b == unit_origin[k])
      content[b].push_back(k);  // back home: keeps its place below
    else
      arrivals[b].push_back(k);
  };
  while (next_sorted < sorted_pool.size() || !repaired.empty()) {
    std::uint32_t k;
    if (repaired.empty() ||
        (next_sorted < sorted_pool.size() && later(repaired.top(), sorted_pool[next_sorted].second))) {
      k = sorted_pool[next_sorted++].second;
    } else {
      k = repaired.top();
      repaired.pop();
    }
    const rank_t home = unit_origin[k];
    const state at_home = unit_state(u, k, weights, cost, states[home]);
    // (a) home, if it fits again (the removal overshot).
    if (cost.value(at_home) <= target) {
      put(k, home, at_home);
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
        const state s = unit_state(u, k, weights, cost, states[b]);
        if (cost.value(s) <= target) {
          best = b;
          best_state = s;
        }
      }
    }
    // (c) anywhere: the most loaded rank that still fits (best fit). For an additive cost the
    // search starts at the ranks whose load is at most target − cost(unit).
    if (best == bins) {
      auto it = by_load.end();
      if constexpr (additive_cost<C>) it = by_load.upper_bound(bin_key{target - solo[k], bins});
      while (it != by_load.begin()) {
        --it;
        if (it->bin == home) continue;
        const state s = unit_state(u, k, weights, cost, states[it->bin]);
        if (cost.value(s) <= target) {
          // Among equal loads the set holds the larger index last: jump to the smallest index
          // of that load that is not home (equal load and cost: it fits as well).
          rank_t pick = it->bin;
          state pick_state = s;
          for (auto jt = by_load.lower_bound(bin_key{it->load, 0}); jt != it; ++jt) {
            if (jt->bin == home) continue;
            const state sj = unit_state(u, k, weights, cost, states[jt->bin]);
            if (cost.value(sj) <= target) {
              pick = jt->bin;
              pick_state = sj;
              break;
            }
          }
          best = pick;
          best_state = pick_state;
          break;
        }
      }
    }
    if (best != bins) {
      put(k, best, best_state);
      continue;
    }
    // (d) repair: the unit fits nowhere. Keep it at home for good and send smaller units of
    // the same (overloaded) home away instead; they are easier to fit. Bounded: at most one
    // repair per unit.
    if (repairs < u.count) {
      ++repairs;
      std::vector<std::uint32_t> take = plan(home, k, cost.value(at_home), [&](std::uint32_t j) {
        return !pinned[j] && unit_origin[j] == home && later(j, k);
      });
      double relieved = 0;
      for (std::uint32_t j : take) relieved += solo[j];
      if (!take.empty() && (!additive_cost<C> || relieved >= cost.value(at_home) - target)) {
        pinned[k] = true;
        by_load.erase(bin_key{load[home], home});
        content[home].push_back(k);
        remove_units(home, take);
        by_load.insert(bin_key{load[home], home});
        for (std::uint32_t j : take) repaired.push(j);
        continue;
      }
    }
    // (e) nothing helps: where the unit's cost ends lowest (ties: smaller index), within the
    // capacity if one is given. The maximum then exceeds the target; the caller sees it in
    // the loads.
    double best_value = std::numeric_limits<double>::infinity();
    for (rank_t b = 0; b < bins; ++b) {
      const state s = unit_state(u, k, weights, cost, states[b]);
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
    put(k, best, best_state);
  }

  // Current result as a refine state: staying units in ascending first id, then arrivals in
  // placement order (the slot keys).
  refine_state st;
  st.u = &u;
  st.unit_bin.assign(u.count, 0);
  st.counts.assign(bins, 0);
  st.key.assign(n, 0);
  st.next_key = n;
  double reached = 0;
  for (rank_t b = 0; b < bins; ++b) {
    auto& c = content[b];
    std::sort(c.begin(), c.end());  // units are numbered by first member: ascending id
    std::uint64_t slot = 0;
    auto take = [&](std::uint32_t k) {
      st.unit_bin[k] = b;
      st.counts[b] += u.size(k);
      u.for_each(k, [&](item_id i) { st.key[i] = slot++; });
    };
    for (std::uint32_t k : c) take(k);
    for (std::uint32_t k : arrivals[b]) take(k);
    reached = std::max(reached, load[b]);
  }
  // 4. Polish, only when the greedy left a rank above the target: `refine`'s moves and swaps,
  // restricted to units whose home rank was overloaded, stopping once the maximum is ≤ T.
  if (reached > target) {
    std::vector<bool> movable(u.count);
    for (std::uint32_t k = 0; k < u.count; ++k) movable[k] = initial_load[unit_origin[k]] > target;
    const count_bounds unlimited{};
    if constexpr (additive_cost<C>)
      refine_additive(st, weights, cost, limits, unlimited, bins, refine_options{}, &movable, target);
    else
      refine_general(st, weights, cost, limits, unlimited, bins, refine_options{}, &movable, target);
  }

  migrate_result r;
  r.target_max = target;
  r.placement = st.build(bins);
  std::vector<rank_t> bin_of(n);
  for (item_id i = 0; i < n; ++i) bin_of[i] = r.placement.where[i].rank;
  const partition dest{bins, std::move(bin_of)};
  const traffic t = placement_traffic(origin, dest, item_bytes, opts.ranks_per_node);
  r.moved_items = t.moved_items;
  r.moved_bytes = t.moved_bytes;
  r.inter_node_bytes = t.inter_node_bytes;
  return r;
}

}  // namespace detail

/// Locality-aware minimal migration.
///
/// 1. Target: M = the maximum `lpt` reaches on the same problem (any cost, same constraints);
///    target T = (1 + ε) · M, lowered to the capacity if one is given.
/// 2. Unload: every rank whose current load exceeds T (overloaded; in decreasing load, ties by
///    index) gives up units until its load is ≤ T, chosen to move few bytes (see below). Ranks
///    at or below T never give up anything.
/// 3. Place: the removed units, largest cost first (ties by index), go (a) back to their own
///    rank if it still fits under T (an over-removal), else (b) to the most loaded rank of the
///    same node (node = rank / ranks_per_node) that stays ≤ T (best fit, which packs the
///    small slack left by a tight target), else (c) to the most loaded rank anywhere that
///    stays ≤ T, else (d) repair: the unit stays home for good and smaller units of the same
///    overloaded home leave instead (at most one repair per unit), else (e) to the rank where
///    its cost ends lowest (within the capacity).
/// 4. Polish, only if a rank is still above T: `refine`'s moves and swaps restricted to units
///    whose home was overloaded, until the maximum is ≤ T or no step improves it.
///
/// Which units leave an overloaded rank: the cheaper in bytes of the single unit that covers
/// the excess with the fewest bytes, and a greedy fill in increasing bytes per unit of cost
/// relief (ties: smaller units first), finishing with the cheapest covering unit; repeated
/// while the rank is above T (costs that are not additive can need a second round).
///
/// - Guarantee: never moves an item off a rank whose current load is ≤ T; if the current
///   maximum is ≤ T (e.g. ε large) nothing moves; the maximum is ≤ T whenever steps 3–4 find
///   room (always observed with ≥ 16 items per rank, ε ≥ 0.1 % and items well below T). The
///   target can be infeasible under the first rule (a large unit that fits on no rank that
///   keeps its items); then the result's maximum exceeds `target_max` — compare them — and
///   nothing loops. Moved bytes are not minimal in general (a knapsack problem) but are those
///   of a few units per overloaded rank.
/// - Bytes: `item_bytes` (empty = the weights); `opts.ranks_per_node` 0 means one node.
/// - Constraints: `capacity` honoured (T ≤ capacity; `invalid_input` if a unit fits nowhere
///   within it); `groups` move as one unit (the current placement must keep every group on one
///   rank); `count_cap` is rejected (`invalid_input`): moving items off overloaded ranks alone
///   cannot keep counts equal.
/// - Slot order: staying items keep their current order (ascending id within a rank), arrivals
///   are appended in placement order.
/// - Complexity: one `lpt` run plus O(n log n) for additive costs (removal rounds refold a rank:
///   O(s²) for other costs), O(ranks_per_node + log d) per placed unit; the polish is bounded
///   as `refine` is.
/// - Errors (`invalid_input`): ε < 0 or NaN, origin of the wrong size or a rank ≥ bins, item_bytes of
///   the wrong size, a group split by the current placement, count caps, plus what `lpt`
///   rejects.
/// @see docs/DESIGN.md §5.1 and §7 (goal: within 0.5 % of lpt's max, ≤ 25 % of the bytes lpt moves);
///      OrchMLLM §5.2 (communication volume of the rearrangement, node-wise locality).
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
