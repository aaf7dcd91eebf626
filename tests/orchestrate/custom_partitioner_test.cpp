// Open policies at the top layer (docs/DESIGN.md §4, §5.5): an archetype that models exactly
// `balance::partitioner` (a call operator templated over `batch_cost`, nothing else) and a
// user's own cost type plug into the orchestrator through `phase_balancer`; the library's
// typed default policies give bit-identical plans to the spec-string path (`mmbal::spec`);
// `migrate_partitioner` runs with origins and bytes; a partitioner that breaks its contract
// is caught at the boundary with the phase named.
#include "support.hpp"

#include <mmbal/balance/lpt.hpp>
#include <mmbal/balance/migrate.hpp>
#include <mmbal/balance/padded_binary_search.hpp>
#include <mmbal/orchestrate/policy.hpp>
#include <mmbal/spec/policy.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <span>
#include <string>
#include <variant>
#include <vector>

namespace {

using mmbal::assignment;
using mmbal::length_t;
using mmbal::rank_t;
namespace orch = mmbal::orchestrate;

// Exactly the partitioner concept: item i goes to bin i mod bins, slots in id order. Rejects
// every constraint (it honours none), as the concept's contract asks. No name: the policy gives one.
struct round_robin_archetype {
  template <mmbal::batch_cost C>
  assignment operator()(std::span<const length_t> weights, rank_t bins, const C& /*cost*/,
                        const mmbal::balance::constraints& limits) const {
    if (limits.any()) mmbal::detail::throw_invalid("round-robin: constraints are not supported");
    mmbal::partition p{bins, std::vector<rank_t>(weights.size())};
    for (std::size_t i = 0; i < weights.size(); ++i) p.bin_of[i] = static_cast<rank_t>(i % bins);
    return assignment::from_partition(p);
  }
};

// A user's cost, not a library type: every item costs its length plus a fixed per-item
// overhead, and a batch pays the square of its longest item once (a made-up kernel launch).
// Exactly `batch_cost` plus a name.
struct overhead_cost {
  double overhead = 0;
  struct state {
    double sum = 0;
    length_t longest = 0;
    friend bool operator==(const state&, const state&) = default;
  };
  [[nodiscard]] state empty() const { return {}; }
  [[nodiscard]] state add(const state& s, length_t l) const {
    return {s.sum + static_cast<double>(l) + overhead, std::max(s.longest, l)};
  }
  [[nodiscard]] double value(const state& s) const {
    return s.sum + static_cast<double>(s.longest) * static_cast<double>(s.longest) * 1e-4;
  }
  [[nodiscard]] std::string name() const { return "overhead:" + std::to_string(overhead); }
};

static_assert(mmbal::balance::partitioner<round_robin_archetype, mmbal::cost::tokens>);
static_assert(mmbal::batch_cost<overhead_cost>);
static_assert(orch::phase_partitioner<round_robin_archetype, overhead_cost>);
static_assert(orch::phase_partitioner<mmbal::balance::lpt, overhead_cost>);
static_assert(orch::phase_partitioner<mmbal::balance::migrate_partitioner, overhead_cost>);
static_assert(!orch::phase_partitioner<mmbal::balance::padded_binary_search, overhead_cost>);

// Breaks the contract: one bin too many.
struct too_many_bins {
  static constexpr const char* name = "broken";
  template <mmbal::batch_cost C>
  assignment operator()(std::span<const length_t> weights, rank_t bins, const C&,
                        const mmbal::balance::constraints&) const {
    mmbal::partition p{bins + 1, std::vector<rank_t>(weights.size(), bins)};
    return assignment::from_partition(p);
  }
};

// Per-rank cost of the items on each rank under `cost`, folded in item-id order.
template <class C>
std::vector<double> loads_of(const std::vector<length_t>& w, const std::vector<rank_t>& rank_of, rank_t d,
                             const C& cost) {
  std::vector<std::vector<length_t>> per(d);
  for (std::size_t i = 0; i < w.size(); ++i) per[rank_of[i]].push_back(w[i]);
  std::vector<double> out(d);
  for (rank_t r = 0; r < d; ++r) out[r] = mmbal::batch_value(cost, per[r]);
  return out;
}

}  // namespace

