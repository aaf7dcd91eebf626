// Every cost against its formula written out directly, monotonicity, and incremental ==
// from-scratch evaluation on seeded random batches.
#include <mmbal/core/rng.hpp>
#include <mmbal/cost/functions.hpp>
#include <mmbal/spec/cost.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <locale>
#include <string>
#include <vector>

namespace {
using mmbal::length_t;
namespace cost = mmbal::cost;
namespace spec = mmbal::spec;

struct direct {
  double sum = 0, sum_sq = 0, max = 0, count = 0;
  explicit direct(const std::vector<length_t>& ls) {
    for (length_t l : ls) {
      sum += l;
      sum_sq += static_cast<double>(l) * l;
      max = std::max<double>(max, l);
      count += 1;
    }
  }
};

std::vector<length_t> random_batch(mmbal::rng_engine& g) {
  std::vector<length_t> ls(static_cast<std::size_t>(mmbal::uniform_int(g, 0, 40)));
  for (auto& l : ls) l = static_cast<length_t>(mmbal::uniform_int(g, 0, 20000));
  return ls;
}

template <class C, class F>
void check_against(const C& c, F formula) {
  auto g = mmbal::make_rng(42);
  for (int trial = 0; trial < 300; ++trial) {
    const auto ls = random_batch(g);
    const direct d(ls);
    const double expected = ls.empty() ? 0.0 : formula(d);
    const double got = mmbal::batch_value(c, ls);
    REQUIRE(got == Approx(expected).epsilon(1e-12).margin(1e-9));
    // Incremental evaluation equals from-scratch, and value never decreases when adding.
    auto s = c.empty();
    double previous = c.value(s);
    REQUIRE(previous == 0.0);
    for (length_t l : ls) {
      s = c.add(s, l);
      const double v = c.value(s);
      REQUIRE(v >= previous);
      previous = v;
    }
    REQUIRE(previous == got);  // bit-identical: same fold order
    if constexpr (mmbal::additive_cost<C>) {
      double total = 0;
      for (length_t l : ls) total += c.item(l);
      REQUIRE(total == Approx(got).epsilon(1e-12).margin(1e-9));
    }
    if constexpr (mmbal::padded_cost<C>) {
      const auto count = static_cast<std::uint64_t>(d.count);
      const auto longest = static_cast<length_t>(d.max);
      REQUIRE(c.padded_value(count, longest) == got);
      // Non-decreasing in the length at a fixed count (refine's padded path relies on it).
      REQUIRE(c.padded_value(count, longest + 1) >= got);
      if (longest > 0) REQUIRE(c.padded_value(count, longest - 1) <= got);
    }
  }
}
}  // namespace

TEST_CASE("tokens = sum of lengths") {
  check_against(cost::tokens{}, [](const direct& d) { return d.sum; });
}

TEST_CASE("padded = count x max") {
  check_against(cost::padded{}, [](const direct& d) { return d.count * d.max; });
}

TEST_CASE("attention = alpha sum + beta sum of squares") {
  check_against(cost::attention{2.5, 1e-4}, [](const direct& d) { return 2.5 * d.sum + 1e-4 * d.sum_sq; });
  check_against(cost::attention{}, [](const direct& d) { return d.sum; });
}

TEST_CASE("padded_attention = alpha L + beta/b L^2 with L = b max") {
  check_against(cost::padded_attention{1.5, 2e-4}, [](const direct& d) {
    const double total = d.count * d.max;
    return 1.5 * total + 2e-4 / d.count * total * total;
  });
}

TEST_CASE("conv_attention = sum + lambda b max^2") {
  check_against(cost::conv_attention{0.01}, [](const direct& d) { return d.sum + 0.01 * d.count * d.max * d.max; });
}

TEST_CASE("fitted = x sum sq + y sum + z b") {
  check_against(cost::fitted{3e-5, 0.7, 11.0},
                [](const direct& d) { return 3e-5 * d.sum_sq + 0.7 * d.sum + 11.0 * d.count; });
}

TEST_CASE("flops derives alpha and beta from the model") {
  cost::model_config m;
  m.hidden = 1024;
  m.ffn = 4096;
  m.heads = 16;
  m.kv_heads = 4;
  m.layers = 2;
  const cost::flops f{m};
  // Written out: h_kv = 1024 * 4 / 16 = 256; per layer, forward, per token:
  // QKV 2*1024*(1024 + 512) + out 2*1024^2 + MLP 3*2*1024*4096; x3 for backward, x2 layers.
  const double alpha = 3.0 * 2 * (2.0 * 1024 * 1536 + 2.0 * 1024 * 1024 + 3.0 * 2 * 1024 * 4096);
  const double beta = 3.0 * 2 * 4 * 1024 * 0.5;
  CHECK(f.as_attention().alpha() == alpha);
  CHECK(f.as_attention().beta() == beta);
  check_against(f, [&](const direct& d) { return alpha * d.sum + beta * d.sum_sq; });
  m.causal = false;
  m.backward = false;
  m.gated_mlp = false;
  const cost::flops g{m};
  CHECK(g.as_attention().beta() == 4.0 * 1024 * 2);
  CHECK(g.as_attention().alpha() == 2 * (2.0 * 1024 * 1536 + 2.0 * 1024 * 1024 + 2.0 * 2 * 1024 * 4096));
}

