// The conformance kit run over every partitioner (see conformance.hpp).

#include "conformance.hpp"

#include <mmbal/balance/conv_lpt.hpp>
#include <mmbal/balance/greedy_ascending.hpp>
#include <mmbal/balance/karmarkar_karp.hpp>
#include <mmbal/balance/lpt.hpp>
#include <mmbal/balance/padded_binary_search.hpp>
#include <mmbal/balance/tolerance_lpt.hpp>

using namespace mmbal;
using namespace mmbal::balance;
using namespace mmbal::spec;
using mmbal::test::algorithm_under_test;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const invalid_input& e) {
    return e.what();
  }
  return "no error";
}

double total_solo(const std::vector<length_t>& w, const spec::any_cost& c) {
  return std::visit(
      [&](const auto& cost) {
        double t = 0;
        for (length_t l : w) t += test::solo(cost, l);
        return t;
      },
      c);
}

double max_solo(const std::vector<length_t>& w, const spec::any_cost& c) {
  return std::visit(
      [&](const auto& cost) {
        double m = 0;
        for (length_t l : w) m = std::max(m, test::solo(cost, l));
        return m;
      },
      c);
}

bool is_additive(const spec::any_cost& c) {
  return std::visit([](const auto& cost) { return additive_cost<std::decay_t<decltype(cost)>>; }, c);
}

