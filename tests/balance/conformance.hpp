#pragma once
// Conformance kit for partitioners (docs/DESIGN.md §5.1): every algorithm runs through the same
// invariant checks on seeded random instances, with independent reference implementations
// of the greedy rules and a brute-force optimum for tiny inputs.

#include <mmbal/core/rng.hpp>
#include <mmbal/cost/metrics.hpp>
#include <mmbal/spec/algorithm.hpp>
#include <mmbal/spec/cost.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

namespace mmbal::test {

/// One random instance.
struct instance {
  std::vector<length_t> weights;
  rank_t bins = 1;
  std::string shape;  // how it was drawn (for failure messages)
};

/// Draws an instance for `seed`: mostly small (n ≤ 40), some medium, a few up to 10^4; d from
/// 1 to beyond n; weight shapes: small range with many ties, realistic lognormal, zeros mixed
/// in, all equal, one huge item.
inline instance random_instance(std::uint64_t seed, std::size_t max_n = 10000) {
  rng_engine g = make_rng(seed, 0x0ba1a9ce);
  instance in;
  const std::uint64_t size_class = uniform_below(g, 100);
  std::size_t n = 0;
  if (size_class < 80)
    n = uniform_below(g, 41);
  else if (size_class < 97)
    n = 41 + uniform_below(g, 1000);
  else
    n = 1000 + uniform_below(g, 9001);
  n = std::min(n, max_n);
  const std::uint64_t bin_class = uniform_below(g, 10);
  if (bin_class < 2)
    in.bins = 1 + static_cast<rank_t>(uniform_below(g, 3));
  else if (bin_class < 8)
    in.bins = 1 + static_cast<rank_t>(uniform_below(g, std::max<std::size_t>(n / 4, 1) + 1));
  else
    in.bins = 1 + static_cast<rank_t>(uniform_below(g, n + 8));  // often more bins than items
  const std::uint64_t shape = uniform_below(g, 5);
  in.weights.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    switch (shape) {
      case 0:
        in.weights[i] = static_cast<length_t>(uniform_below(g, 21));
        break;
      case 1:
        in.weights[i] = static_cast<length_t>(std::min(200000.0, lognormal(g, 1400, 0.9)));
        break;
      case 2:
        in.weights[i] = uniform_below(g, 3) == 0 ? 0 : static_cast<length_t>(1 + uniform_below(g, 5000));
        break;
      case 3:
        in.weights[i] = 777;
        break;
      default:
        in.weights[i] = static_cast<length_t>(1 + uniform_below(g, 100));
        break;
    }
  }
  if (shape == 4 && n > 0) in.weights[uniform_below(g, n)] = 1000000;  // one huge item
  static const char* names[] = {"ties", "lognormal", "zeros", "equal", "huge"};
  in.shape = names[shape];
  return in;
}

/// Group ids for `n` items: runs of 1–4 items share an id, ids shuffled in value.
inline std::vector<std::uint64_t> random_groups(std::size_t n, std::uint64_t seed) {
  rng_engine g = make_rng(seed, 0x9a0b5);
  std::vector<std::uint64_t> groups(n);
  std::uint64_t next = 0;
  for (std::size_t i = 0; i < n;) {
    const std::size_t run = 1 + uniform_below(g, 4);
    const std::uint64_t id = (next++ * 2654435761u) % 1000003u;
    for (std::size_t k = 0; k < run && i < n; ++k) groups[i++] = id;
  }
  // Interleave some members: swap a few ids so groups are not contiguous.
  for (std::size_t k = 0; k + 1 < n && k < n / 3; ++k)
    std::swap(groups[uniform_below(g, n)], groups[uniform_below(g, n)]);
  return groups;
}

/// The cost of one item alone.
template <batch_cost C>
double solo(const C& c, length_t w) {
  return c.value(c.add(c.empty(), w));
}

/// Loads folded independently of the library: bins from `where`, in slot order.
template <batch_cost C>
std::vector<double> reference_loads(const assignment& a, std::span<const length_t> w, const C& cost) {
  std::vector<std::vector<std::pair<std::uint32_t, length_t>>> slots(a.bins);
  for (std::size_t i = 0; i < a.where.size(); ++i) slots[a.where[i].rank].emplace_back(a.where[i].slot, w[i]);
  std::vector<double> loads(a.bins);
  for (rank_t b = 0; b < a.bins; ++b) {
    std::sort(slots[b].begin(), slots[b].end());
    typename C::state s = cost.empty();
    for (const auto& [slot, len] : slots[b]) s = cost.add(s, len);
    loads[b] = cost.value(s);
  }
  return loads;
}

