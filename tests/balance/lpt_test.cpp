#include <mmbal/balance/lpt.hpp>
#include <mmbal/cost/functions.hpp>
#include <mmbal/cost/metrics.hpp>

#include <catch2/catch.hpp>

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
