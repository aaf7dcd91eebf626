#include <mmbal/core/rng.hpp>
#include <mmbal/cost/functions.hpp>
#include <mmbal/cost/metrics.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

using mmbal::length_t;

TEST_CASE("bin loads are recomputed per bin, for partitions and assignments") {
  const std::vector<length_t> w{5, 1, 7, 3, 2};
  const mmbal::partition p{3, {0, 1, 0, 2, 1}};
  const auto loads = mmbal::bin_loads(p, w, mmbal::cost::tokens{});
  CHECK(loads == std::vector<double>{12, 3, 3});
  const auto padded = mmbal::bin_loads(mmbal::assignment::from_partition(p), w, mmbal::cost::padded{});
  CHECK(padded == std::vector<double>{14, 4, 3});
  const auto s = mmbal::summarize_loads(loads);
  CHECK(s.max == 12);
  CHECK(s.mean == 6);
  CHECK(s.max_over_mean == 2);
  CHECK(mmbal::summarize_loads(std::vector<double>{0, 0}).max_over_mean == 1);
  CHECK_THROWS_AS(mmbal::bin_loads(mmbal::partition{3, {0}}, w, mmbal::cost::tokens{}), mmbal::invalid_input);
}

TEST_CASE("bin_loads under tokens (one integer per bin) equals the fold of the whole state", "[metrics]") {
  auto g = mmbal::make_rng(39);
  const mmbal::cost::tokens tokens;
  for (int trial = 0; trial < 100; ++trial) {
    const auto d = static_cast<mmbal::rank_t>(mmbal::uniform_int(g, 1, 40));
    std::vector<length_t> w(static_cast<std::size_t>(mmbal::uniform_int(g, 0, 400)));
    std::vector<mmbal::rank_t> bin(w.size());
    // Lengths up to 2^32 − 1 every few trials: sums past 2^53, where a double fold would round.
    const length_t top = trial % 4 == 0 ? 0xffffffffu : 5000;
    for (std::size_t i = 0; i < w.size(); ++i) {
      w[i] = static_cast<length_t>(mmbal::uniform_int(g, 0, top));
      bin[i] = static_cast<mmbal::rank_t>(mmbal::uniform_int(g, 0, d - 1));
    }
    std::vector<mmbal::cost::tokens::state> state(d, tokens.empty());
    for (std::size_t i = 0; i < w.size(); ++i) state[bin[i]] = tokens.add(state[bin[i]], w[i]);
    std::vector<double> expected(d);
    for (mmbal::rank_t b = 0; b < d; ++b) expected[b] = tokens.value(state[b]);
    REQUIRE(mmbal::bin_loads(std::span<const mmbal::rank_t>(bin), d, w, tokens) == expected);
  }
  const std::vector<length_t> w{1, 2};
  const std::vector<mmbal::rank_t> off{0, 2};
  REQUIRE_THROWS_WITH(mmbal::bin_loads(std::span<const mmbal::rank_t>(off), 2, w, tokens),
                      Catch::Contains("item 1 on bin 2 >= 2"));
}

TEST_CASE("lower bounds never exceed the brute-force optimum") {
  auto g = mmbal::make_rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const auto n = static_cast<std::size_t>(mmbal::uniform_int(g, 1, 7));
    const auto d = static_cast<mmbal::rank_t>(mmbal::uniform_int(g, 1, 3));
    std::vector<length_t> w(n);
    for (auto& x : w) x = static_cast<length_t>(mmbal::uniform_int(g, 0, 50));
    // Enumerate every assignment; track the optimum overall and with equal counts.
    double best = 1e300, best_equal = 1e300;
    mmbal::partition p{d, std::vector<mmbal::rank_t>(n, 0)};
    for (;;) {
      const auto loads = mmbal::bin_loads(p, w, mmbal::cost::tokens{});
      const double m = *std::max_element(loads.begin(), loads.end());
      best = std::min(best, m);
      const auto sizes = p.bin_sizes();
      const auto [lo, hi] = std::minmax_element(sizes.begin(), sizes.end());
      if (*hi - *lo <= 1) best_equal = std::min(best_equal, m);
      std::size_t i = 0;
      while (i < n && ++p.bin_of[i] == d) p.bin_of[i++] = 0;
      if (i == n) break;
    }
    REQUIRE(mmbal::lower_bound(w, d, mmbal::cost::tokens{}) <= best);
    REQUIRE(mmbal::equal_count_lower_bound(w, d, mmbal::cost::tokens{}) <= best_equal);
  }
  const std::vector<length_t> w{10, 1, 1, 1};
  CHECK(mmbal::lower_bound(w, 2, mmbal::cost::tokens{}) == 10);
  CHECK(mmbal::equal_count_lower_bound(w, 2, mmbal::cost::tokens{}) == 11);  // 10 + smallest
  // Three heavy items on two bins of three: two share one (pigeonhole), with one light item:
  // 21, the optimum (the average is 16.5, the largest item with the two smallest 12).
  const std::vector<length_t> heavy{10, 10, 10, 1, 1, 1};
  CHECK(mmbal::equal_count_lower_bound(heavy, 2, mmbal::cost::tokens{}) == 21);
  CHECK_THROWS_AS(mmbal::lower_bound(w, 0, mmbal::cost::tokens{}), mmbal::invalid_input);
}

