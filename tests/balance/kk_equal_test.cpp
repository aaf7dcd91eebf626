// Equal-count Karmarkar–Karp on the workloads of issue 13: the omni LLM phase with 8 samples
// per rank (classic BLDM ends 1.27× the equal-count lower bound there) and the attention cost
// with 64 per rank (classic BLDM 1.01–1.07×). The items are built as the tool builds them
// (`phase_items_of`, count cap `equal`).
#include "conformance.hpp"

#include <mmbal/workload/generators.hpp>
#include <mmbal/workload/length_data.hpp>
#include <mmbal/workload/sample.hpp>

using namespace mmbal;

namespace {

struct equal_run {
  double kk = 0, lpt = 0, lower = 0;
};

equal_run run_equal(const std::vector<length_t>& w, rank_t d, const std::string& cost_spec) {
  const spec::any_cost c = spec::parse_cost(cost_spec);
  balance::constraints limits;
  limits.counts.kind = balance::count_cap::mode::equal;
  const assignment kk = test::solve_checked(spec::parse_algorithm("kk"), c, w, d, limits);
  const assignment lpt = test::solve_checked(spec::parse_algorithm("lpt"), c, w, d, limits);
  equal_run r;
  r.kk = test::check_run(kk, w, d, c, limits);  // also checks counts ⌊n/d⌋..⌈n/d⌉
  r.lpt = test::check_run(lpt, w, d, c, limits);
  r.lower = std::visit([&](const auto& cc) { return equal_count_lower_bound(std::span<const length_t>(w), d, cc); }, c);
  return r;
}

std::vector<length_t> omni_llm(std::uint64_t samples, rank_t d, std::uint64_t seed) {
  generator_options o;
  o.samples = samples;
  o.ranks = d;
  o.seed = seed;
  return phase_items_of(generate(family::omni, o, default_length_data()), "llm").weights;
}

}  // namespace

TEST_CASE("kk equal count: omni 4,096 samples on 512 ranks (8 per rank) within 1.01x the bound and <= lpt",
          "[balance][kk]") {
  for (const std::uint64_t seed : {1, 2, 3}) {
    const std::vector<length_t> w = omni_llm(4096, 512, seed);
    for (const std::string cost_spec : {"tokens", "attention:alpha=1,beta=0.0001"}) {
      INFO("seed " << seed << " cost " << cost_spec);
      const equal_run r = run_equal(w, 512, cost_spec);
      CHECK(r.kk <= r.lpt);
      CHECK(r.kk <= 1.01 * r.lower);
    }
  }
}

TEST_CASE("kk equal count: attention cost at 64 per rank within 1.01x the bound and <= lpt", "[balance][kk]") {
  for (const std::uint64_t seed : {1, 2026}) {
    const std::vector<length_t> w = omni_llm(64 * 256, 256, seed);
    for (const std::string cost_spec : {"attention:alpha=1,beta=0.0001", "attention:alpha=1,beta=0.001", "tokens"}) {
      INFO("seed " << seed << " cost " << cost_spec);
      const equal_run r = run_equal(w, 256, cost_spec);
      CHECK(r.kk <= r.lpt);
      CHECK(r.kk <= 1.01 * r.lower);
    }
  }
}

TEST_CASE("kk equal count: a heavy item gets the lightest partners (3 per bin, one huge item)", "[balance][kk]") {
  // 4 bins × 3 items: one item of 100, the rest 10..20. Classic BLDM (chunks of consecutive
  // ranks) gives the huge item's bin one item of each band (≥ 100 + 14 + 10); the optimum pairs
  // it with the two lightest (10 + 11), which is also the equal-count lower bound.
  const std::vector<length_t> w{100, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10};
  const equal_run r = run_equal(w, 4, "tokens");
  CHECK(r.kk == 121.0);
  CHECK(r.kk <= r.lpt);
  CHECK(r.lower == 121.0);
}

TEST_CASE("kk equal count on random instances with >= 2 items per bin: vs capped lpt and the equal-count bound",
          "[balance][kk]") {
  // Issue 13's goal is eq_kk ≤ capped lpt (relative 1e-9) and ≤ 1.01 × the equal-count bound.
  // Neither holds on every instance (the bound is loose with few integral items; with d ≤ 4
  // and few items the pair chunkings can miss LPT's split), so this asserts what does hold on
  // every instance — never more than 5 % above lpt; above 1.01 × the bound only where lpt is
  // too or the gap to lpt is small — and caps the counts at the measured ones
  // (bench/RESULTS.md), so a regression of the differencing fails here.
  balance::constraints limits;
  limits.counts.kind = balance::count_cap::mode::equal;
  const spec::any_cost costs[] = {spec::parse_cost("tokens"), spec::parse_cost("attention:alpha=1,beta=0.001")};
  const spec::algorithm_spec kk_spec = spec::parse_algorithm("kk"), lpt_spec = spec::parse_algorithm("lpt");
  int runs = 0, worse = 0, over = 0, over_alone = 0;
  for (std::uint64_t seed = 0; seed < 1500; ++seed) {
    const test::instance in = test::random_instance(seed, 2000);
    if (in.bins < 2 || in.weights.size() < 2 * std::size_t{in.bins}) continue;
    for (const spec::any_cost& c : costs) {
      INFO("seed " << seed << " n " << in.weights.size() << " d " << in.bins << " shape " << in.shape);
      const balance::problem p{in.weights, in.bins, limits};
      const assignment kk = spec::solve(kk_spec, c, p);
      const assignment lpt = spec::solve(lpt_spec, c, p);
      const double kk_max = test::check_run(kk, in.weights, in.bins, c, limits);
      const double lpt_max = test::check_run(lpt, in.weights, in.bins, c, limits);
      const double bound = std::visit(
          [&](const auto& cc) { return equal_count_lower_bound(std::span<const length_t>(in.weights), in.bins, cc); },
          c);
      ++runs;
      CHECK(kk_max <= 1.05 * lpt_max);
      if (kk_max > lpt_max * (1 + 1e-9)) ++worse;
      if (kk_max > 1.01 * bound) {
        ++over;
        if (lpt_max <= 1.01 * bound) ++over_alone;
      }
    }
  }
  WARN("runs " << runs << ", eq_kk > lpt: " << worse << ", eq_kk > 1.01 x bound: " << over << " (lpt within it on "
               << over_alone << ")");
  CHECK(runs > 1000);
  CHECK(worse <= 18);      // measured: 18 of 1,944 (the previous BLDM: 84)
  CHECK(over <= 270);      // measured: 270 (previous: 354)
  CHECK(over_alone <= 3);  // measured: 3 (previous: 17)
}
