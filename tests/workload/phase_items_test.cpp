// Per-phase views of a workload: items, origins, bytes and group ids.
#include <mmbal/workload/sample.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <vector>

namespace {
mmbal::workload small_workload() {
  mmbal::workload w;
  const auto image = w.intern_modality("image");
  const auto audio = w.intern_modality("audio");
  w.samples.push_back({10, 0, 7, {{mmbal::text_modality, 5, 5}, {image, 256, 1025}, {mmbal::text_modality, 3, 3}}});
  w.samples.push_back({11, 1, std::nullopt, {{audio, 100, 1500}}});
  w.samples.push_back({12, 1, 7, {{image, 64, 256}, {audio, 25, 50}, {image, 16, 64}}});
  return w;
}
}  // namespace

TEST_CASE("phase items follow docs/DESIGN.md §3") {
  const auto w = small_workload();
  const auto llm = mmbal::phase_items_of(w, "llm");
  CHECK(llm.weights == std::vector<mmbal::length_t>{264, 100, 105});
  CHECK(llm.origin == std::vector<mmbal::rank_t>{0, 1, 1});
  CHECK(llm.sample_of == std::vector<std::uint32_t>{0, 1, 2});
  const auto image = mmbal::phase_items_of(w, "image");
  CHECK(image.weights == std::vector<mmbal::length_t>{1025, 256, 64});  // encoder lengths, input order
  CHECK(image.sample_of == std::vector<std::uint32_t>{0, 2, 2});
  CHECK(image.segment_of == std::vector<std::uint32_t>{1, 0, 2});
  CHECK(image.origin == std::vector<mmbal::rank_t>{0, 1, 1});
  CHECK_THROWS_WITH(mmbal::phase_items_of(w, "video"), Catch::Contains("video") && Catch::Contains("image"));
  CHECK_THROWS_AS(mmbal::phase_items_of(w, "text"), mmbal::invalid_input);
}

TEST_CASE("phase item bytes and group ids") {
  const auto w = small_workload();
  const auto audio = mmbal::phase_items_of(w, "audio");
  CHECK(mmbal::phase_item_bytes(audio, 2, "audio") == std::vector<std::uint64_t>{3000, 100});
  mmbal::phase_items huge;
  huge.weights = {std::numeric_limits<mmbal::length_t>::max()};
  CHECK_THROWS_WITH(mmbal::phase_item_bytes(huge, std::uint64_t{1} << 40, "llm"), Catch::Contains("item 0"));

  const auto llm = mmbal::phase_items_of(w, "llm");
  const auto groups = mmbal::phase_group_ids(llm, "llm");
  REQUIRE(groups.size() == 3);
  CHECK(groups[0] == 7);
  CHECK(groups[2] == 7);
  CHECK(groups[1] == (std::uint64_t{1} << 63) + 1);  // an id of its own
  // Without any group in the workload the per-item groups are not stored at all.
  auto ungrouped = w;
  for (auto& s : ungrouped.samples) s.group.reset();
  CHECK(mmbal::phase_items_of(ungrouped, "llm").group.empty());
  CHECK(mmbal::phase_group_ids(mmbal::phase_items_of(ungrouped, "llm"), "llm").empty());
  auto no_groups = llm;
  for (auto& g : no_groups.group) g.reset();
  CHECK(mmbal::phase_group_ids(no_groups, "llm").empty());
  auto too_big = llm;
  too_big.group[0] = std::uint64_t{1} << 63;
  CHECK_THROWS_WITH(mmbal::phase_group_ids(too_big, "llm"), Catch::Contains("2^63"));
}