void run_suite(const algorithm_under_test& alg, std::uint64_t seeds) {
  const algorithm_spec spec = parse_algorithm(alg.spec);
  for (std::uint64_t seed = 0; seed < seeds; ++seed) {
    // Tolerance with a capacity scans its window per item (O(n·w)): keep its instances smaller.
    // migrate and +refine are polished local searches: smaller instances keep the kit fast.
    const std::size_t max_n = spec.base == algorithm_kind::tolerance || spec.base == algorithm_kind::migrate ? 2000
                              : spec.refine                                                                  ? 1500
                                                                                                             : 10000;
    const test::instance in = test::random_instance(seed * 7919 + alg.spec.size() * 104729, max_n);
    const std::string cost_spec = alg.costs[seed % alg.costs.size()];
    const spec::any_cost c = spec::parse_cost(cost_spec);
    const std::size_t n = in.weights.size();
    const rank_t d = in.bins;
    INFO(alg.spec << " seed " << seed << " cost " << cost_spec << " n " << n << " d " << d << " " << in.shape);
    const std::vector<rank_t> origin = alg.needs_origin ? test::random_origin(n, d, seed) : std::vector<rank_t>{};
    auto solve_one = [&](const constraints& limits) {
      return test::solve_checked(spec, c, in.weights, d, limits, origin);
    };
    auto problem_of = [&](const constraints& limits) {
      problem p{in.weights, d, limits};
      p.origin = origin;
      return p;
    };

    // Unconstrained.
    {
      const assignment a = solve_one({});
      const double mx = test::check_run(a, in.weights, d, c, {});
      if (spec.refine) {
        // Refinement never makes the maximum worse than the base algorithm's.
        algorithm_spec base = spec;
        base.refine = false;
        const assignment b = test::solve_checked(base, c, in.weights, d, {}, origin);
        CHECK(mx <= test::check_run(b, in.weights, d, c, {}));
      }
      // Nothing can beat the plain lower bound (valid for every built-in cost).
      std::visit([&](const auto& cost) { CHECK(mx >= lower_bound(in.weights, d, cost) * (1 - 1e-12)); }, c);
    }
    // Equal counts.
    {
      constraints limits;
      limits.counts.kind = count_cap::mode::equal;
      if (alg.count_equal) {
        const assignment a = solve_one(limits);
        test::check_run(a, in.weights, d, c, limits);
      } else {
        CHECK_THAT(error_of([&] { (void)solve(spec, c, problem_of(limits)); }), Catch::Contains("count_cap"));
      }
    }
    // A fixed cap at or above ⌈n/d⌉ (feasible).
    {
      constraints limits;
      limits.counts.kind = count_cap::mode::fixed;
      limits.counts.cap = static_cast<std::uint32_t>((n + d - 1) / d + seed % 3);
      if (alg.count_fixed) {
        const assignment a = solve_one(limits);
        test::check_run(a, in.weights, d, c, limits);
      } else {
        CHECK_THAT(error_of([&] { (void)solve(spec, c, problem_of(limits)); }), Catch::Contains("count_cap"));
      }
    }
    // A capacity: list scheduling keeps an additive cost within Σ/d + max item (+ v for the
    // tolerance rule), so LPT-like rules must succeed there; other costs may be refused,
    // but only with an error that says so.
    {
      constraints limits;
      const double v = spec.base == algorithm_kind::tolerance ? spec.tolerance * 3 : 0.0;
      const double cap = total_solo(in.weights, c) / d + max_solo(in.weights, c) + v + 1;
      limits.capacity = cap;
      if (alg.capacity) {
        const bool must_fit =
            is_additive(c) && (spec.base == algorithm_kind::lpt || spec.base == algorithm_kind::greedy_ascending ||
                               (spec.base == algorithm_kind::tolerance && spec.tolerance == 0));
        std::optional<assignment> a;
        const std::string err = error_of([&] { a = solve_one(limits); });
        if (must_fit) REQUIRE(err == "no error");
        if (a)
          test::check_run(*a, in.weights, d, c, limits);
        else
          CHECK_THAT(err, Catch::Contains("capacity"));
      } else {
        CHECK_THAT(error_of([&] { (void)solve(spec, c, problem_of(limits)); }), Catch::Contains("capacity"));
      }
    }
    // Groups, alone and with a fixed cap.
    {
      const std::vector<std::uint64_t> groups = test::random_groups(n, seed);
      constraints limits;
      limits.groups = groups;
      if (n == 0) continue;  // an empty group list means "no groups"
      // migrate starts from a placement that keeps every group on one rank.
      const std::vector<rank_t> grouped_origin =
          alg.needs_origin ? test::random_origin(n, d, seed, groups) : std::vector<rank_t>{};
      if (alg.groups) {
        const assignment a = test::solve_checked(spec, c, in.weights, d, limits, grouped_origin);
        test::check_run(a, in.weights, d, c, limits);
      } else {
        CHECK_THAT(error_of([&] { (void)solve(spec, c, problem_of(limits)); }), Catch::Contains("groups"));
      }
      limits.counts.kind = count_cap::mode::fixed;
      limits.counts.cap = static_cast<std::uint32_t>(2 * ((n + d - 1) / d) + 4);
      std::optional<assignment> a;
      const std::string err =
          error_of([&] { a = test::solve_checked(spec, c, in.weights, d, limits, grouped_origin); });
      if (a) {
        CHECK(alg.groups_with_fixed);
        test::check_run(*a, in.weights, d, c, limits);
      } else {
        // Greedy packing of groups under a cap can fail on a feasible instance; it must say so.
        CHECK_THAT(err, Catch::Contains("count cap") || Catch::Contains("groups") || Catch::Contains("count_cap") ||
                            Catch::Contains("count"));
      }
      // Equal counts never combine with groups.
      limits.counts.kind = count_cap::mode::equal;
      CHECK_THAT(error_of([&] { (void)solve(spec, c, problem_of(limits)); }),
                 Catch::Contains("count_cap") || Catch::Contains("groups"));
    }
  }
}

}  // namespace

TEST_CASE("conformance: partitioner concept", "[balance][conformance]") {
  STATIC_REQUIRE(partitioner<lpt, cost::tokens>);
  STATIC_REQUIRE(partitioner<lpt, cost::padded>);
  STATIC_REQUIRE(partitioner<greedy_ascending, cost::conv_attention>);
  STATIC_REQUIRE(partitioner<tolerance_lpt, cost::attention>);
  STATIC_REQUIRE(partitioner<padded_binary_search, cost::padded>);
  STATIC_REQUIRE(partitioner<padded_binary_search, cost::padded_attention>);
  STATIC_REQUIRE(partitioner<conv_lpt, cost::conv_attention>);
  STATIC_REQUIRE(partitioner<karmarkar_karp, cost::fitted>);
  // Negative: algorithms whose cost model does not fit refuse at compile time.
  STATIC_REQUIRE_FALSE(partitioner<padded_binary_search, cost::tokens>);
  STATIC_REQUIRE_FALSE(partitioner<karmarkar_karp, cost::padded>);
  STATIC_REQUIRE_FALSE(partitioner<karmarkar_karp, cost::conv_attention>);
  STATIC_REQUIRE_FALSE(partitioner<conv_lpt, cost::tokens>);
  STATIC_REQUIRE_FALSE(partitioner<lpt, int>);
}

