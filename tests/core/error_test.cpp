#include <mmbal/core/error.hpp>
#include <mmbal/core/types.hpp>

#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>

TEST_CASE("invalid_input is catchable as mmbal::error and std::invalid_argument") {
  try {
    mmbal::detail::throw_invalid("value ", 42, " is bad");
    FAIL("no throw");
  } catch (const mmbal::error& e) {
    CHECK(std::string(e.message()) == "value 42 is bad");
  }
  CHECK_THROWS_AS(mmbal::detail::throw_invalid("x"), std::invalid_argument);
  CHECK_THROWS_AS(mmbal::detail::throw_runtime("x"), std::runtime_error);
  CHECK_THROWS_AS(mmbal::detail::throw_runtime("x"), mmbal::runtime_failure);
}

TEST_CASE("checked_ranks accepts 1..max_ranks and names the count otherwise") {
  CHECK(mmbal::checked_ranks(1, "ranks") == 1);
  CHECK(mmbal::checked_ranks(mmbal::max_ranks, "ranks") == mmbal::max_ranks);
  CHECK_THROWS_WITH(mmbal::checked_ranks(0, "--ranks"), "--ranks = 0 (need at least one rank)");
  CHECK_THROWS_WITH(mmbal::checked_ranks(std::uint64_t{mmbal::max_ranks} + 1, "G"),
                    "G = 16777217 exceeds 16777216, the most ranks a plan may have");
  CHECK_THROWS_AS(mmbal::checked_ranks(std::uint64_t{1} << 40, "x"), mmbal::invalid_input);
  // A hand-made assignment or partition with too many bins is named before O(bins) memory.
  const mmbal::assignment a{mmbal::rank_t{1} << 31, {{0, 0}}};
  CHECK_THROWS_WITH(a.validate(), Catch::Contains("assignment: bins = 2147483648 exceeds"));
  const mmbal::partition p{mmbal::rank_t{1} << 31, {0}};
  CHECK_THROWS_WITH(p.bin_sizes(), Catch::Contains("partition: bins = 2147483648 exceeds"));
}

TEST_CASE("assignment round-trips through partition and validates") {
  mmbal::partition p{3, {2, 0, 2, 1, 0}};
  const mmbal::item_id order[] = {4, 3, 2, 1, 0};
  const auto a = mmbal::assignment::from_placement(p, order);
  CHECK_NOTHROW(a.validate());
  CHECK(a.to_partition().bin_of == p.bin_of);
  CHECK(a.where[4] == mmbal::location{0, 0});
  CHECK(a.where[1] == mmbal::location{0, 1});
  CHECK(a.where[2] == mmbal::location{2, 0});
  const auto bins = a.items_by_bin();
  REQUIRE(bins.size() == 3);
  CHECK(bins[0] == std::vector<mmbal::item_id>{4, 1});
  CHECK(bins[1] == std::vector<mmbal::item_id>{3});
  CHECK(bins[2] == std::vector<mmbal::item_id>{2, 0});
  CHECK(p.bin_sizes() == std::vector<std::uint32_t>{2, 1, 2});

  auto bad = a;
  bad.where[0] = bad.where[2];  // two items in one slot
  CHECK_THROWS_AS(bad.validate(), mmbal::invalid_input);
  bad = a;
  bad.where[0].rank = 3;
  CHECK_THROWS_WITH(bad.validate(), Catch::Contains("rank 3"));
}
