// The three-level bitmap of refine's load order (core/detail/bitmap_set.hpp) against std::set
// under random inserts and erases: successor from every probe and the maximum agree.

#include <mmbal/core/detail/bitmap_set.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <set>

TEST_CASE("bitmap_set: successor and max equal std::set's under random inserts and erases", "[core]") {
  std::mt19937_64 g(37);
  // Universes around the word boundaries of every level (64, 4,096, 262,144 bits) and beyond.
  for (const std::uint64_t universe : {1ull, 63ull, 64ull, 65ull, 4095ull, 4097ull, 262145ull, 600000ull}) {
    mmbal::detail::bitmap_set set(universe);
    std::set<std::uint64_t> reference;
    CHECK(set.max() == mmbal::detail::bitmap_set::none);
    CHECK(set.successor(0) == mmbal::detail::bitmap_set::none);
    for (int step = 0; step < 3000; ++step) {
      // Clustered values (long empty stretches between them), so the upper levels are exercised.
      const std::uint64_t x = (g() % 2 == 0 ? g() % 8 : g() % universe) * (universe > 4096 ? 61 : 1) % universe;
      if (reference.count(x) != 0) {
        set.erase(x);
        reference.erase(x);
      } else {
        set.insert(x);
        reference.insert(x);
      }
      REQUIRE(set.max() == (reference.empty() ? mmbal::detail::bitmap_set::none : *reference.rbegin()));
      for (int probe = 0; probe < 4; ++probe) {
        const std::uint64_t from = probe == 0 ? 0 : g() % (universe + 2);
        const auto it = reference.lower_bound(from);
        REQUIRE(set.successor(from) == (it == reference.end() ? mmbal::detail::bitmap_set::none : *it));
      }
    }
    // Walking the whole set by successors returns it in order.
    std::uint64_t at = 0;
    for (const std::uint64_t x : reference) {
      REQUIRE(set.successor(at) == x);
      at = x + 1;
    }
    CHECK(set.successor(at) == mmbal::detail::bitmap_set::none);
  }
}
