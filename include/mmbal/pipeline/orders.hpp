#pragma once
/// @file
/// Micro-batch orders for a pipeline (docs/DESIGN.md §5.7): the identity, verl's fixed order,
/// DistTrain's inter-microbatch reordering (Alg. 3) and a simulator-driven local search that is
/// never worse than any of them.
/// @see DistTrain §6.2, Alg. 3; verl `rearrange_micro_batches` (utils/seqlen_balancing.py).

#include <mmbal/core/error.hpp>
#include <mmbal/core/rng.hpp>
#include <mmbal/pipeline/schedule.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mmbal::pipeline {

/// verl's order (`rearrange_micro_batches` with dynamic batch-size balancing): micro-batches
/// sorted by workload, largest first (ties: larger index first, as verl's reverse sort on
/// (workload, index)), then the even positions reversed followed by the odd positions — small
/// micro-batches at both ends, the largest in the middle. Workload = the micro-batch's total
/// time over all stages, Σ_s (F_sj + B_sj). O(p·m + m log m).
[[nodiscard]] inline std::vector<std::uint32_t> verl_order(const stage_times& t) {
  validate(t);
  const std::uint32_t m = t.micro_batches;
  std::vector<double> w(m);
  for (std::uint32_t j = 0; j < m; ++j) w[j] = t.work(j);
  std::vector<std::uint32_t> sorted = identity_order(m);
  std::sort(sorted.begin(), sorted.end(),
            [&](std::uint32_t a, std::uint32_t b) { return w[a] != w[b] ? w[a] > w[b] : a > b; });
  std::vector<std::uint32_t> out;
  out.reserve(m);
  for (std::uint32_t k = (m - 1) / 2 * 2 + 2; k >= 2; k -= 2) out.push_back(sorted[k - 2]);  // even, reversed
  for (std::uint32_t k = 1; k < m; k += 2) out.push_back(sorted[k]);
  return out;
}

namespace detail {

// Stage times addressed by position: the micro-batch at position k of a partial order, zero
// for positions not yet decided (used by DistTrain's GETINTERVAL).
struct positioned_times {
  std::uint32_t stages = 0, micro_batches = 0;
  const stage_times* t = nullptr;
  const std::vector<std::uint32_t>* at = nullptr;  // id at a position, or UINT32_MAX
  [[nodiscard]] double forward_time(std::uint32_t s, std::uint32_t k) const {
    return (*at)[k] == UINT32_MAX ? 0.0 : t->forward_time(s, (*at)[k]);
  }
  [[nodiscard]] double backward_time(std::uint32_t s, std::uint32_t k) const {
    return (*at)[k] == UINT32_MAX ? 0.0 : t->backward_time(s, (*at)[k]);
  }
};

}  // namespace detail

