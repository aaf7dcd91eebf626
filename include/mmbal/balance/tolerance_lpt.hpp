#pragma once
/// @file
/// OrchMLLM's post-balancing algorithm with a tolerance interval (appendix A, Alg. 4), for
/// Transformer costs whose quadratic term is not negligible (α Σl + β Σl²).

#include <mmbal/balance/constraints.hpp>
#include <mmbal/balance/detail/bin_queue.hpp>
#include <mmbal/balance/detail/count_limits.hpp>
#include <mmbal/balance/detail/placement.hpp>
#include <mmbal/balance/detail/units.hpp>
#include <mmbal/balance/detail/validate.hpp>
#include <mmbal/core/concepts.hpp>
#include <mmbal/core/detail/order.hpp>
#include <mmbal/core/types.hpp>

#include <cmath>
#include <cstdint>
#include <set>
#include <span>
#include <utility>
#include <vector>

namespace mmbal::balance {

/// Tolerance LPT: sort the items by weight descending (ties by id); put each on the bin with
/// the least Σl² among the bins whose Σl is within `v` of the minimum Σl (Σl ≤ min Σl + v),
/// ties by smaller Σl, then by bin index.
///
/// The paper's comparator ("if |ΣlA − ΣlB| < v compare Σl², else Σl") is not a strict weak
/// ordering (closeness is not transitive), so a priority queue built on it has no defined
/// result; this is the well-defined rule of docs/DESIGN.md §5.1. v = 0 is LPT on Σl with Σl²
/// breaking exact ties; v → ∞ balances Σl² alone.
///
/// - Parameter: `v` (default 0), in length units; must be finite and ≥ 0.
/// - Guarantee: a heuristic for α Σl + β Σl² (no approximation bound is claimed by the paper).
/// - Complexity: O(n log n + n log d): three indexed heaps (the minimum Σl; the window by Σl²;
///   the bins above the window), no per-item allocation. With a capacity, or groups under a
///   count cap (where a bin's eligibility depends on the unit), the bins are scanned in
///   (Σl, bin) order instead: O(n (log d + w)), w = bins up to the end of the window.
/// - Slot order: placement order.
/// - Constraints: `count_cap` (full bins leave the window), `capacity` (bins whose cost after
///   adding would exceed it are skipped; the window is taken over the remaining bins),
///   `groups` (units of weight Σw). `count_cap::equal` with `groups` is rejected.
/// @see OrchMLLM appendix A, Alg. 4; docs/DESIGN.md §5.1.
struct tolerance_lpt {
  static constexpr const char* name = "tolerance";
  double v = 0.0;

