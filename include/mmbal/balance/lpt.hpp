#pragma once
/// @file
/// LPT (longest processing time first) — OrchMLLM's post-balancing algorithm without
/// paddings — and the greedy "least-loaded bin" placement engine it shares with
/// `greedy_ascending`.

#include <mmbal/balance/constraints.hpp>
#include <mmbal/balance/detail/bin_queue.hpp>
#include <mmbal/balance/detail/count_limits.hpp>
#include <mmbal/balance/detail/placement.hpp>
#include <mmbal/balance/detail/units.hpp>
#include <mmbal/balance/detail/validate.hpp>
#include <mmbal/core/concepts.hpp>
#include <mmbal/core/detail/least_loaded.hpp>
#include <mmbal/core/detail/order.hpp>
#include <mmbal/core/types.hpp>

#include <array>
#include <bit>
#include <cmath>
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
  min_queue<bin_key> heap = make_bin_queue(bins);
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
        heap.pop();
        heap.push(bin_key{top.load + add, top.bin});
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
    heap.pop();
    heap.push(bin_key{cost.value(next), b});
    for (const bin_key& s : set_aside) heap.push(s);
    set_aside.clear();
  }
  return std::move(out).finish();
}

/// The placement order of `lpt_unconstrained` (its steps 1 and 2): the items as (w << 32 | ~id) words sorted ascending
/// (walked backwards: weight descending, ties by ascending id), whether every item cost is a
/// non-negative integer, and Σ cost.
struct lpt_order {
  std::vector<std::uint64_t> words;
  bool integral = true;
  double total = 0;

  /// The item of a word.
  [[nodiscard]] static item_id id_of(std::uint64_t w) noexcept {
    return static_cast<item_id>(0xffffffffu - static_cast<std::uint32_t>(w));
  }
  /// The k-th word in placement order (weight descending, ties by ascending id).
  [[nodiscard]] std::uint64_t placed(std::size_t k) const noexcept { return words[words.size() - 1 - k]; }
  /// Whether integer keys (load << bin bits | bin) order `bins` bins exactly as the double
  /// loads would: integral costs whose total (and so every partial sum) is exact.
  [[nodiscard]] bool packs(rank_t bins) const noexcept {
    return integral && total < 0x1p53 && total + 1 < std::ldexp(1.0, 64 - mmbal::detail::bin_bits(bins));
  }
};

/// Steps 1 and 2 of `lpt_unconstrained` for `weights` under `cost`. O(n · ⌈bits(max w)/11⌉).
template <additive_cost C>
[[nodiscard]] lpt_order lpt_sorted(std::span<const length_t> weights, const C& cost) {
  const std::size_t n = weights.size();
  lpt_order o;
  o.words.resize(n);
  length_t any_bits = 0;
  bool integral = true;
  // Four partial sums: one chain of dependent additions cost ≈ 9 cycles per item (the sum
  // lived on the stack), a third of this pass. The total only decides whether the integer keys
  // are exact: a sum of non-negative integers comes out below 2^53 in any order exactly when
  // it is below 2^53 (partial sums below it are exact).
  std::array<double, 4> partial{};
  for (std::size_t i = 0; i < n; ++i) {
    const length_t w = weights[i];
    o.words[n - 1 - i] = (std::uint64_t{w} << 32) | (0xffffffffu - static_cast<std::uint32_t>(i));
    any_bits |= w;
    const double c = cost.item(w);
    integral &= (c >= 0) & (c == std::floor(c));
    partial[i % 4] += c;
  }
  o.integral = integral;
  o.total = (partial[0] + partial[1]) + (partial[2] + partial[3]);
  std::vector<std::uint64_t> spare;
  mmbal::detail::sort_packed(o.words, spare, any_bits);
  return o;
}

/// Step 3 of `lpt_unconstrained` over `order`: `place(k, bin)` for the k-th item in placement
/// order. Equal weights add equal costs; the words run by weight, so equal ends mean a run.
template <additive_cost C, class Place>
void lpt_deal(const lpt_order& order, rank_t bins, const C& cost, Place&& place) {
  const std::size_t n = order.words.size();
  auto item_cost = [&](std::size_t k) { return cost.item(static_cast<length_t>(order.placed(k) >> 32)); };
  if (order.packs(bins)) {
    mmbal::detail::deal_least_loaded_packed(
        n, bins, [&](std::size_t k) { return static_cast<std::uint64_t>(item_cost(k)); }, place,
        [&](std::size_t k, std::size_t e) { return (order.placed(k) >> 32) == (order.placed(e) >> 32); });
    return;
  }
  mmbal::detail::deal_least_loaded_wide(
      n, bins,
      [&](std::size_t k, std::uint64_t bits) {
        return mmbal::detail::wide_key::make(std::bit_cast<double>(bits) + item_cost(k), 0).bits;
      },
      place);
}