/// DistTrain's inter-microbatch reordering (INTERREORDER, Alg. 3) for 1F1B. A micro-batch's
/// size is its forward time on the first stage.
/// 1. The smallest micro-batch goes first (activates every stage soon).
/// 2. The p−1 smallest of the rest go last, in ascending size (they fill the unfilled
///    cool-down intervals).
/// 3. While micro-batches are pending (the paper's `for i = 1..l−p` would ask for more than
///    remain at its first step and cannot take p−1 when l < 2p−1): GETINTERVAL measures the
///    i-th interval of the first stage with the 1F1B recurrence on the order decided so far
///    (undecided positions take zero time): interval 1 is the idle time on stage 0 between
///    the first forward's end and the first backward's start, filled by forwards 2..p;
///    interval i > 1 the idle time between the (i−1)-th and the i-th backward, filled by
///    forward i+p−1. Step 1 takes min(p−1, pending) micro-batches whose forward sizes sum
///    close to the interval, step i > 1 the single one whose size is closest.
/// SELECTCLOSEST for k micro-batches is greedy (the paper says O(l)): k times, the pending
/// micro-batch closest to (remaining volume / remaining count); ties by smaller size, then id.
/// - Complexity: O(p·m²) (one recurrence per step; the paper updates it in O(p)).
/// - Errors: as `validate`; hop < 0; p·m² above `max_quadratic_work`.
/// @see DistTrain §6.2, Alg. 3, Figure 12.
[[nodiscard]] inline std::vector<std::uint32_t> disttrain_order(const stage_times& t, double hop = 0.0) {
  validate(t);
  detail::check_hop(hop);
  detail::check_quadratic_work(t, "pipeline disttrain_order");
  const std::uint32_t p = t.stages, m = t.micro_batches;
  constexpr std::uint32_t none = UINT32_MAX;
  auto size = [&](std::uint32_t j) { return t.forward_time(0, j); };
  auto smaller = [&](std::uint32_t a, std::uint32_t b) { return size(a) != size(b) ? size(a) < size(b) : a < b; };
  std::vector<std::uint32_t> pending = identity_order(m);  // kept sorted by (size, id)
  std::sort(pending.begin(), pending.end(), smaller);
  std::vector<std::uint32_t> at(m, none);
  at[0] = pending.front();
  pending.erase(pending.begin());
  const std::uint32_t rear = std::min<std::uint32_t>(p - 1, static_cast<std::uint32_t>(pending.size()));
  for (std::uint32_t k = 0; k < rear; ++k) at[m - rear + k] = pending[k];
  pending.erase(pending.begin(), pending.begin() + rear);
  std::uint32_t next = 1;  // next position to fill
  simulation_workspace ws;
  std::vector<operation> ops;
  const std::vector<std::uint32_t> positions = identity_order(m);
  for (std::uint32_t step = 1; !pending.empty(); ++step) {
    const detail::positioned_times view{p, m, &t, &at};
    simulate_unchecked(view, positions, schedule{}, hop, ws, &ops, std::numeric_limits<double>::infinity());
    // Stage 0's operations in run order; the interval ends at the backward of position step−1
    // and starts at the end of the last decided operation before it.
    const std::uint32_t target = step - 1;
    double end_before = 0, interval = 0;
    for (const operation& o : ops) {
      if (o.stage != 0) continue;
      if (o.backward && o.position == target) {
        interval = std::max(0.0, o.start - end_before);
        break;
      }
      if (at[o.position] != none) end_before = o.end;
    }
    const std::uint32_t take =
        std::min<std::uint32_t>(step == 1 ? p - 1 : 1, static_cast<std::uint32_t>(pending.size()));
    double volume = interval;
    for (std::uint32_t c = 0; c < take; ++c) {
      const double want = volume / (take - c);
      std::size_t best = 0;
      for (std::size_t k = 1; k < pending.size(); ++k) {
        const double dk = std::abs(size(pending[k]) - want), db = std::abs(size(pending[best]) - want);
        if (dk < db) best = k;  // pending is sorted, so ties keep the smaller (size, id)
      }
      at[next++] = pending[best];
      volume -= size(pending[best]);
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(best));
    }
  }
  return at;
}

/// Options of `search_order`.
struct search_options {
  /// Simulations allowed (the search is deterministic: a budget of simulations, not of
  /// time). 0 (default): as many as 3·2^21 simulated operations allow, at least 256 while
  /// those cost at most 3·2^24 operations — 6,144 at p = 8, m = 64 (≈ 32 ms on one core; a
  /// candidate re-simulates only from the first position it changes), more for smaller
  /// pipelines. A value set here is the caller's: time grows with it.
  std::uint64_t max_evaluations = 0;
  std::uint64_t seed = 0;  ///< seeds the perturbations of the iterated local search
};

/// The result of `search_order`.
struct search_result {
  std::vector<std::uint32_t> order;
  double makespan = 0;
  std::uint64_t evaluations = 0;
};

