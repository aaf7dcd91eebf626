// A user's own partitioner and a user's own cost driving mmbal's orchestrator (docs/DESIGN.md
// §4, §5.5).
//
// `snake` deals items in descending weight order to ranks 0, 1, ..., d−1, d−1, ..., 0, 0, 1, ...
// (the "serpentine" draft): every rank gets the same number of items ±1 and a similar mix of
// long and short ones, in O(n log n), without looking at the cost. It models
// `balance::partitioner` for every cost (its call operator is a template over `batch_cost`).
// `step_time` is a user's cost: a batch costs Σ l plus a fixed per-sample overhead (a model of
// a data loader's per-sample work); it models `batch_cost`. An `orchestrate::phase_balancer`
// pairs them, typed, and the orchestrator runs the pair on every phase: the plans, composed
// encoder→LLM moves, relabeling and reports (loads under `step_time`) are the library's. The
// program compares it with lpt under the same cost and exits non-zero if a plan is invalid or
// a report is inconsistent.
#include <mmbal/balance/constraints.hpp>
#include <mmbal/balance/lpt.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/cost/batch_stats.hpp>
#include <mmbal/orchestrate/orchestrator.hpp>
#include <mmbal/orchestrate/policy.hpp>
#include <mmbal/workload/generators.hpp>
#include <mmbal/workload/length_data.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <span>
#include <string>
#include <vector>

namespace {

struct snake {
  template <mmbal::batch_cost C>
  mmbal::assignment operator()(std::span<const mmbal::length_t> weights, mmbal::rank_t bins, const C& /*cost*/,
                               const mmbal::balance::constraints& limits) const {
    // The contract: honour a constraint or reject it by name, never ignore it.
    if (limits.capacity || !limits.groups.empty())
      throw mmbal::invalid_input("snake: capacity and groups are not supported");
    // Dealing gives every bin ⌊n/d⌋ or ⌈n/d⌉ items: an equal count cap holds, and so does any
    // fixed cap that is feasible at all (cap · d ≥ n).
    if (limits.counts.kind == mmbal::balance::count_cap::mode::fixed &&
        std::uint64_t{limits.counts.cap} * bins < weights.size())
      throw mmbal::invalid_input("snake: count cap " + std::to_string(limits.counts.cap) + " x " +
                                 std::to_string(bins) + " bins < " + std::to_string(weights.size()) + " items");
    std::vector<mmbal::item_id> order(weights.size());
    std::iota(order.begin(), order.end(), mmbal::item_id{0});
    // Descending weight, ties by id: deterministic on every rank.
    std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return weights[a] > weights[b]; });
    mmbal::partition p{bins, std::vector<mmbal::rank_t>(weights.size())};
    for (std::size_t k = 0; k < order.size(); ++k) {
      const std::size_t round = k / bins, offset = k % bins;
      p.bin_of[order[k]] = static_cast<mmbal::rank_t>(round % 2 == 0 ? offset : bins - 1 - offset);
    }
    return mmbal::assignment::from_placement(p, order);  // slots in dealing order
  }
};

// A user's cost: Σ l + overhead per sample. `name()` is what reports and fingerprints show.
struct step_time {
  double overhead = 64;
  using state = mmbal::batch_stats;
  [[nodiscard]] state empty() const { return {}; }
  [[nodiscard]] state add(const state& s, mmbal::length_t l) const { return s.plus(l); }
  [[nodiscard]] double value(const state& s) const {
    return static_cast<double>(s.sum) + overhead * static_cast<double>(s.count);
  }
  [[nodiscard]] std::string name() const { return "step-time:overhead=" + std::to_string(overhead); }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) {  // no options
    const bool help = std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0;
    std::fprintf(help ? stdout : stderr,
                 "%susage: custom_partitioner (no options): a user's partitioner and cost through mmbal's "
                 "orchestrator,\ncompared with lpt (see the comment at the top of "
                 "examples/custom_partitioner/main.cpp)\n",
                 help ? "" : "custom_partitioner: takes no arguments\n");
    return help ? 0 : 2;
  }
  namespace orch = mmbal::orchestrate;
  mmbal::generator_options g;
  g.samples = 64 * 40;
  g.ranks = 64;
  g.seed = 1;
  const mmbal::workload w = mmbal::generate(mmbal::family::omni, g, mmbal::default_length_data());

  orch::orchestrator_options options;
  options.ranks = 64;
  options.ranks_per_node = 8;
  orch::orchestrator defaults(options);
  orch::orchestrator custom(options);
  for (const std::string& phase : orch::orchestrator::phase_names(w)) {
    defaults.set_policy(phase, {orch::phase_balancer(mmbal::balance::lpt{}, step_time{})});
    // snake has no `name`: the policy gives it one.
    custom.set_policy(phase, {orch::phase_balancer(snake{}, step_time{}, {false, "snake", {}})});
  }

  const orch::orchestration a = defaults.plan(w), b = custom.plan(w);
  int failures = 0;
  std::printf("%-6s %-12s %10s %14s %14s\n", "phase", "algorithm", "items", "max/bound", "moved bytes");
  for (const orch::orchestration* o : {&a, &b})
    for (const orch::phase_plan& p : o->phases) {
      const orch::phase_report& r = p.report;
      std::printf("%-6s %-12s %10llu %14.4f %14llu\n", r.name.c_str(), r.algorithm.c_str(),
                  static_cast<unsigned long long>(r.items), r.lower_bound > 0 ? r.max_after / r.lower_bound : 1.0,
                  static_cast<unsigned long long>(r.moved_bytes));
      try {
        p.forward.validate();
      } catch (const mmbal::invalid_input& e) {
        std::printf("FAIL: %s: %s\n", r.name.c_str(), e.what());
        ++failures;
      }
      if (r.max_after < r.lower_bound * (1 - 1e-9)) {
        std::printf("FAIL: %s: max %.3f below the lower bound %.3f\n", r.name.c_str(), r.max_after, r.lower_bound);
        ++failures;
      }
    }
  if (b.llm().report.algorithm != "snake") {
    std::printf("FAIL: the llm phase did not run the user's partitioner\n");
    ++failures;
  }
  std::printf("plan fingerprints: defaults %016llx, snake %016llx\n", static_cast<unsigned long long>(a.fingerprint),
              static_cast<unsigned long long>(b.fingerprint));
  return failures == 0 ? 0 : 1;
}