TEST_CASE("phase_balancer runs the typed pair and names it", "[orchestrate][partitioner]") {
  const std::vector<length_t> w{900, 5, 300, 300, 41, 7000, 12, 640};
  const overhead_cost cost{7.0};
  const orch::phase_balancer erased(mmbal::balance::lpt{}, cost);
  const assignment direct = mmbal::balance::lpt{}(w, 3, cost, {});
  CHECK(erased.balance(mmbal::balance::problem{w, 3}) == direct);
  CHECK(erased.name() == "lpt");
  CHECK(erased.cost_name() == cost.name());
  // The report's loads: those of the typed cost, folded in item order.
  const std::vector<rank_t> before(w.size(), 0);
  std::vector<rank_t> after(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) after[i] = direct.where[i].rank;
  const orch::phase_loads loads = erased.measure(w, before, after, 3, false);
  CHECK(loads.before == loads_of(w, before, 3, cost));
  CHECK(loads.after == loads_of(w, after, 3, cost));
  CHECK(loads.lower_bound == mmbal::lower_bound(std::span<const length_t>(w), 3, cost));
  // `+refine` runs refine after the partitioner and says so in the name.
  const orch::phase_balancer refined(mmbal::balance::lpt{}, cost, {true, {}, {}});
  CHECK(refined.name() == "lpt+refine");
  CHECK(refined.balance(mmbal::balance::problem{w, 3}) == mmbal::balance::refine(w, direct, cost, {}));
  // A partitioner without a name needs one in the options.
  CHECK_THROWS_WITH(orch::phase_balancer(round_robin_archetype{}, cost), Catch::Contains("no name"));
  CHECK(orch::phase_balancer(round_robin_archetype{}, cost, {false, "round-robin", {}}).name() == "round-robin");
}

TEST_CASE("a user's partitioner and a user's cost drive the orchestrator on every phase",
          "[orchestrate][partitioner]") {
  const mmbal::workload w = orchestrate_test::omni(600, 16, 3);
  orch::orchestrator o = orchestrate_test::make(16, 4);
  const std::vector<std::string> phases = orch::orchestrator::phase_names(w);
  REQUIRE(phases.size() >= 3);
  const overhead_cost cost{3.0};
  for (const std::string& phase : phases)
    o.set_policy(phase, {orch::phase_balancer(round_robin_archetype{}, cost, {false, "round-robin", {}})});
  const orch::orchestration plan = o.plan(w);
  for (const orch::phase_plan& p : plan.phases) {
    INFO("phase " << p.name);
    CHECK(p.report.algorithm == "round-robin");
    CHECK(p.report.cost == cost.name());
    // Independent re-computation of what the archetype must have produced.
    for (std::size_t i = 0; i < p.items.size(); ++i)
      REQUIRE(p.balanced.where[i] == mmbal::location{static_cast<rank_t>(i % 16), static_cast<std::uint32_t>(i / 16)});
    REQUIRE_NOTHROW(p.forward.validate());
    // The report's loads are the user's cost of the final layout.
    std::vector<rank_t> final_rank(p.items.size());
    for (std::size_t i = 0; i < final_rank.size(); ++i) final_rank[i] = p.forward.destination[i].rank;
    CHECK(p.report.loads_after == loads_of(p.items.weights, final_rank, 16, cost));
    CHECK(p.report.loads_before == loads_of(p.items.weights, p.items.origin, 16, cost));
  }
  CHECK(plan.composed.size() == plan.phases.size() - 1);
  CHECK(orch::orchestrator::plan_fingerprint(plan) == plan.fingerprint);
}

TEST_CASE("default_balancer and spec::default_algorithm name one choice for every built-in cost",
          "[orchestrate][partitioner]") {
  // The best-quality default (docs/DESIGN.md §5.1): padded for a padded cost, lpt+refine for
  // any other; typed (orchestrator, simulate) and by spec (tool, Python) it must be the same.
  for (const char* cost :
       {"tokens", "padded", "attention:alpha=1,beta=0.001", "padded-attention:alpha=1,beta=0.001", "conv:lambda=0.5",
        "fitted:x=1e-06,y=1,z=3", "flops:hidden=64,ffn=256,heads=4,kv_heads=4,layers=2"}) {
    INFO("cost " << cost);
    const mmbal::spec::any_cost c = mmbal::spec::parse_cost(cost);
    const std::string typed_name = std::visit([](const auto& cc) { return orch::default_balancer(cc).name(); }, c);
    CHECK(mmbal::spec::to_spec(mmbal::spec::default_algorithm(c)) == typed_name);
    const bool padded = std::string(cost).find("padded") == 0;
    CHECK(typed_name == (padded ? "padded" : "lpt+refine"));
    // A cost given without an algorithm runs that cost's default, whatever the phase's was.
    CHECK(mmbal::spec::policy_from_specs("llm", cost, "").balancer.name() == typed_name);
    CHECK(mmbal::spec::policy_from_specs("audio", cost, "").balancer.name() == typed_name);
  }
  // An algorithm given without a cost keeps the phase's cost.
  CHECK(orch::describe(mmbal::spec::policy_from_specs("audio", "", "lpt")) == "padded / lpt");
}

