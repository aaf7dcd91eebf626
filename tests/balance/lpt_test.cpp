#include "conformance.hpp"

#include <mmbal/balance/lpt.hpp>
#include <mmbal/core/detail/least_loaded.hpp>
#include <mmbal/core/rng.hpp>
#include <mmbal/cost/functions.hpp>
#include <mmbal/cost/metrics.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

using namespace mmbal;

TEST_CASE("lpt: textbook instance", "[balance][lpt]") {
  // Graham's worst case for d = 2: {3,3,2,2,2} — LPT gives 7, the optimum is 6.
  const std::vector<length_t> w{3, 3, 2, 2, 2};
  const assignment a = balance::lpt{}(w, 2, cost::tokens{});
  a.validate();
  const auto loads = bin_loads(a, w, cost::tokens{});
  CHECK(std::max(loads[0], loads[1]) == 7.0);
  // Heaviest first, ties by id: item 0 → bin 0, item 1 → bin 1, item 2 → bin 0 (3 = 3, bin 0).
  CHECK(a.where[0] == location{0, 0});
  CHECK(a.where[1] == location{1, 0});
  CHECK(a.where[2] == location{0, 1});
}

namespace {

/// Places of `deal_least_loaded_packed` over `adds`, with runs of equal adds reported or not.
std::vector<rank_t> dealt(const std::vector<std::uint64_t>& adds, rank_t bins, bool runs) {
  std::vector<rank_t> where(adds.size());
  auto add = [&](std::size_t k) { return adds[k]; };
  auto place = [&](std::size_t k, rank_t b) { where[k] = b; };
  if (runs)
    detail::deal_least_loaded_packed(adds.size(), bins, add, place, [&](std::size_t k, std::size_t e) {
      return std::all_of(adds.begin() + static_cast<std::ptrdiff_t>(k),
                         adds.begin() + static_cast<std::ptrdiff_t>(e) + 1,
                         [&](std::uint64_t x) { return x == adds[k]; });
    });
  else
    detail::deal_least_loaded_packed(adds.size(), bins, add, place);
  return where;
}

}  // namespace

TEST_CASE("least-loaded dealing: runs of equal adds are placed exactly as item by item", "[balance][lpt]") {
  // Runs from 1 to 5·bins items, steps from 0 to far above the load spread (bins joining over
  // many levels), in any order of steps (not only descending, as LPT's are).
  std::size_t bulk_runs = 0;
  for (std::uint64_t seed = 0; seed < 300; ++seed) {
    rng_engine g = make_rng(seed, 0x1ea57);
    const auto bins = static_cast<rank_t>(1 + uniform_below(g, seed % 3 == 0 ? 300 : 40));
    const std::size_t min_run = detail::min_equal_run(bins);
    std::vector<std::uint64_t> adds;
    while (adds.size() < 4000) {
      const std::uint64_t step = uniform_below(g, 8) == 0 ? 0 : uniform_below(g, seed % 2 == 0 ? 50 : 100000);
      const std::size_t run = 1 + uniform_below(g, 5 * std::size_t{bins} + 80);
      bulk_runs += run >= min_run;
      adds.insert(adds.end(), run, step);
    }
    INFO("seed " << seed << " bins " << bins);
    CHECK(dealt(adds, bins, true) == dealt(adds, bins, false));
  }
  CHECK(bulk_runs > 300);  // the run path did run
}

TEST_CASE("lpt: few distinct lengths (long runs of equal items) equal the O(n d) reference", "[balance][lpt]") {
  for (std::uint64_t seed = 0; seed < 60; ++seed) {
    rng_engine g = make_rng(seed, 0x1ea58);
    const auto bins = static_cast<rank_t>(2 + uniform_below(g, 40));
    std::vector<length_t> lengths(1 + uniform_below(g, 6));
    for (length_t& l : lengths)
      l = static_cast<length_t>(uniform_below(g, 3) == 0 ? 1 + uniform_below(g, 60000) : 1 + uniform_below(g, 2000));
    std::vector<length_t> w(200 + uniform_below(g, 3000));
    for (length_t& x : w) x = lengths[uniform_below(g, lengths.size())];
    INFO("seed " << seed << " bins " << bins << " n " << w.size());
    CHECK(balance::lpt{}(w, bins, cost::tokens{}) == test::reference_greedy(w, bins, cost::tokens{}, true));
  }
}