TEST_CASE("conformance: every partitioner on seeded random instances", "[balance][conformance][heavy]") {
  for (const algorithm_under_test& alg : test::all_algorithms()) {
    SECTION(alg.spec) { run_suite(alg, alg.needs_origin || alg.spec.find("+refine") != std::string::npos ? 60 : 150); }
  }
}

TEST_CASE("conformance: solve rejects costs an algorithm cannot use", "[balance][conformance]") {
  const std::vector<length_t> w{5, 3, 2};
  CHECK_THAT(error_of([&] {
               (void)solve(parse_algorithm("padded"), cost::tokens{}, problem{w, 2});
             }),
             Catch::Contains("padded") && Catch::Contains("tokens"));
  CHECK_THAT(error_of([&] {
               (void)solve(parse_algorithm("conv"), cost::attention{}, problem{w, 2});
             }),
             Catch::Contains("conv") && Catch::Contains("attention"));
  CHECK_THAT(error_of([&] {
               (void)solve(parse_algorithm("kk"), cost::padded{}, problem{w, 2});
             }),
             Catch::Contains("additive") && Catch::Contains("padded"));
}

TEST_CASE("conformance: LPT and greedy ascending equal an O(n d) reference", "[balance][conformance]") {
  const std::vector<std::string> costs{"tokens",           "attention:alpha=1,beta=0.001",
                                       "padded",           "padded-attention:alpha=2,beta=0.01",
                                       "conv:lambda=0.01", "fitted:x=0.5,y=1,z=3"};
  for (std::uint64_t seed = 0; seed < 250; ++seed) {
    const test::instance in = test::random_instance(seed + 424242, 1000);
    const spec::any_cost c = spec::parse_cost(costs[seed % costs.size()]);
    INFO("seed " << seed << " n " << in.weights.size() << " d " << in.bins << " " << in.shape);
    for (const auto kind : {count_cap::mode::none, count_cap::mode::equal, count_cap::mode::fixed}) {
      constraints limits;
      limits.counts.kind = kind;
      limits.counts.cap = static_cast<std::uint32_t>((in.weights.size() + in.bins - 1) / in.bins + 1);
      std::visit(
          [&](const auto& cost) {
            CHECK(lpt{}(in.weights, in.bins, cost, limits) ==
                  test::reference_greedy(in.weights, in.bins, cost, true, limits.counts));
            CHECK(greedy_ascending{}(in.weights, in.bins, cost, limits) ==
                  test::reference_greedy(in.weights, in.bins, cost, false, limits.counts));
          },
          c);
    }
  }
}

TEST_CASE("conformance: tolerance LPT equals the reference rule", "[balance][conformance]") {
  for (std::uint64_t seed = 0; seed < 160; ++seed) {
    const test::instance in = test::random_instance(seed + 77, 800);
    for (const double v : {0.0, 5.0, 400.0, 1e18}) {
      INFO("seed " << seed << " v " << v << " n " << in.weights.size() << " d " << in.bins);
      CHECK(tolerance_lpt{v}(in.weights, in.bins, cost::attention{1, 1e-4}) ==
            test::reference_tolerance(in.weights, in.bins, v));
    }
  }
  // v = 0 is LPT on Σl with Σl² breaking exact ties; powers of two make every non-empty
  // subset sum distinct, so no tie beyond the empty bins and it is plain LPT.
  const std::vector<length_t> w{1, 1024, 8, 512, 256, 2, 128, 64, 32, 16, 4};
  CHECK(tolerance_lpt{0}(w, 3, cost::tokens{}) == lpt{}(w, 3, cost::tokens{}));
}