inline double max_of(const std::vector<double>& v) { return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()); }

/// Checks that `a` honours `limits` for `n` items (counts, capacity on `loads`, groups).
inline void check_constraints(const assignment& a, const balance::constraints& limits,
                              const std::vector<double>& loads) {
  const std::vector<std::uint32_t> sizes = a.to_partition().bin_sizes();
  const std::size_t n = a.size();
  if (limits.counts.kind == balance::count_cap::mode::equal) {
    const std::uint32_t lo = static_cast<std::uint32_t>(n / a.bins);
    const std::uint32_t hi = static_cast<std::uint32_t>((n + a.bins - 1) / a.bins);
    for (const std::uint32_t s : sizes) {
      INFO("bin size " << s << " not in [" << lo << ", " << hi << "]");
      CHECK((s >= lo && s <= hi));
    }
  }
  if (limits.counts.kind == balance::count_cap::mode::fixed)
    for (const std::uint32_t s : sizes) CHECK(s <= limits.counts.cap);
  if (limits.capacity)
    for (const double l : loads) CHECK(l <= *limits.capacity);
  if (!limits.groups.empty()) {
    std::map<std::uint64_t, rank_t> bin_of_group;
    for (std::size_t i = 0; i < n; ++i) {
      const auto [it, fresh] = bin_of_group.emplace(limits.groups[i], a.where[i].rank);
      INFO("item " << i << " of group " << limits.groups[i]);
      CHECK(it->second == a.where[i].rank);
    }
  }
}

/// A partitioner as the kit drives it: spec plus what it supports.
struct algorithm_under_test {
  std::string spec;
  std::vector<std::string> costs;  // cost specs it accepts
  bool count_equal = true, count_fixed = true, capacity = true, groups = true, groups_with_fixed = true;
  bool needs_origin = false;  // migrate: starts from a current placement
};

inline std::vector<algorithm_under_test> all_algorithms() {
  const std::vector<std::string> every{"tokens",
                                       "attention:alpha=1,beta=0.001",
                                       "padded",
                                       "padded-attention:alpha=1,beta=0.0001",
                                       "conv:lambda=0.001",
                                       "fitted:x=0.001,y=1,z=7"};
  const std::vector<std::string> additive{"tokens", "attention:alpha=1,beta=0.001", "fitted:x=0.001,y=1,z=7",
                                          "fitted:x=0,y=3,z=11"};
  return {
      {"lpt", every},
      {"greedy-ascending", every},
      {"tolerance:v=0", every},
      {"tolerance:v=150", every},
      {"padded", {"padded", "padded-attention:alpha=1,beta=0.0001"}, false, true, true, false, false},
      {"conv", {"conv:lambda=0.001", "conv:lambda=0"}, false, true, false, false, false},
      {"kk", additive, true, false, false, true, false},
      {"lpt+refine", every},
      {"kk+refine", additive, true, false, false, true, false},
      {"padded+refine", {"padded"}, false, true, true, false, false},
      {"migrate:eps=0.001", every, false, false, true, true, false, true},
      {"migrate:eps=0.05+refine", additive, false, false, true, true, false, true},
  };
}