TEST_CASE("the typed default policies give the spec-string path's plans, bit for bit", "[orchestrate][partitioner]") {
  const mmbal::workload w = orchestrate_test::omni(900, 24, 11);
  const orch::orchestrator typed = orchestrate_test::make(24, 8);
  orch::orchestrator by_spec = orchestrate_test::make(24, 8);
  const std::pair<const char*, const char*> specs[] = {
      {"llm", "attention:alpha=1,beta=1.54e-05"}, {"image", "tokens"}, {"audio", "padded"}, {"video", "tokens"}};
  for (const auto& [phase, cost] : specs) {
    const std::string algorithm = std::string(phase) == "audio" ? "padded" : "lpt+refine";
    by_spec.set_policy(phase, mmbal::spec::policy_from_specs(phase, cost, algorithm));
    CHECK(orch::describe(typed.policy(phase)) == orch::describe(by_spec.policy(phase)));
  }
  const orch::orchestration a = typed.plan(w), b = by_spec.plan(w);
  REQUIRE(a.phases.size() == b.phases.size());
  for (std::size_t k = 0; k < a.phases.size(); ++k) {
    CHECK(a.phases[k].balanced == b.phases[k].balanced);
    CHECK(a.phases[k].fingerprint == b.phases[k].fingerprint);
  }
  CHECK(a.fingerprint == b.fingerprint);
}

TEST_CASE("migrate_partitioner gets the phase's origins and bytes", "[orchestrate][partitioner]") {
  const mmbal::workload w = orchestrate_test::omni(500, 16, 21);
  orch::orchestrator typed = orchestrate_test::make(16, 4), by_spec = orchestrate_test::make(16, 4);
  typed.set_policy("llm", {orch::phase_balancer(mmbal::balance::migrate_partitioner{{0.05}}, mmbal::cost::tokens{})});
  by_spec.set_policy("llm", mmbal::spec::policy_from_specs("llm", "tokens", "migrate:eps=0.05"));
  const orch::orchestration a = typed.plan(w), b = by_spec.plan(w);
  CHECK(a.llm().report.algorithm.rfind("migrate:eps=0.05", 0) == 0);  // printed with full precision
  CHECK(a.llm().report.algorithm == b.llm().report.algorithm);
  CHECK(a.llm().balanced == b.llm().balanced);
  CHECK(a.fingerprint == b.fingerprint);
  // Locality: it moves fewer bytes than lpt under the same cost.
  orch::orchestrator plain = orchestrate_test::make(16, 4);
  plain.set_policy("llm", {orch::phase_balancer(mmbal::balance::lpt{}, mmbal::cost::tokens{})});
  CHECK(a.llm().report.moved_bytes < plain.plan(w).llm().report.moved_bytes);
}

TEST_CASE("a partitioner that breaks its contract is rejected naming the phase", "[orchestrate][partitioner]") {
  const mmbal::workload w = orchestrate_test::omni(100, 4, 5);
  orch::orchestrator o = orchestrate_test::make(4, 2);
  o.set_policy("llm", {orch::phase_balancer(too_many_bins{}, mmbal::cost::tokens{})});
  CHECK_THROWS_WITH(o.plan(w),
                    Catch::Contains("phase 'llm'") && Catch::Contains("broken") && Catch::Contains("5 bins"));
}

