// Factories and accessors of the core types keep their invariants (docs/DESIGN.md §3): what
// would break one — a bin out of range, a duplicate or missing id, a wrong size, a slot hole —
// is rejected with mmbal::invalid_input naming the value, never UB or std::out_of_range.
#include <mmbal/balance/micro_batches.hpp>
#include <mmbal/context/distribute.hpp>
#include <mmbal/core/rng.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/mask/bitfield.hpp>
#include <mmbal/mask/block_mask.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

using Catch::Matchers::Contains;
using mmbal::assignment;
using mmbal::invalid_input;
using mmbal::item_id;
using mmbal::location;
using mmbal::partition;

namespace {

// The message of the invalid_input `f` throws; fails the test when it throws anything else
// (std::out_of_range included) or nothing.
template <class F>
std::string invalid_message(F&& f) {
  try {
    f();
  } catch (const invalid_input& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL("threw a different exception: " << e.what());
  }
  FAIL("did not throw");
  return {};
}

}  // namespace

TEST_CASE("partition::bin_sizes and validate reject a bin out of range", "[core][types]") {
  const partition p{3, {0, 2, 3, 1}};
  CHECK_THAT(invalid_message([&] { (void)p.bin_sizes(); }), Contains("item 2") && Contains("bin 3"));
  CHECK_THAT(invalid_message([&] { p.validate(); }), Contains("item 2") && Contains(">= bins 3"));
  const partition ok{3, {0, 2, 2, 1}};
  CHECK(ok.bin_sizes() == std::vector<std::uint32_t>{1, 1, 2});
  CHECK_NOTHROW(ok.validate());
}

TEST_CASE("assignment::from_placement rejects what would break the assignment", "[core][types]") {
  const partition p{2, {0, 1, 0, 1}};
  SECTION("bin out of range") {
    const partition bad{2, {0, 1, 5, 1}};
    CHECK_THAT(invalid_message([&] {
                 (void)assignment::from_placement(bad, std::vector<item_id>{0, 1, 2, 3});
               }),
               Contains("item 2") && Contains("bin 5"));
    CHECK_THAT(invalid_message([&] { (void)assignment::from_partition(bad); }), Contains("bin 5"));
  }
  SECTION("duplicate id (and the id it leaves missing)") {
    CHECK_THAT(invalid_message([&] {
                 (void)assignment::from_placement(p, std::vector<item_id>{0, 2, 2, 3});
               }),
               Contains("item 2 twice") && Contains("item 1 is missing"));
  }
  SECTION("missing id: the duplicate comes before the hole") {
    CHECK_THAT(invalid_message([&] {
                 (void)assignment::from_placement(p, std::vector<item_id>{3, 3, 1, 0});
               }),
               Contains("item 3 twice") && Contains("item 2 is missing"));
  }
  SECTION("id beyond the item count") {
    CHECK_THAT(invalid_message([&] {
                 (void)assignment::from_placement(p, std::vector<item_id>{0, 1, 2, 4});
               }),
               Contains("names item 4") && Contains("only 4 items"));
  }
  SECTION("wrong size") {
    CHECK_THAT(invalid_message([&] {
                 (void)assignment::from_placement(p, std::vector<item_id>{0, 1, 2});
               }),
               Contains("3 items") && Contains("partition has 4"));
    CHECK_THAT(invalid_message([&] {
                 (void)assignment::from_placement(p, std::vector<item_id>{0, 1, 2, 3, 0});
               }),
               Contains("5 items"));
  }
}

