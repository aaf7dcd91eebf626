#include <mmbal/cost/metrics.hpp>
#include <mmbal/spec/algorithm.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace mmbal;
using namespace mmbal::balance;
using namespace mmbal::spec;

TEST_CASE("spec: parse and print round-trip", "[balance][spec]") {
  for (const char* text : {"lpt", "greedy-ascending", "padded", "tolerance:v=12.5", "conv", "kk", "migrate:eps=0.01",
                           "lpt+refine", "kk+refine", "migrate:eps=0.25+refine", "tolerance:v=0+refine"}) {
    const algorithm_spec s = parse_algorithm(text);
    CHECK(to_spec(s) == text);
    CHECK(parse_algorithm(to_spec(s)) == s);
  }
  CHECK(parse_algorithm("tolerance:v=3").tolerance == 3.0);
  CHECK(parse_algorithm("migrate:eps=0.1").epsilon == 0.1);
  CHECK(parse_algorithm("lpt+refine").refine);
  CHECK_FALSE(parse_algorithm("lpt").refine);
}

TEST_CASE("spec: large parameters print with an exponent and still round-trip", "[balance][spec]") {
  // Found by fuzz/fuzz_specs: to_spec prints 1.1e+24 and the '+' of the exponent was taken
  // for the start of a suffix ("unknown suffix '+24'").
  for (const double value : {1.1111111111111111e+24, 2e+300, 5e-7}) {
    algorithm_spec migrate;
    migrate.base = algorithm_kind::migrate;
    migrate.epsilon = value;
    algorithm_spec tolerance;
    tolerance.base = algorithm_kind::tolerance;
    tolerance.tolerance = value;
    for (algorithm_spec s : {migrate, tolerance})
      for (const bool refine : {false, true}) {
        s.refine = refine;
        INFO(to_spec(s));
        CHECK(parse_algorithm(to_spec(s)) == s);
      }
  }
  CHECK(parse_algorithm("migrate:eps=1e+2+refine").epsilon == 100.0);
  CHECK(parse_algorithm("migrate:eps=1e+2+refine").refine);
  CHECK_THROWS_AS(parse_algorithm("migrate:eps=1e+2+polish"), invalid_input);
  CHECK_THROWS_AS(parse_algorithm("lpt+"), invalid_input);
}

TEST_CASE("spec: bad specs name the offending part", "[balance][spec]") {
  auto message = [](const char* text) {
    try {
      (void)parse_algorithm(text);
    } catch (const invalid_input& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(message("simulated-annealing"), Catch::Contains("simulated-annealing"));
  CHECK_THAT(message("lpt+polish"), Catch::Contains("+polish"));
  CHECK_THAT(message("tolerance:v=-1"), Catch::Contains("-1"));
  CHECK_THAT(message("tolerance:v=nan"), Catch::Contains("nan"));
  CHECK_THAT(message("migrate:eps=-0.5"), Catch::Contains("-0.5"));
  CHECK_THAT(message("lpt:x=1"), Catch::Contains("'x'"));
  CHECK_THAT(message(""), Catch::Contains("empty"));
}

TEST_CASE("spec: solve validates the problem", "[balance][spec]") {
  const std::vector<length_t> w{5, 4, 3};
  const spec::any_cost c = cost::tokens{};
  CHECK_THROWS_AS(solve(parse_algorithm("lpt"), c, problem{w, 0}), invalid_input);
  const std::vector<rank_t> bad_origin{0, 1};
  problem p{w, 2};
  p.origin = bad_origin;
  CHECK_THROWS_AS(solve(parse_algorithm("lpt"), c, p), invalid_input);
  const std::vector<rank_t> out_of_range{0, 1, 2};
  p.origin = out_of_range;
  CHECK_THROWS_WITH(solve(parse_algorithm("lpt"), c, p), Catch::Contains("rank 2"));
  const assignment a = solve(parse_algorithm("lpt"), c, problem{w, 2});
  a.validate();
  CHECK(a == lpt{}(w, 2, cost::tokens{}));
}