/// Runs `spec` through `solve` and checks what in-process determinism can check: the result
/// does not depend on state left by an earlier call on a different problem (a rerun after
/// solving another instance), nor on where the inputs live (a copy at another address framed
/// by huge sentinel weights, which a read past the span would pick up). Determinism across
/// processes is checked by tests/orchestrate/golden_fingerprints_test.cpp.
inline assignment solve_checked(const spec::algorithm_spec& spec, const spec::any_cost& c,
                                const std::vector<length_t>& weights, rank_t bins, const balance::constraints& limits,
                                std::span<const rank_t> origin = {}) {
  balance::problem p{weights, bins, limits};
  p.origin = origin;
  const assignment a = spec::solve(spec, c, p);
  {  // another problem in between: reversed, heavier weights on one more bin, no constraints
    std::vector<length_t> other(weights.rbegin(), weights.rend());
    for (length_t& x : other) x = x / 2 + 7;
    balance::problem o{other, bins + 1};
    std::vector<rank_t> other_origin(other.size());
    for (std::size_t i = 0; i < other.size(); ++i) other_origin[i] = static_cast<rank_t>(i % (bins + 1));
    o.origin = other_origin;
    try {
      (void)spec::solve(spec, c, o);
    } catch (const invalid_input&) {  // e.g. a cost the algorithm rejects: state must still not leak
    }
  }
  const assignment again = spec::solve(spec, c, p);
  CHECK(a == again);
  std::vector<length_t> framed(weights.size() + 2, std::numeric_limits<length_t>::max());
  // An index loop: std::copy here trips g++ 12's -Wstringop-overflow false positive at -O3.
  for (std::size_t i = 0; i < weights.size(); ++i) framed[i + 1] = weights[i];
  const std::span<const length_t> copy = std::span<const length_t>(framed).subspan(1, weights.size());
  std::vector<std::uint64_t> groups_copy(limits.groups.begin(), limits.groups.end());
  const std::vector<rank_t> origin_copy(origin.begin(), origin.end());
  balance::constraints limits_copy = limits;
  limits_copy.groups = groups_copy;
  balance::problem q{copy, bins, limits_copy};
  q.origin = origin_copy;
  const assignment b = spec::solve(spec, c, q);
  CHECK(a == b);
  return a;
}

/// A current placement for `migrate`: ranks drawn from the seed, one rank per group.
inline std::vector<rank_t> random_origin(std::size_t n, rank_t bins, std::uint64_t seed,
                                         std::span<const std::uint64_t> groups = {}) {
  rng_engine g = make_rng(seed, 0x0919);
  std::vector<rank_t> origin(n);
  for (std::size_t i = 0; i < n; ++i)
    origin[i] = groups.empty() ? static_cast<rank_t>(uniform_below(g, bins)) : static_cast<rank_t>(groups[i] % bins);
  return origin;
}

/// All invariants of one run; returns the max load.
inline double check_run(const assignment& a, const std::vector<length_t>& weights, rank_t bins, const spec::any_cost& c,
                        const balance::constraints& limits) {
  REQUIRE(a.size() == weights.size());
  REQUIRE(a.bins == bins);
  REQUIRE_NOTHROW(a.validate());
  return std::visit(
      [&](const auto& cost) {
        const std::vector<double> lib = bin_loads(a, weights, cost);
        const std::vector<double> ref = reference_loads(a, weights, cost);
        CHECK(lib == ref);
        // Loads through the partition (ascending id) agree up to rounding for additive
        // costs and exactly for the others (their state does not depend on the order).
        check_constraints(a, limits, ref);
        return max_of(ref);
      },
      c);
}

/// Reference greedy (LPT / greedy ascending), O(n·d): items ordered by (weight, id) as
/// `descending` says, each to argmin over eligible bins of (load, bin), where the load is
/// Σ item costs for an additive cost and value(state) otherwise. Count caps as in
/// docs/DESIGN.md §5.1 (equal ±1, fixed cap). No groups, no capacity.
template <batch_cost C>
assignment reference_greedy(const std::vector<length_t>& w, rank_t bins, const C& cost, bool descending,
                            const balance::count_cap& counts = {}) {
  const std::size_t n = w.size();
  std::vector<item_id> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](item_id a, item_id b) { return descending ? w[a] > w[b] : w[a] < w[b]; });
  std::vector<typename C::state> st(bins, cost.empty());
  std::vector<double> additive(bins, 0.0);
  std::vector<std::uint32_t> count(bins, 0);
  const std::uint32_t floor =
      counts.kind == balance::count_cap::mode::equal ? static_cast<std::uint32_t>(n / bins) : counts.cap;
  std::uint32_t big_left = counts.kind == balance::count_cap::mode::equal ? static_cast<std::uint32_t>(n % bins) : 0;
  assignment a{bins, std::vector<location>(n)};
  for (const item_id i : order) {
    rank_t best = bins;
    double best_load = 0;
    for (rank_t b = 0; b < bins; ++b) {
      if (counts.kind != balance::count_cap::mode::none) {
        const bool ok =
            count[b] < floor || (counts.kind == balance::count_cap::mode::equal && count[b] == floor && big_left > 0);
        if (!ok) continue;
      }
      double load = 0;
      if constexpr (additive_cost<C>)
        load = additive[b];
      else
        load = cost.value(st[b]);
      if (best == bins || load < best_load) {
        best = b;
        best_load = load;
      }
    }
    REQUIRE(best < bins);
    if (counts.kind == balance::count_cap::mode::equal && count[best] == floor) --big_left;
    a.where[i] = location{best, count[best]++};
    st[best] = cost.add(st[best], w[i]);
    if constexpr (additive_cost<C>) additive[best] += cost.item(w[i]);
  }
  return a;
}