/// A deterministic simulator-driven search for the order with the smallest makespan:
/// 0. when all m! orders fit the budget (m ≤ 8 at the default budget for p ≤ 8), simulate
///    every order in lexicographic order and return the best (exact; ties keep the best
///    start, then the lexicographically first order); otherwise
/// 1. start from the best of `starts` (ties: the first);
/// 2. first-improvement local search (each candidate re-simulated from the first position it
///    changes, `simulate_suffix`) over moves "take the micro-batch at position i and
///    insert it at position k" (k ≠ i; covers adjacent swaps) and "swap positions i and k",
///    accepting a move only when the makespan drops by more than 1e−12 relative;
/// 3. when no move improves, perturb the best order found with two random swaps (seeded) and
///    search again, until `max_evaluations` simulations have run.
/// - Guarantee: the result is never worse than any order in `starts` (it starts at their best
///   and only keeps improvements); optimal when all orders fit the budget.
/// - Complexity: O(max_evaluations · p·m·v) time (default: O(3·2^24) at most), O(p·m·v) memory.
/// - Errors: as `simulate`; `starts` empty or with an invalid order.
[[nodiscard]] inline search_result search_order(const stage_times& t,
                                                std::span<const std::vector<std::uint32_t>> starts,
                                                const schedule& sched = {}, double hop = 0.0,
                                                const search_options& options = {}) {
  validate(t);
  detail::check_hop(hop);
  if (starts.empty()) mmbal::detail::throw_invalid("search_order: no start order");
  const std::uint32_t m = t.micro_batches;
  simulation_workspace ws;
  search_result r;
  std::vector<char> seen;
  for (const auto& o : starts) {
    detail::check_order(o, m, seen);
    const double ms = simulate(t, o, sched, hop, ws);
    ++r.evaluations;
    if (r.order.empty() || ms < r.makespan) r.order = o, r.makespan = ms;
  }
  if (m < 2) return r;
  rng_engine g = make_rng(options.seed, 11);
  std::vector<std::uint32_t> cur = r.order, cand;
  double cur_ms = r.makespan;
  const std::uint64_t ops_per_simulation =
      std::uint64_t{2} * t.stages * m * (sched.kind == schedule_kind::interleaved ? sched.chunks : 1);
  // Default: ~6 M simulated operations, but at least 256 simulations while they cost at most
  // ~50 M operations (a fixed floor would make a huge interleaved instance run for minutes).
  const std::uint64_t budget =
      options.max_evaluations > 0
          ? options.max_evaluations
          : std::max((std::uint64_t{3} << 21) / ops_per_simulation,
                     std::min<std::uint64_t>(256, (std::uint64_t{3} << 24) / ops_per_simulation));
  const auto budget_left = [&] { return r.evaluations < budget; };
  auto improves = [&](double ms, double ref) { return ms < ref - 1e-12 * std::max(1.0, std::abs(ref)); };
  // Small pipelines: when all m! orders fit the budget, try every one (exact, and far fewer
  // simulations than the local search would spend: m = 3 gets a budget of ~500,000).
  std::uint64_t orders = 1;
  for (std::uint64_t k = 2; k <= m && orders <= budget; ++k)
    orders = orders > budget / k ? std::numeric_limits<std::uint64_t>::max() : orders * k;
  if (orders <= budget) {
    std::vector<std::uint32_t> order(m);
    std::iota(order.begin(), order.end(), 0U);
    do {
      const double ms = simulate_unchecked(t, order, sched, hop, ws, nullptr, r.makespan);
      ++r.evaluations;
      if (improves(ms, r.makespan)) r.order = order, r.makespan = ms;
    } while (std::next_permutation(order.begin(), order.end()));
    return r;
  }
  // The current order is the workspace's base: a move re-simulates only from the first
  // position it changes, and gives up once worse than the current order.
  const auto restart = [&] {
    cur_ms = simulate_unchecked(t, cur, sched, hop, ws, nullptr, std::numeric_limits<double>::infinity());
    keep_as_base(ws);
  };
  restart();
  auto try_candidate = [&](std::uint32_t first_changed) -> bool {
    const double ms = simulate_suffix(t, cand, sched, hop, ws, first_changed, cur_ms);
    ++r.evaluations;
    if (!improves(ms, cur_ms)) return false;
    keep_as_base(ws);
    cur.swap(cand);
    cur_ms = ms;
    if (improves(cur_ms, r.makespan)) r.order = cur, r.makespan = cur_ms;
    return true;
  };
  while (budget_left()) {
    bool improved = true;
    while (improved && budget_left()) {
      improved = false;
      for (std::uint32_t i = 0; i < m && budget_left(); ++i)
        for (std::uint32_t k = 0; k < m && budget_left(); ++k) {
          if (k == i) continue;
          cand = cur;  // insertion: move position i to position k
          if (i < k)
            std::rotate(cand.begin() + i, cand.begin() + i + 1, cand.begin() + k + 1);
          else
            std::rotate(cand.begin() + k, cand.begin() + i, cand.begin() + i + 1);
          if (try_candidate(std::min(i, k))) improved = true;
        }
      for (std::uint32_t i = 0; i < m && budget_left(); ++i)
        for (std::uint32_t k = i + 2; k < m && budget_left(); ++k) {  // adjacent swaps are insertions
          cand = cur;
          std::swap(cand[i], cand[k]);
          if (try_candidate(i)) improved = true;
        }
    }
    if (!budget_left()) break;
    cur = r.order;  // perturb the best found
    for (int kick = 0; kick < 2; ++kick) {
      const auto a = static_cast<std::uint32_t>(uniform_below(g, m)),
                 b = static_cast<std::uint32_t>(uniform_below(g, m));
      std::swap(cur[a], cur[b]);
    }
    restart();
    ++r.evaluations;
  }
  return r;
}