namespace {
// A user's cost that is undefined (NaN) for batches of `from` or more items: single items are
// finite, so the lower bound passes and only the loads show it.
struct nan_from_cost {
  std::size_t from = 3;
  struct state {
    std::size_t count = 0;
    double sum = 0;
    friend bool operator==(const state&, const state&) = default;
  };
  [[nodiscard]] state empty() const { return {}; }
  [[nodiscard]] state add(const state& s, length_t l) const { return {s.count + 1, s.sum + static_cast<double>(l)}; }
  [[nodiscard]] double value(const state& s) const { return s.count >= from ? std::nan("") : s.sum; }
  [[nodiscard]] std::string name() const { return "nan-from:" + std::to_string(from); }
};
}  // namespace

TEST_CASE("a user's cost that returns NaN is refused with the phase named, never reported as max 0",
          "[orchestrate][partitioner]") {
  // Before: loads_after held NaN and max_after read 0, below the lower bound, with no error.
  const mmbal::workload w = orchestrate_test::omni(12 * 2, 2, 5);
  orch::orchestrator o = orchestrate_test::make(2, 1);
  o.set_policy("llm", {orch::phase_balancer(mmbal::balance::lpt{}, nan_from_cost{3}, {true, {}, {}})});
  CHECK_THROWS_WITH(o.plan(w), Catch::Contains("phase 'llm'") && Catch::Contains("is NaN") &&
                                   Catch::Contains("the cost returned NaN"));
  // A cost that is NaN for one item alone names that item in the lower bound, and the phase.
  o.set_policy("llm", {orch::phase_balancer(mmbal::balance::lpt{}, nan_from_cost{1}, {false, {}, {}})});
  CHECK_THROWS_WITH(o.plan(w),
                    Catch::Contains("phase 'llm'") && Catch::Contains("item 0") && Catch::Contains("alone costs NaN"));
}

namespace {
// A user's partitioner that ignores every constraint (against the concept's contract): every
// item on bin 0, or dealt round robin when `deal`.
struct ignoring_constraints {
  bool deal = false;
  template <mmbal::batch_cost C>
  assignment operator()(std::span<const length_t> weights, rank_t bins, const C& /*cost*/,
                        const mmbal::balance::constraints& /*limits*/) const {
    mmbal::partition p{bins, std::vector<rank_t>(weights.size(), 0)};
    for (std::size_t i = 0; deal && i < weights.size(); ++i) p.bin_of[i] = static_cast<rank_t>(i % bins);
    return assignment::from_partition(p);
  }
};
}  // namespace

TEST_CASE("a user's partitioner that ignores the policy's hard constraints is refused at the boundary",
          "[orchestrate][partitioner]") {
  // Before: the plan ran with max_after far above a capacity of 50, or counts 36 0 0 under
  // equal counts, or a group split, with no error (refine caught the count cap, when asked for).
  mmbal::workload w = orchestrate_test::omni(12 * 3, 3, 6);
  const orch::phase_balancer on_first(ignoring_constraints{false}, mmbal::cost::tokens{}, {false, "on-first", {}});
  const orch::phase_balancer dealt(ignoring_constraints{true}, mmbal::cost::tokens{}, {false, "dealt", {}});
  orch::orchestrator o = orchestrate_test::make(3, 1);
  orch::phase_policy capped{on_first};
  capped.capacity = 50.0;
  o.set_policy("llm", capped);
  CHECK_THROWS_WITH(o.plan(w), Catch::Contains("phase 'llm'") &&
                                   Catch::Contains("the partitioner 'on-first' broke the capacity: bin 0 costs"));
  orch::phase_policy equal{on_first};
  equal.counts.kind = mmbal::balance::count_cap::mode::equal;
  o.set_policy("llm", equal);
  CHECK_THROWS_WITH(o.plan(w), Catch::Contains("broke the count cap: bin 0 holds 36 items, allowed 12..12"));
  // Samples 0 and 1 in one group: dealing puts them on bins 0 and 1.
  w.samples[0].group = w.samples[1].group = 7;
  orch::phase_policy grouped{dealt};
  grouped.keep_groups = true;
  o.set_policy("llm", grouped);
  CHECK_THROWS_WITH(o.plan(w), Catch::Contains("the partitioner 'dealt' split group"));
  // Constraints that these results meet: planned.
  grouped.balancer = on_first;  // one bin keeps every group whole
  o.set_policy("llm", grouped);
  CHECK_NOTHROW(o.plan(w));
  orch::phase_policy loose{dealt};
  loose.capacity = 1e18;
  loose.counts.kind = mmbal::balance::count_cap::mode::equal;
  o.set_policy("llm", loose);
  CHECK_NOTHROW(o.plan(w));
}