TEST_CASE("a total cost that overflows a double is bad input, not infinite loads") {
  const std::vector<length_t> w{1000, 10, 10};
  // Finite parameters: each item's cost overflows (1e308 · 1000), or only their sum does.
  CHECK_THROWS_WITH(mmbal::lower_bound(w, 2, mmbal::cost::attention{1e308, 1e308}),
                    Catch::Contains("total cost is inf") && Catch::Contains("longest item 1000") &&
                        Catch::Contains("overflow a double"));
  const std::vector<length_t> many(3, 1);
  CHECK_THROWS_WITH(mmbal::equal_count_lower_bound(many, 2, mmbal::cost::attention{1e308, 0.0}),
                    Catch::Contains("largest item cost 1e+308"));
  CHECK(mmbal::lower_bound(many, 2, mmbal::cost::attention{1e300, 0.0}) == 1.5e300);
}

TEST_CASE("traffic counts moved items, bytes and inter-node bytes") {
  const std::vector<mmbal::rank_t> origin{0, 1, 2, 3};
  const mmbal::partition to{4, {0, 0, 3, 1}};
  const std::vector<std::uint64_t> bytes{10, 20, 30, 40};
  const auto t = mmbal::placement_traffic(origin, to, bytes, 2);
  CHECK(t.moved_items == 3);
  CHECK(t.moved_bytes == 90);
  CHECK(t.inter_node_bytes == 40);  // 1->0 same node, 2->3 same node, 3->1 different nodes
  CHECK(mmbal::placement_traffic(origin, to, bytes, 0).inter_node_bytes == 0);
}

TEST_CASE("traffic refuses moved bytes beyond 2^64 - 1 instead of wrapping", "[metrics]") {
  const std::vector<mmbal::rank_t> origin{0, 0, 0};
  const mmbal::partition to{2, {1, 1, 0}};
  const std::uint64_t big = std::uint64_t{1} << 63;
  CHECK(mmbal::placement_traffic(origin, to, std::vector<std::uint64_t>{big - 1, big, 7}, 0).moved_bytes ==
        ~std::uint64_t{0});  // the largest total still counts exactly
  CHECK_THROWS_AS(mmbal::placement_traffic(origin, to, std::vector<std::uint64_t>{big, big, 7}, 0),
                  mmbal::invalid_input);
  CHECK_THROWS_WITH(mmbal::placement_traffic(origin, to, std::vector<std::uint64_t>{big, big, 7}, 0),
                    Catch::Contains("moved bytes exceeds 2^64 - 1"));
}

TEST_CASE("pad ratio and dist ratio follow OmniBal eq. 1 and 2") {
  const std::vector<std::uint64_t> batch{4, 2, 2};
  CHECK(mmbal::pad_ratio(batch) == Approx((0.0 + 2 + 2) / (4 * 3)));
  const std::vector<std::uint64_t> devices{100, 100};
  CHECK(mmbal::dist_ratio(devices) == 0.0);
  CHECK(mmbal::pad_ratio(std::vector<std::uint64_t>{}) == 0.0);
  // Σ (t_max − t_i) = 3 · (2^64 − 1) leaves 64 bits: the ratio is still 3 / 4, not a wrapped sum.
  const std::uint64_t top = ~std::uint64_t{0};
  CHECK(mmbal::pad_ratio(std::vector<std::uint64_t>{top, 0, 0, 0}) == Approx(0.75));
}

TEST_CASE("bin_loads and traffic refuse bin counts above max_ranks before allocating", "[metrics]") {
  // Empty input on 0xF0000000 bins asked for ~96 GB of states (bin_loads) or a 16 GB node table.
  const std::vector<mmbal::rank_t> none;
  const std::vector<length_t> no_weights;
  REQUIRE_THROWS_WITH(mmbal::bin_loads(std::span<const mmbal::rank_t>(none), 0xF0000000u,
                                       std::span<const length_t>(no_weights), mmbal::cost::tokens{}),
                      Catch::Contains("bin_loads: bins"));
  const mmbal::traffic t = mmbal::placement_traffic({}, mmbal::partition{0xF0000000u, {}}, {}, 1);
  REQUIRE(t.moved_items == 0);  // the node table is capped; nothing to count
}