/// LPT without constraints for an additive cost — the hot path (docs/DESIGN.md §7 goal: n =
/// 153,600 items into d = 2,560 bins in no more time than std::sort of the n keys).
///
/// 1. One pass packs (w << 32 | ~id) words in reverse id order, ORs the weights (for the
///    number of radix passes) and checks whether every item cost is a non-negative integer.
/// 2. A stable LSD radix sort on the weight bits only (11 bits per pass, usually 2 passes);
///    walking the result backwards yields weight descending, ties by ascending id.
/// 3. Greedy least-loaded placement on a tournament tree of bins (core/detail/least_loaded.hpp,
///    shared with context's LPT). When all item costs are integers whose total stays below
///    2^53 and leaves room for the bin index, a key is the single word (load << bin_bits |
///    bin), and the tree compares plain integers; otherwise keys are `wide_key` (double bits, bin).
///    Both orders are exactly (load, bin) with the double sums of the generic engine, so the
///    result is identical to it. On the packed path, runs of ≥ max(2·bins, 64) items of one
///    weight are placed in bulk, O(bins + run), with the same result (`equal_run_dealer`).
template <additive_cost C>
[[nodiscard]] assignment lpt_unconstrained(std::span<const length_t> weights, rank_t bins, const C& cost) {
  const std::size_t n = weights.size();
  assignment a{bins, std::vector<location>(n)};
  if (n == 0) return a;
  const lpt_order order = lpt_sorted(weights, cost);
  std::vector<std::uint32_t> counts(bins, 0);
  lpt_deal(order, bins, cost, [&](std::size_t k, rank_t b) {
    a.where[lpt_order::id_of(order.placed(k))] = location{b, counts[b]++};
  });
  return a;
}

/// The shared body of `lpt` and `greedy_ascending`: validate, merge groups into units, order
/// the units by weight (descending for LPT, ascending for DistTrain's Alg. 2; ties by id) and
/// place them greedily on the least-loaded admissible bin.
template <batch_cost C>
[[nodiscard]] assignment greedy_in_weight_order(const char* algorithm, bool descending,
                                                std::span<const length_t> weights, rank_t bins, const C& cost,
                                                const constraints& limits) {
  if (!limits.groups.empty() && limits.counts.kind == count_cap::mode::equal)
    reject_constraint(algorithm, "count_cap equal with groups");
  const units u = make_units(weights.size(), limits.groups);
  check_solo_capacity(algorithm, u, weights, cost, limits);
  std::vector<std::uint32_t> order;
  if (u.trivial) {
    order = descending ? mmbal::detail::descending_order(weights) : mmbal::detail::ascending_order(weights);
  } else {
    const std::vector<std::uint64_t> w = unit_weights(u, weights);
    const std::span<const std::uint64_t> unit_w(w);
    order = descending ? mmbal::detail::descending_order(unit_w) : mmbal::detail::ascending_order(unit_w);
  }
  return greedy_place(algorithm, order, u, weights, bins, cost, limits);
}

}  // namespace detail

/// LPT: sort the items by weight descending (ties by id) and put each on the bin with the
/// lowest current cost (ties by bin index). OrchMLLM Alg. 1 generalised to any `batch_cost`.
///
/// - Guarantee: for an additive cost without constraints, max ≤ (4/3 − 1/(3d)) · optimum
///   (Graham 1969); for other costs it is a heuristic.
/// - Complexity: O(n · ⌈bits(max w)/11⌉) radix sort + O(n log d) heap updates; one flat heap
///   of (load, bin), no per-item allocation. Unconstrained with integer costs, an item in a
///   run of ≥ max(2d, 64) equal weights costs O(1) instead of O(log d) (image phases: few
///   distinct lengths).
/// - Slot order: placement order (heaviest first within each bin).
/// - Constraints: all honoured. `count_cap` — full bins are skipped; `capacity` — the item
///   goes to the least-loaded bin that stays within the cap (error naming the item if an item
///   alone exceeds it or no bin can take it); `groups` — a group is one unit of weight Σ w,
///   ordered by that weight (ties by smallest member id), its members placed together in
///   ascending id. `count_cap::equal` together with `groups` is rejected (no greedy rule
///   keeps counts within ±1 for multi-item units).
/// @see OrchMLLM §5.1, Alg. 1; docs/DESIGN.md §5.1.
struct lpt {
  static constexpr const char* name = "lpt";

  template <batch_cost C>
  [[nodiscard]] assignment operator()(std::span<const length_t> weights, rank_t bins, const C& cost,
                                      const constraints& limits = {}) const {
    detail::check_problem(name, weights, bins, limits);
    if constexpr (additive_cost<C>)
      if (!limits.any()) return detail::lpt_unconstrained(weights, bins, cost);
    return detail::greedy_in_weight_order(name, true, weights, bins, cost, limits);
  }
};

}  // namespace mmbal::balance