TEST_CASE("cost parameters are validated") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  CHECK_THROWS_WITH(cost::attention(-1.0, 0.0), Catch::Contains("alpha = -1"));
  CHECK_THROWS_AS(cost::attention(1.0, nan), mmbal::invalid_input);
  CHECK_THROWS_AS(cost::padded_attention(inf, 0.0), mmbal::invalid_input);
  CHECK_THROWS_WITH(cost::conv_attention(-0.5), Catch::Contains("lambda = -0.5"));
  CHECK_THROWS_AS(cost::fitted(0, 0, -2), mmbal::invalid_input);
  cost::model_config m;
  m.kv_heads = 5;
  CHECK_THROWS_WITH(cost::flops{m}, Catch::Contains("kv_heads = 5"));
  m = {};
  m.layers = 0;
  CHECK_THROWS_AS(cost::flops{m}, mmbal::invalid_input);
}

namespace {
/// A locale with a decimal comma and digit grouping, built without any installed locale.
struct comma_decimal : std::numpunct<char> {
  char do_decimal_point() const override { return ','; }
  char do_thousands_sep() const override { return '.'; }
  std::string do_grouping() const override { return "\3"; }
};
}  // namespace

TEST_CASE("cost names are one text per cost: -0 is 0, the caller's locale does not matter") {
  // The names feed plan fingerprints (and parse back): a cost written "beta=-0" or named
  // under a caller's global locale with a decimal comma must print as every other rank's.
  CHECK(cost::attention(1.0, -0.0).name() == cost::attention(1.0, 0.0).name());
  CHECK(cost::fitted(-0.0, 1.0, -0.0).name() == "fitted:x=0,y=1,z=0");
  CHECK(cost::conv_attention(-0.0).name() == "conv:lambda=0");
  CHECK(spec::to_spec(spec::parse_cost("attention:alpha=1,beta=-0")) == "attention:alpha=1,beta=0");
  const std::locale previous = std::locale::global(std::locale(std::locale::classic(), new comma_decimal));
  const std::string attention = cost::attention(1.0, 1.54e-5).name();
  const std::string fitted = cost::fitted(0.5, 1500.5, 2000).name();
  std::locale::global(previous);
  CHECK(attention == "attention:alpha=1,beta=1.5400000000000002e-05");
  CHECK(fitted == "fitted:x=0.5,y=1500.5,z=2000");
}

TEST_CASE("cost specs parse, print and reject bad input") {
  for (const char* text :
       {"tokens", "padded", "attention:alpha=1,beta=0.0001", "padded-attention:alpha=2,beta=0.5", "conv:lambda=0.25",
        "fitted:x=1e-05,y=2,z=3", "flops:hidden=1024,ffn=4096,heads=16,kv_heads=4,layers=2"}) {
    const auto c = spec::parse_cost(text);
    const auto again = spec::parse_cost(spec::to_spec(c));
    CHECK(c.index() == again.index());
    CHECK(spec::to_spec(again) == spec::to_spec(c));
  }
  const auto a = std::get<cost::attention>(spec::parse_cost("attention:beta=0.5"));
  CHECK(a.alpha() == 1.0);
  CHECK(a.beta() == 0.5);
  CHECK_THROWS_WITH(spec::parse_cost("quadratic"), Catch::Contains("quadratic"));
  CHECK_THROWS_WITH(spec::parse_cost("attention:gamma=1"), Catch::Contains("gamma"));
  CHECK_THROWS_WITH(spec::parse_cost("attention:alpha=x"), Catch::Contains("'x'"));
  CHECK_THROWS_WITH(spec::parse_cost("attention:alpha=-3"), Catch::Contains("-3"));
  CHECK_THROWS_AS(spec::parse_cost("attention:alpha"), mmbal::invalid_input);
  CHECK_THROWS_AS(spec::parse_cost("attention:alpha=1,alpha=2"), mmbal::invalid_input);
  CHECK_THROWS_AS(spec::parse_cost("tokens:x=1"), mmbal::invalid_input);
  CHECK_THROWS_AS(spec::parse_cost(""), mmbal::invalid_input);
  CHECK_THROWS_AS(spec::parse_cost("flops:layers=-1"), mmbal::invalid_input);
}