/// The named orders.
enum class order_kind : std::uint8_t { identity, verl, disttrain, search };

/// Every named order, in the order reports list them (and break makespan ties).
inline constexpr std::array<order_kind, 4> all_order_kinds{order_kind::identity, order_kind::verl,
                                                           order_kind::disttrain, order_kind::search};

/// "identity" | "verl" | "disttrain" | "search".
[[nodiscard]] constexpr std::string_view to_string(order_kind k) noexcept {
  switch (k) {
    case order_kind::identity:
      return "identity";
    case order_kind::verl:
      return "verl";
    case order_kind::disttrain:
      return "disttrain";
    case order_kind::search:
      return "search";
  }
  return "?";
}

/// One computed order with its makespan.
struct order_report {
  order_kind kind = order_kind::identity;
  std::vector<std::uint32_t> order;
  double makespan = 0;
};

/// The orders of `kinds` (a search starts from identity, verl's and DistTrain's orders), each
/// with its simulated makespan under `sched` and `hop`. O(cost of the orders asked for).
[[nodiscard]] inline std::vector<order_report> compute_orders(const stage_times& t, std::span<const order_kind> kinds,
                                                              const schedule& sched = {}, double hop = 0.0,
                                                              const search_options& options = {}) {
  validate(t);
  detail::check_hop(hop);
  std::vector<order_report> out;
  simulation_workspace ws;
  for (const order_kind k : kinds) {
    order_report r{k, {}, 0};
    switch (k) {
      case order_kind::identity:
        r.order = identity_order(t.micro_batches);
        break;
      case order_kind::verl:
        r.order = verl_order(t);
        break;
      case order_kind::disttrain:
        r.order = disttrain_order(t, hop);
        break;
      case order_kind::search: {
        const std::vector<std::vector<std::uint32_t>> starts{identity_order(t.micro_batches), verl_order(t),
                                                             disttrain_order(t, hop)};
        r.order = search_order(t, starts, sched, hop, options).order;
        break;
      }
    }
    r.makespan = simulate(t, r.order, sched, hop, ws);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace mmbal::pipeline
