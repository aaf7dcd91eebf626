// refine's indexed heap (core/detail/indexed_heap.hpp) against a sorted reference under random
// updates: top and the lazy walk follow the strict (load, bin) orders.

#include <mmbal/core/detail/indexed_heap.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

namespace {

// Bins by (load, bin) ascending, or by load descending with ties by ascending bin.
std::vector<mmbal::rank_t> reference(const std::vector<double>& load, bool max) {
  std::vector<mmbal::rank_t> order(load.size());
  std::iota(order.begin(), order.end(), mmbal::rank_t{0});
  std::sort(order.begin(), order.end(), [&](mmbal::rank_t a, mmbal::rank_t b) {
    if (load[a] != load[b]) return max ? load[a] > load[b] : load[a] < load[b];
    return a < b;
  });
  return order;
}

template <bool Max>
std::vector<mmbal::rank_t> walk(mmbal::detail::indexed_heap<Max>& h, std::size_t limit) {
  std::vector<mmbal::rank_t> out;
  h.restart();
  for (mmbal::rank_t b = h.next(); b != h.none && out.size() < limit; b = h.next()) out.push_back(b);
  return out;
}

}  // namespace

TEST_CASE("indexed_heap: top and walk in (load, bin) order under updates", "[indexed_heap]") {
  std::mt19937_64 g(7);
  for (const std::size_t d : {std::size_t{1}, std::size_t{2}, std::size_t{5}, std::size_t{17}, std::size_t{300}}) {
    // Few distinct loads, so ties (broken by the bin) are common.
    std::vector<double> load(d);
    for (double& l : load) l = static_cast<double>(g() % 8);
    mmbal::detail::indexed_heap<false> lo(load);
    mmbal::detail::indexed_heap<true> hi(load);
    for (int step = 0; step < 200; ++step) {
      CAPTURE(d, step);
      const auto up = reference(load, false);
      const auto down = reference(load, true);
      REQUIRE(lo.top() == up.front());
      REQUIRE(hi.top() == down.front());
      REQUIRE(walk(lo, d) == up);  // the whole order
      REQUIRE(walk(hi, d) == down);
      for (std::size_t x = 0; x < d; ++x) {  // every bin's key is its load as of its last update
        REQUIRE(lo.key(static_cast<mmbal::rank_t>(x)) == load[x]);
        REQUIRE(hi.key(static_cast<mmbal::rank_t>(x)) == load[x]);
      }
      const std::size_t k = 1 + g() % d;  // a prefix: the walk is lazy and restartable
      REQUIRE(walk(lo, k) == std::vector<mmbal::rank_t>(up.begin(), up.begin() + static_cast<std::ptrdiff_t>(k)));
      // Change two loads, then update them one by one (the keys live in the heap).
      const auto a = static_cast<mmbal::rank_t>(g() % d), b = static_cast<mmbal::rank_t>(g() % d);
      load[a] = static_cast<double>(g() % 8);
      load[b] = static_cast<double>(g() % 8) + 0.5 * static_cast<double>(g() % 2);
      for (const mmbal::rank_t x : {a, b}) {
        lo.update(x, load[x]);
        hi.update(x, load[x]);
      }
    }
  }
}