/// Reference tolerance rule (docs/DESIGN.md §5.1), O(n·d): among bins with Σl ≤ min Σl + v take
/// the least Σl², then least Σl, then least bin index. No constraints.
inline assignment reference_tolerance(const std::vector<length_t>& w, rank_t bins, double v) {
  const std::size_t n = w.size();
  std::vector<item_id> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](item_id a, item_id b) { return w[a] > w[b]; });
  std::vector<std::uint64_t> sum(bins, 0);
  std::vector<double> sq(bins, 0);
  std::vector<std::uint32_t> count(bins, 0);
  assignment a{bins, std::vector<location>(n)};
  for (const item_id i : order) {
    const std::uint64_t lo = *std::min_element(sum.begin(), sum.end());
    rank_t best = bins;
    for (rank_t b = 0; b < bins; ++b) {
      if (static_cast<double>(sum[b] - lo) > v) continue;
      if (best == bins || sq[b] < sq[best] || (sq[b] == sq[best] && sum[b] < sum[best])) best = b;
    }
    a.where[i] = location{best, count[best]++};
    sum[best] += w[i];
    sq[best] += static_cast<double>(w[i]) * static_cast<double>(w[i]);
  }
  return a;
}

/// Brute-force optimum of the max bin cost over all d^n assignments (depth-first with
/// pruning and first-empty-bin symmetry breaking). For n ≤ 10, d ≤ 4. Equal counts when
/// `equal` is set.
template <batch_cost C>
double brute_force_optimum(const std::vector<length_t>& w, rank_t bins, const C& cost, bool equal = false) {
  const std::size_t n = w.size();
  std::vector<typename C::state> st(bins, cost.empty());
  std::vector<std::uint32_t> count(bins, 0);
  const std::size_t hi = (n + bins - 1) / bins, lo = n / bins;
  double best = std::numeric_limits<double>::infinity();
  std::function<void(std::size_t, double)> go = [&](std::size_t i, double current) {
    if (current >= best) return;
    if (i == n) {
      if (equal)
        for (rank_t b = 0; b < bins; ++b)
          if (count[b] < lo || count[b] > hi) return;
      best = current;
      return;
    }
    bool tried_empty = false;
    for (rank_t b = 0; b < bins; ++b) {
      if (count[b] == 0) {
        if (tried_empty) continue;  // empty bins are interchangeable
        tried_empty = true;
      }
      if (equal && count[b] >= hi) continue;
      const typename C::state saved = st[b];
      st[b] = cost.add(st[b], w[i]);
      ++count[b];
      go(i + 1, std::max(current, cost.value(st[b])));
      --count[b];
      st[b] = saved;
    }
  };
  go(0, 0.0);
  return n == 0 ? 0.0 : best;
}

/// Brute force of the best grouping of the ascending (weight, id) order into ≤ d contiguous
/// runs: min over all cut sets of the max run cost.
template <padded_cost C>
double best_contiguous(const std::vector<length_t>& w, rank_t bins, const C& cost) {
  std::vector<length_t> s = w;
  std::sort(s.begin(), s.end());
  const std::size_t n = s.size();
  if (n == 0) return 0.0;
  double best = std::numeric_limits<double>::infinity();
  for (std::uint64_t cuts = 0; cuts < (std::uint64_t{1} << (n - 1)); ++cuts) {
    if (static_cast<std::size_t>(std::popcount(cuts)) + 1 > bins) continue;
    double worst = 0;
    std::uint64_t size = 0;
    for (std::size_t i = 0; i < n; ++i) {
      ++size;
      const bool end = i + 1 == n || ((cuts >> i) & 1u);
      if (end) {
        worst = std::max(worst, cost.padded_value(size, s[i]));
        size = 0;
      }
    }
    best = std::min(best, worst);
  }
  return best;
}

}  // namespace mmbal::test
