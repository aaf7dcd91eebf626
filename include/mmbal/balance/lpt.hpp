#pragma once
/// @file
/// LPT (longest processing time first) — OrchMLLM's post-balancing algorithm without
/// paddings — and the greedy "least-loaded bin" placement engine it shares with
/// `greedy_ascending`.

#include <mmbal/balance/constraints.hpp>
#include <mmbal/balance/detail/common.hpp>
#include <mmbal/core/concepts.hpp>
#include <mmbal/core/types.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace mmbal::balance {
namespace detail {

/// Places `units` in `order`, each on the bin with the lowest current cost (ties by bin
/// index) among the bins that can take it (count limit; capacity: cost after adding ≤ cap).
/// Slots follow placement order; a unit's members go in ascending id.
///
/// Bins whose load is tracked: for an `additive_cost` without a capacity, a bin's load is the
/// running sum of `c.item(l)` (one double per bin); otherwise the bin keeps its `C::state`
/// and the load is `c.value(state)` (exactly what `bin_loads` recomputes in slot order, so a
/// capacity check here agrees bit for bit with a later check of the result).
/// Throws `invalid_input` naming the unit when no bin can take it.
/// O(n log d) plus, with capacity or group count limits, the bins set aside while searching.
template <batch_cost C>
[[nodiscard]] assignment greedy_place(const char* algorithm, std::span<const std::uint32_t> order, const units& u,
                                      std::span<const length_t> weights, rank_t bins, const C& cost,
                                      const constraints& limits) {
  placement_builder out(weights.size(), bins);
  bin_heap heap(bins);
  count_limiter limiter(limits.counts, static_cast<std::uint32_t>(weights.size()), bins);
  const bool has_cap = limits.capacity.has_value();
  const double cap = has_cap ? *limits.capacity : 0.0;
  std::vector<bin_key> set_aside;

  auto fail = [&](std::uint32_t k, const char* why) {
    if (u.trivial)
      mmbal::detail::throw_invalid(algorithm, ": no bin can take item ", k, " (weight ", weights[k], "): ", why);
    mmbal::detail::throw_invalid(algorithm, ": no bin can take the group of item ", u.members[u.offsets[k]], " (",
                                 u.size(k), " items): ", why);
  };

  if constexpr (additive_cost<C>) {
    if (!has_cap) {
      for (std::uint32_t k : order) {
        const std::uint32_t size = u.size(k);
        double add = 0;
        u.for_each(k, [&](item_id i) { add += cost.item(weights[i]); });
        if (limiter.active()) {
          while (!heap.empty() && !limiter.admits(out.count(heap.top().bin), size)) {
            // A full bin stays full for single items (limits only tighten); with groups a
            // smaller group may still fit later, so the bin is only set aside.
            if (size != 1) set_aside.push_back(heap.top());
            heap.pop();
          }
          if (heap.empty()) fail(k, "every bin is at its count cap");
          limiter.take(out.count(heap.top().bin), size);
        }
        const bin_key top = heap.top();
        u.for_each(k, [&](item_id i) { out.place(i, top.bin); });
        heap.raise_top(top.load + add);
        for (const bin_key& b : set_aside) heap.push(b);
        set_aside.clear();
      }
      return std::move(out).finish();
    }
  }

  std::vector<typename C::state> states(bins, cost.empty());
  for (std::uint32_t k : order) {
    const std::uint32_t size = u.size(k);
    typename C::state next{};
    bool found = false;
    bool count_blocked = false;
    while (!heap.empty()) {
      const bin_key top = heap.top();
      if (!limiter.admits(out.count(top.bin), size)) {
        count_blocked = true;
        if (size != 1) set_aside.push_back(top);
        heap.pop();
        continue;
      }
      next = unit_state(u, k, weights, cost, states[top.bin]);
      if (!has_cap || cost.value(next) <= cap) {
        found = true;
        break;
      }
      // Over capacity here. For an additive cost every other bin is at least as loaded, so
      // none fits; for other costs a more loaded bin may still fit (e.g. padding).
      if constexpr (additive_cost<C>) break;
      set_aside.push_back(top);
      heap.pop();
    }
    if (!found) fail(k, count_blocked && !has_cap ? "every bin is at its count cap" : "capacity exceeded on every bin");
    const rank_t b = heap.top().bin;
    limiter.take(out.count(b), size);
    u.for_each(k, [&](item_id i) { out.place(i, b); });
    states[b] = next;
    heap.raise_top(cost.value(next));
    for (const bin_key& s : set_aside) heap.push(s);
    set_aside.clear();
  }
  return std::move(out).finish();
}

}  // namespace detail

/// LPT: sort the items by weight descending (ties by id) and put each on the bin with the
/// lowest current cost (ties by bin index). OrchMLLM Alg. 1 generalised to any `batch_cost`.
///
/// - Guarantee: for an additive cost without constraints, max ≤ (4/3 − 1/(3d)) · optimum
///   (Graham 1969); for other costs it is a heuristic.
/// - Complexity: O(n · ⌈bits(max w)/11⌉) radix sort + O(n log d) heap updates; one flat heap
///   of (load, bin), no per-item allocation.
/// - Slot order: placement order (heaviest first within each bin).
/// - Constraints: all honoured. `count_cap` — full bins are skipped; `capacity` — the item
///   goes to the least-loaded bin that stays within the cap (error naming the item if an item
///   alone exceeds it or no bin can take it); `groups` — a group is one unit of weight Σ w,
///   ordered by that weight (ties by smallest member id), its members placed together in
///   ascending id. `count_cap::equal` together with `groups` is rejected (no greedy rule
///   keeps counts within ±1 for multi-item units).
/// @see OrchMLLM §5.1, Alg. 1; DESIGN.md §5.1.
struct lpt {
  static constexpr const char* name = "lpt";

  template <batch_cost C>
  [[nodiscard]] assignment operator()(std::span<const length_t> weights, rank_t bins, const C& cost,
                                      const constraints& limits = {}) const {
    detail::check_problem(name, weights, bins, limits);
    if (!limits.groups.empty() && limits.counts.kind == count_cap::mode::equal)
      detail::reject_constraint(name, "count_cap equal with groups");
    const detail::units u = detail::make_units(weights.size(), limits.groups);
    detail::check_solo_capacity(name, u, weights, cost, limits);
    std::vector<std::uint32_t> order;
    if (u.trivial) {
      order = detail::descending_order(weights);
    } else {
      const std::vector<std::uint64_t> w = detail::unit_weights(u, weights);
      order = detail::descending_order(std::span<const std::uint64_t>(w));
    }
    return detail::greedy_place(name, order, u, weights, bins, cost, limits);
  }
};

}  // namespace mmbal::balance
