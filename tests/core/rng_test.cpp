#include <mmbal/core/rng.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <vector>

TEST_CASE("the engine is the standard's mt19937_64") {
  // The C++ standard fixes the 10000th output of a default-constructed mt19937_64.
  mmbal::rng_engine g;
  g.discard(9999);
  CHECK(g() == 9981545732273789042ULL);
}

TEST_CASE("make_rng derives distinct, reproducible streams") {
  auto a = mmbal::make_rng(7, 1, 2), b = mmbal::make_rng(7, 1, 2), c = mmbal::make_rng(7, 2, 1);
  CHECK(a() == b());
  CHECK(mmbal::make_rng(7, 1, 2)() != c());
  CHECK(mmbal::splitmix64(0) != mmbal::splitmix64(1));
}

TEST_CASE("uniform draws stay in range and are close to uniform") {
  auto g = mmbal::make_rng(1);
  std::array<int, 7> counts{};
  const int draws = 70000;
  for (int i = 0; i < draws; ++i) {
    const auto x = mmbal::uniform_below(g, 7);
    REQUIRE(x < 7);
    ++counts[x];
  }
  for (int c : counts) CHECK(std::abs(c - draws / 7) < 400);  // ~5 sigma
  for (int i = 0; i < 1000; ++i) {
    const double u = mmbal::uniform01(g);
    REQUIRE(u >= 0.0);
    REQUIRE(u < 1.0);
    const auto k = mmbal::uniform_int(g, -3, 3);
    REQUIRE(k >= -3);
    REQUIRE(k <= 3);
  }
  // A range above 2^32 exercises the full 128-bit product.
  const std::uint64_t big = (std::uint64_t{1} << 40) + 12345;
  for (int i = 0; i < 1000; ++i) REQUIRE(mmbal::uniform_below(g, big) < big);
  CHECK_THROWS_AS(mmbal::uniform_below(g, 0), mmbal::invalid_input);
  CHECK_THROWS_AS(mmbal::uniform_int(g, 2, 1), mmbal::invalid_input);
}

TEST_CASE("standard_normal and lognormal have the right moments") {
  auto g = mmbal::make_rng(3);
  const int n = 40000;
  double sum = 0, sum_sq = 0;
  std::vector<double> logs;
  for (int i = 0; i < n; ++i) {
    const double z = mmbal::standard_normal(g);
    sum += z;
    sum_sq += z * z;
    logs.push_back(mmbal::lognormal(g, 200.0, 0.5));
  }
  CHECK(std::abs(sum / n) < 0.03);
  CHECK(std::abs(sum_sq / n - 1.0) < 0.03);
  std::nth_element(logs.begin(), logs.begin() + n / 2, logs.end());
  CHECK(logs[n / 2] == Approx(200.0).epsilon(0.03));  // the median is the parameter
}

TEST_CASE("weighted choice follows the weights") {
  auto g = mmbal::make_rng(5);
  const std::array<double, 3> w{1.0, 0.0, 3.0};
  std::array<double, 3> cumulative{};
  std::partial_sum(w.begin(), w.end(), cumulative.begin());
  std::array<int, 3> a{}, b{};
  for (int i = 0; i < 40000; ++i) {
    ++a[mmbal::choose_weighted(g, w)];
    ++b[mmbal::choose_cumulative(g, cumulative)];
  }
  CHECK(a[1] == 0);
  CHECK(b[1] == 0);
  CHECK(a[0] == Approx(10000).epsilon(0.05));
  CHECK(b[2] == Approx(30000).epsilon(0.05));
  const std::array<double, 2> zero{0.0, 0.0};
  CHECK_THROWS_AS(mmbal::choose_weighted(g, zero), mmbal::invalid_input);
}

TEST_CASE("shuffle is a seeded permutation") {
  std::vector<int> v(100);
  std::iota(v.begin(), v.end(), 0);
  auto a = v, b = v;
  auto g1 = mmbal::make_rng(9), g2 = mmbal::make_rng(9);
  mmbal::shuffle(std::span<int>(a), g1);
  mmbal::shuffle(std::span<int>(b), g2);
  CHECK(a == b);
  CHECK(a != v);
  std::sort(a.begin(), a.end());
  CHECK(a == v);
}
