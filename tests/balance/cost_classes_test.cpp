// Tests of balance/detail/cost_classes.hpp: the classes each bin holds, the partner filter
// against a brute-force search for an improving move or swap, and refine with the filter taking
// exactly the steps it takes without it.
#include <mmbal/balance/detail/cost_classes.hpp>
#include <mmbal/balance/karmarkar_karp.hpp>
#include <mmbal/balance/lpt.hpp>
#include <mmbal/balance/refine.hpp>
#include <mmbal/core/rng.hpp>
#include <mmbal/cost/functions.hpp>

#include <catch2/catch.hpp>

#include "random_inputs.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <span>
#include <vector>

using namespace mmbal;

namespace {

/// `n` weights drawn from `sizes` distinct values (multiples of 4 in [0, 4 · spread]).
std::vector<length_t> few_sizes(rng_engine& g, std::size_t n, std::size_t sizes, length_t spread) {
  std::vector<length_t> values(sizes);
  for (auto& v : values) v = 4 * static_cast<length_t>(uniform_below(g, spread + 1));
  std::vector<length_t> w(n);
  for (auto& x : w) x = values[uniform_below(g, sizes)];
  return w;
}

}  // namespace

TEST_CASE("cost_classes: off unless the costs are few distinct integers below the limit", "[cost_classes]") {
  using balance::detail::cost_classes;
  const std::vector<double> few{3, 0, 7, 3};
  CHECK(cost_classes(few, 2, true).on());
  CHECK_FALSE(cost_classes(few, 2, false).on());  // the caller found a non-integral cost
  CHECK_FALSE(cost_classes(std::vector<double>{3, cost_classes::max_cost}, 2, true).on());
  std::vector<double> many(cost_classes::max_classes);
  for (std::size_t i = 0; i < many.size(); ++i) many[i] = static_cast<double>(2 * i);
  CHECK(cost_classes(many, 2, true).on());  // exactly the most classes
  many.push_back(1);
  CHECK_FALSE(cost_classes(many, 2, true).on());
}

TEST_CASE("cost_classes: from lengths as from doubles; hold gives a bin what add gives per unit", "[cost_classes]") {
  using balance::detail::cost_classes;
  rng_engine g(92);
  for (int round = 0; round < 300; ++round) {
    const rank_t bins = 1 + static_cast<rank_t>(uniform_below(g, 9));
    const std::vector<length_t> w =
        few_sizes(g, 1 + uniform_below(g, 400), 1 + uniform_below(g, 200), 300);  // up to 200 classes: every word
    const std::vector<double> cost(w.begin(), w.end());
    cost_classes by_unit(cost, bins, true);
    cost_classes by_bin(w, *std::max_element(w.begin(), w.end()), bins);
    REQUIRE(by_unit.on());
    REQUIRE(by_bin.on());
    std::vector<std::vector<length_t>> held(bins);
    for (const length_t l : w) {
      const auto b = static_cast<rank_t>(uniform_below(g, bins));
      held[b].push_back(l);
      by_unit.add(b, static_cast<double>(l));
    }
    for (rank_t b = 0; b < bins; ++b) {
      std::sort(held[b].begin(), held[b].end());
      by_bin.hold(b, held[b], [](length_t l) { return l; });
      const auto x = by_unit.held(b), y = by_bin.held(b);
      REQUIRE(std::equal(x.begin(), x.end(), y.begin()));
      for (std::uint32_t word = 0; word < cost_classes::words; ++word)  // and the classes mean the same costs
        for (std::uint64_t bits = y[word]; bits != 0; bits &= bits - 1) {
          const auto j = 64 * word + static_cast<std::uint32_t>(std::countr_zero(bits));
          REQUIRE(by_bin.value(j) == by_unit.value(j));
        }
    }
  }
}

TEST_CASE("class_filter: admits a partner exactly when a move or swap fits its gap (brute force)", "[cost_classes]") {
  using balance::detail::class_filter;
  using balance::detail::cost_classes;
  rng_engine g(91);
  std::uint64_t admitted = 0, rejected = 0;
  for (int round = 0; round < 2000; ++round) {
    // Few units per bin, so that whether a partner fits often hangs on one pair of units.
    const std::size_t sizes = 1 + uniform_below(g, round % 3 == 0 ? 250 : 12);
    const rank_t bins = 2 + static_cast<rank_t>(uniform_below(g, 6));
    const std::vector<length_t> w = few_sizes(g, bins * (1 + uniform_below(g, 4)), sizes, 60);
    const std::vector<double> cost(w.begin(), w.end());
    cost_classes classes(cost, bins, true);
    REQUIRE(classes.on());
    std::vector<std::vector<double>> held(bins);
    for (const double c : cost) {
      const auto b = static_cast<rank_t>(uniform_below(g, bins));
      held[b].push_back(c);
      classes.add(b, c);
    }
    const rank_t h = 0;
    double g_max = 4.0 * static_cast<double>(uniform_below(g, 30)) + static_cast<double>(uniform_below(g, 4));
    class_filter filter;
    filter.build(classes, h, g_max);
    for (rank_t t = 1; t < bins; ++t) {  // gaps that only shrink, as partners come in increasing load
      const double gap = g_max - static_cast<double>(uniform_below(g, 9));
      g_max = gap;
      bool fits = false;  // some unit a of h and b of t (or no unit: a move) with 0 < a − b < gap
      for (const double a : held[h]) {
        fits = fits || (a > 0 && a < gap);
        for (const double b : held[t]) fits = fits || (a - b > 0 && a - b < gap);
      }
      CHECK(filter.admits(classes, t, gap) == fits);
      (fits ? admitted : rejected) += 1;
    }
  }
  CHECK(admitted > 1000);  // both answers are exercised
  CHECK(rejected > 1000);
}

TEST_CASE("refine: the cost-class filter takes exactly the steps of the full partner scan", "[cost_classes]") {
  rng_engine g(92);
  std::vector<std::uint64_t> groups;
  std::uint64_t moved = 0;
  for (int round = 0; round < 120; ++round) {
    const rank_t bins = 64 + static_cast<rank_t>(uniform_below(g, 48));  // the filter runs from 64 bins on
    const std::size_t n = bins * (1 + uniform_below(g, 16));
    const std::vector<length_t> w = few_sizes(g, n, 2 + uniform_below(g, 160), 400 + uniform_below(g, 2000));
    const balance::constraints limits = test::random_limits(g, static_cast<std::size_t>(round), n, bins, groups, [&] {
      const assignment a = balance::lpt{}(w, bins, cost::tokens{});
      double m = 0;
      for (const double l : bin_loads(a, w, cost::tokens{})) m = std::max(m, l);
      return m;
    });
    // Starts from `lpt` and from `kk` (which takes only free or equal counts, no groups).
    const bool kk_start = round % 2 == 1 && limits.counts.kind != balance::count_cap::mode::fixed &&
                          limits.groups.empty() && !limits.capacity;
    const assignment start = kk_start ? balance::karmarkar_karp{}(w, bins, cost::tokens{}, limits)
                                      : balance::lpt{}(w, bins, cost::tokens{}, limits);
    balance::refine_options scan_all;
    scan_all.cost_class_filter = false;
    const assignment reference = balance::refine(w, start, cost::tokens{}, limits, scan_all);
    const assignment filtered = balance::refine(w, start, cost::tokens{}, limits);
    REQUIRE(filtered.where == reference.where);
    for (std::size_t i = 0; i < n; ++i)
      moved += static_cast<std::uint64_t>(reference.where[i].rank != start.where[i].rank);
  }
  CHECK(moved > 1000);  // the searches did take steps
}