TEST_CASE("assignment::from_placement: slots follow the placement order in every bin", "[core][types]") {
  mmbal::rng_engine rng = mmbal::make_rng(7, 0);
  for (int trial = 0; trial < 50; ++trial) {
    const std::uint32_t bins = 1 + static_cast<std::uint32_t>(rng() % 6);
    const std::size_t n = rng() % 40;
    partition p{bins, std::vector<mmbal::rank_t>(n)};
    for (auto& b : p.bin_of) b = static_cast<mmbal::rank_t>(rng() % bins);
    std::vector<item_id> order(n);
    std::iota(order.begin(), order.end(), item_id{0});
    std::shuffle(order.begin(), order.end(), rng);
    const assignment a = assignment::from_placement(p, order);
    REQUIRE_NOTHROW(a.validate());
    REQUIRE(a.to_partition().bin_of == p.bin_of);
    // Independent re-computation: the k-th item of bin b in `order` has slot k.
    std::vector<std::uint32_t> seen(bins, 0);
    for (item_id i : order) REQUIRE(a.where[i] == location{p.bin_of[i], seen[p.bin_of[i]]++});
    const auto by_bin = a.items_by_bin();
    for (mmbal::rank_t b = 0; b < bins; ++b)
      for (std::uint32_t s = 0; s < by_bin[b].size(); ++s) REQUIRE(a.where[by_bin[b][s]] == location{b, s});
  }
}

TEST_CASE("assignment::items_by_bin and validate reject broken layouts", "[core][types]") {
  SECTION("rank out of range") {
    const assignment a{2, {{0, 0}, {2, 0}}};
    CHECK_THAT(invalid_message([&] { (void)a.items_by_bin(); }), Contains("item 1") && Contains("rank 2"));
  }
  SECTION("duplicate location") {
    const assignment a{2, {{0, 0}, {0, 0}}};
    CHECK_THAT(invalid_message([&] { (void)a.items_by_bin(); }), Contains("item 1") && Contains("slot 0"));
  }
  SECTION("slot hole (an item missing from its bin's slots)") {
    const assignment a{1, {{0, 0}, {0, 2}}};
    CHECK_THAT(invalid_message([&] { (void)a.items_by_bin(); }), Contains("slot 2"));
    CHECK_THAT(invalid_message([&] { a.validate(); }), Contains("slot 2"));
  }
}

TEST_CASE("micro_batch_plan: cost and batches name what is out of range", "[core][types][micro_batches]") {
  using mmbal::balance::micro_batch_plan;
  micro_batch_plan plan{2, 2, {{0, 0, 0}, {1, 1, 0}}, {1, 2, 3, 4}};
  CHECK(plan.cost(1, 1) == 4);
  CHECK(plan.batches().size() == 4);
  CHECK_THAT(invalid_message([&] { (void)plan.cost(2, 0); }), Contains("rank 2"));
  CHECK_THAT(invalid_message([&] { (void)plan.cost(0, 2); }), Contains("micro-batch 2"));
  plan.costs.pop_back();
  CHECK_THAT(invalid_message([&] { (void)plan.cost(0, 0); }), Contains("3 costs"));
  plan.costs.push_back(4);
  plan.where[1].micro_batch = 2;
  CHECK_THAT(invalid_message([&] { (void)plan.batches(); }), Contains("item 1") && Contains("micro-batch 2"));
  plan.where[1] = {0, 0, 0};
  CHECK_THAT(invalid_message([&] { (void)plan.batches(); }), Contains("item 1") && Contains("slot 0"));
}

TEST_CASE("accessors with an index name it instead of leaking std::out_of_range", "[core][types]") {
  mmbal::token_distribution d;
  d.ranks = 1;
  d.rank_tokens = {0};
  d.rank_offsets = {{}};
  CHECK(d.token_indices(0).empty());
  CHECK_THAT(invalid_message([&] { (void)d.token_indices(1); }), Contains("rank 1"));

  mmbal::block_mask bm;
  CHECK_THAT(invalid_message([&] { (void)bm.kind(0, 0); }), Contains("query block 0"));

  const std::vector<mmbal::document_layout> docs{{10, {}}};
  const mmbal::bitfield_mask mask =
      mmbal::build_bitfield_mask(std::span<const mmbal::document_layout>(docs), mmbal::bit_assignment::span);
  CHECK(mask.document_runs(0).size() >= 1);
  CHECK_THAT(invalid_message([&] { (void)mask.document_runs(1); }), Contains("document 1"));
}
