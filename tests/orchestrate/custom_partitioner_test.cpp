// Open policies at the top layer (docs/DESIGN.md §4, §5.5): an archetype that models exactly
// `balance::partitioner` (a call operator templated over `batch_cost`, nothing else) plugs into
// the orchestrator through `any_partitioner`; a built-in partitioner plugged in the same way
// gives bit-identical plans to the spec-string path; a partitioner that breaks its contract is
// caught at the boundary with the phase named.
#include "support.hpp"

#include <mmbal/balance/lpt.hpp>
#include <mmbal/balance/padded_binary_search.hpp>
#include <mmbal/orchestrate/policy.hpp>

#include <catch2/catch.hpp>

#include <span>
#include <string>
#include <vector>

namespace {

using mmbal::assignment;
using mmbal::length_t;
using mmbal::rank_t;
namespace orch = mmbal::orchestrate;

// Exactly the partitioner concept: item i goes to bin i mod bins, slots in id order. Rejects
// every constraint (it honours none), as the concept's contract asks.
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

static_assert(mmbal::balance::partitioner<round_robin_archetype, mmbal::cost::tokens>);
static_assert(orch::any_cost_partitioner<round_robin_archetype>);
static_assert(mmbal::balance::partitioner<orch::any_partitioner, mmbal::cost::padded>);

// Breaks the contract: one bin too many.
struct too_many_bins {
  template <mmbal::batch_cost C>
  assignment operator()(std::span<const length_t> weights, rank_t bins, const C&,
                        const mmbal::balance::constraints&) const {
    mmbal::partition p{bins + 1, std::vector<rank_t>(weights.size(), bins)};
    return assignment::from_partition(p);
  }
};

// The padded search needs a `padded_cost`; a partitioner for every cost must say what it does
// with the others (here: reject them, as `balance::solve` does).
struct padded_search_or_reject {
  template <mmbal::batch_cost C>
  assignment operator()(std::span<const length_t> weights, rank_t bins, const C& cost,
                        const mmbal::balance::constraints& limits) const {
    if constexpr (mmbal::padded_cost<C>)
      return mmbal::balance::padded_binary_search{}(weights, bins, cost, limits);
    else
      mmbal::detail::throw_invalid("padded: needs a padded cost");
  }
};

}  // namespace

TEST_CASE("any_partitioner calls the held partitioner with the concrete cost", "[orchestrate][partitioner]") {
  const orch::any_partitioner erased("lpt", mmbal::balance::lpt{});
  const std::vector<length_t> w{900, 5, 300, 300, 41, 7000, 12, 640};
  const mmbal::cost::any_cost costs[] = {mmbal::cost::tokens{}, mmbal::cost::attention{1.0, 1e-4},
                                         mmbal::cost::padded{}};
  for (const auto& c : costs) {
    const assignment direct = std::visit([&](const auto& cc) { return mmbal::balance::lpt{}(w, 3, cc, {}); }, c);
    CHECK(erased(w, 3, c, {}) == direct);
  }
  CHECK(erased.name() == "lpt");
  CHECK_THROWS_AS(orch::any_partitioner("", round_robin_archetype{}), mmbal::invalid_input);
}

TEST_CASE("a user's partitioner drives the orchestrator on every phase", "[orchestrate][partitioner]") {
  const mmbal::workload w = orchestrate_test::omni(600, 16, 3);
  orch::orchestrator o = orchestrate_test::make(16, 4);
  const std::vector<std::string> phases = orch::orchestrator::phase_names(w);
  REQUIRE(phases.size() >= 3);
  for (const std::string& phase : phases) {
    orch::phase_policy p = orch::default_policy(phase);
    p.partitioner = orch::any_partitioner("round-robin", round_robin_archetype{});
    o.set_policy(phase, p);
  }
  const orch::orchestration plan = o.plan(w);
  for (const orch::phase_plan& p : plan.phases) {
    INFO("phase " << p.name);
    CHECK(p.report.algorithm == "round-robin");
    // Independent re-computation of what the archetype must have produced.
    for (std::size_t i = 0; i < p.items.size(); ++i)
      REQUIRE(p.balanced.where[i] == mmbal::location{static_cast<rank_t>(i % 16), static_cast<std::uint32_t>(i / 16)});
    REQUIRE_NOTHROW(p.forward.validate());
  }
  CHECK(plan.composed.size() == plan.phases.size() - 1);
  CHECK(orch::orchestrator::plan_fingerprint(plan) == plan.fingerprint);
}

TEST_CASE("a built-in partitioner through any_partitioner gives the spec path's plan, bit for bit",
          "[orchestrate][partitioner]") {
  const mmbal::workload w = orchestrate_test::omni(900, 24, 11);
  const orch::orchestrator by_spec = orchestrate_test::make(24, 8);
  orch::orchestrator erased = orchestrate_test::make(24, 8);
  for (const std::string& phase : orch::orchestrator::phase_names(w)) {
    orch::phase_policy p = by_spec.policy(phase);
    const std::string label = orch::algorithm_label(p);
    if (label == "lpt")
      p.partitioner = orch::any_partitioner("lpt", mmbal::balance::lpt{});
    else if (label == "padded")
      p.partitioner = orch::any_partitioner("padded", padded_search_or_reject{});
    REQUIRE(p.partitioner.has_value());
    erased.set_policy(phase, p);
  }
  const orch::orchestration a = by_spec.plan(w), b = erased.plan(w);
  REQUIRE(a.phases.size() == b.phases.size());
  for (std::size_t k = 0; k < a.phases.size(); ++k) {
    CHECK(a.phases[k].balanced == b.phases[k].balanced);
    CHECK(a.phases[k].fingerprint == b.phases[k].fingerprint);
  }
  CHECK(a.fingerprint == b.fingerprint);
}

TEST_CASE("a partitioner that breaks its contract is rejected naming the phase", "[orchestrate][partitioner]") {
  const mmbal::workload w = orchestrate_test::omni(100, 4, 5);
  orch::orchestrator o = orchestrate_test::make(4, 2);
  orch::phase_policy p = orch::default_policy("llm");
  p.partitioner = orch::any_partitioner("broken", too_many_bins{});
  o.set_policy("llm", p);
  CHECK_THROWS_WITH(o.plan(w),
                    Catch::Contains("phase 'llm'") && Catch::Contains("broken") && Catch::Contains("5 bins"));
}