  template <batch_cost C>
  [[nodiscard]] assignment operator()(std::span<const length_t> weights, rank_t bins, const C& cost,
                                      const constraints& limits = {}) const {
    if (!std::isfinite(v) || v < 0)
      mmbal::detail::throw_invalid(name, ": tolerance v = ", v, " must be finite and >= 0");
    detail::check_problem(name, weights, bins, limits);
    if (!limits.groups.empty() && limits.counts.kind == count_cap::mode::equal)
      detail::reject_constraint(name, "count_cap equal with groups");
    const detail::units u = detail::make_units(weights.size(), limits.groups);
    detail::check_solo_capacity(name, u, weights, cost, limits);
    const std::vector<std::uint64_t> uw = detail::unit_weights(u, weights);
    const std::vector<std::uint32_t> order = u.trivial
                                                 ? mmbal::detail::descending_order(weights)
                                                 : mmbal::detail::descending_order(std::span<const std::uint64_t>(uw));

    detail::count_limiter limiter(limits.counts, static_cast<std::uint32_t>(weights.size()), bins);
    detail::placement_builder out(weights.size(), bins);
    auto fail = [&](std::uint32_t k) {
      if (u.trivial)
        mmbal::detail::throw_invalid(name, ": no bin can take item ", k, " (weight ", weights[k],
                                     "): every bin is at its count cap or capacity");
      mmbal::detail::throw_invalid(name, ": no bin can take the group of item ", u.members[u.offsets[k]], " (",
                                   u.size(k), " items): every bin is at its count cap or capacity");
    };
    auto square_sum = [&](std::uint32_t k) {
      double add_sq = 0;
      u.for_each(k, [&](item_id i) {
        const double l = weights[i];
        add_sq += l * l;
      });
      return add_sq;
    };

    if (!limits.capacity && (u.trivial || limits.counts.kind == count_cap::mode::none)) {
      // Eligibility never comes back here (single items, or no count cap), so full bins
      // leave for good. Three indexed heaps: `all` by (Σl, bin) gives the minimum; the
      // window {Σl ≤ min + v} by (Σl², Σl, bin) gives the choice; `outside` by (Σl, bin)
      // holds bins waiting for the minimum to catch up. Bins only grow and the minimum only
      // rises, so a bin leaves the window only when it is itself chosen.
      std::vector<std::uint64_t> sum(bins, 0);
      std::vector<double> sq(bins, 0.0);
      auto by_sum = [&](rank_t x, rank_t y) { return sum[x] != sum[y] ? sum[x] < sum[y] : x < y; };
      auto by_sq = [&](rank_t x, rank_t y) {
        if (sq[x] != sq[y]) return sq[x] < sq[y];
        return sum[x] != sum[y] ? sum[x] < sum[y] : x < y;
      };
      detail::indexed_bin_queue<decltype(by_sum)> all(bins, by_sum), outside(bins, by_sum);
      detail::indexed_bin_queue<decltype(by_sq)> window(bins, by_sq);
      for (rank_t b = 0; b < bins; ++b) {
        all.push(b);
        window.push(b);  // every Σl is 0 = min
      }
      auto drop = [&](rank_t b) {
        all.erase(b);
        if (window.contains(b)) window.erase(b);
        if (outside.contains(b)) outside.erase(b);
      };
      rank_t pending = bins;  // the bin that grew last: its window key is stale
      for (const std::uint32_t k : order) {
        const std::uint32_t size = u.size(k);
        auto eligible = [&](rank_t b) { return limiter.admits(out.count(b), size); };
        if (pending != bins && window.contains(pending)) window.update(pending);
        while (!all.empty() && !eligible(all.top())) drop(all.top());
        if (all.empty()) fail(k);
        const std::uint64_t min_sum = sum[all.top()];
        if (pending != bins && window.contains(pending) && static_cast<double>(sum[pending] - min_sum) > v) {
          window.erase(pending);
          outside.push(pending);
        }
        while (!outside.empty() && static_cast<double>(sum[outside.top()] - min_sum) <= v) {
          const rank_t b = outside.top();
          outside.erase(b);
          window.push(b);
        }
        while (!window.empty() && !eligible(window.top())) drop(window.top());
        // The minimum bin is eligible and inside the window, so the window is not empty.
        const rank_t b = window.top();
        limiter.take(out.count(b), size);
        u.for_each(k, [&](item_id i) { out.place(i, b); });
        sum[b] += uw[k];
        sq[b] += square_sum(k);
        all.update(b);
        pending = b;
      }
      return std::move(out).finish();
    }

    // General path (capacity, or groups under a count cap: eligibility depends on the
    // unit): scan the bins in ascending (Σl, bin) order; the first eligible bin fixes the
    // window. O(w) per unit.
    struct bin_state {
      std::uint64_t sum = 0;
      double sum_sq = 0;
    };
    std::vector<bin_state> state(bins);
    std::vector<typename C::state> cost_state;
    if (limits.capacity) cost_state.assign(bins, cost.empty());
    std::set<std::pair<std::uint64_t, rank_t>> by_sum;
    for (rank_t b = 0; b < bins; ++b) by_sum.emplace(0, b);

    for (const std::uint32_t k : order) {
      const std::uint32_t size = u.size(k);
      const double add_sq = square_sum(k);
      // Scan bins by ascending Σl: the first eligible bin fixes the window [min, min + v].
      auto best = by_sum.end();
      bool have_min = false;
      std::uint64_t min_sum = 0;
      typename C::state best_next{};
      for (auto it = by_sum.begin(); it != by_sum.end();) {
        const auto [sum, b] = *it;
        if (have_min && static_cast<double>(sum - min_sum) > v) break;
        if (!limiter.admits(out.count(b), size)) {
          // Single items: a full bin stays full, drop it for good.
          it = size == 1 ? by_sum.erase(it) : std::next(it);
          continue;
        }
        typename C::state next{};
        if (limits.capacity) {
          next = detail::unit_state(u, k, weights, cost, cost_state[b]);
          if (cost.value(next) > *limits.capacity) {
            ++it;
            continue;
          }
        }
        if (!have_min) {
          have_min = true;
          min_sum = sum;
        }
        if (best == by_sum.end()) {
          best = it;
          best_next = next;
        } else {
          const bin_state& cand = state[b];
          const bin_state& cur = state[best->second];
          // Ascending Σl iteration: a later candidate never has a smaller Σl, and equal Σl
          // comes in ascending bin order — so only a strictly smaller Σl² wins.
          if (cand.sum_sq < cur.sum_sq) {
            best = it;
            best_next = next;
          }
        }
        ++it;
      }
      if (best == by_sum.end()) fail(k);
      const rank_t b = best->second;
      limiter.take(out.count(b), size);
      u.for_each(k, [&](item_id i) { out.place(i, b); });
      auto node = by_sum.extract(best);
      state[b].sum += uw[k];
      state[b].sum_sq += add_sq;
      node.value().first = state[b].sum;
      by_sum.insert(std::move(node));
      if (limits.capacity) cost_state[b] = best_next;
    }
    return std::move(out).finish();
  }
};

}  // namespace mmbal::balance
