// Per-phase views of a workload: items, origins, bytes and group ids.
#include <mmbal/core/rng.hpp>
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
  // Each product fits, but the phase's sum would wrap the traffic counts: refused at 2^57 + 1,
  // taken at exactly 2^57.
  mmbal::phase_items many;
  many.weights.assign(3, std::numeric_limits<mmbal::length_t>::max());
  CHECK_THROWS_WITH(mmbal::phase_item_bytes(many, std::uint64_t{1} << 32, "image"),
                    Catch::Contains("phase 'image': its 3 items carry more than 2^57 bytes"));
  many.weights.assign(2, 1);
  CHECK(mmbal::phase_item_bytes(many, mmbal::max_phase_bytes / 2, "image") ==
        std::vector<std::uint64_t>{mmbal::max_phase_bytes / 2, mmbal::max_phase_bytes / 2});
  many.weights.push_back(1);
  CHECK_THROWS_AS(mmbal::phase_item_bytes(many, mmbal::max_phase_bytes / 2, "image"), mmbal::invalid_input);
  // The same limits with at most 2^32 - 1 bytes per token (no product can wrap; the sum is
  // checked as bytes per token × Σ weights): exactly 2^57 taken, one token more refused.
  many.weights = {1u << 25, 1u << 25};
  CHECK(mmbal::phase_item_bytes(many, std::uint64_t{1} << 31, "image") ==
        std::vector<std::uint64_t>{std::uint64_t{1} << 56, std::uint64_t{1} << 56});
  many.weights.push_back(1);
  CHECK_THROWS_WITH(mmbal::phase_item_bytes(many, std::uint64_t{1} << 31, "image"),
                    Catch::Contains("phase 'image': its 3 items carry more than 2^57 bytes"));
  CHECK_THROWS_WITH(mmbal::phase_item_bytes(huge, std::numeric_limits<std::uint32_t>::max(), "llm"),
                    Catch::Contains("more than 2^57 bytes"));
  CHECK(mmbal::phase_item_bytes(huge, 0, "llm") == std::vector<std::uint64_t>{0});

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

TEST_CASE("collect_phase_items: one pass gives every phase's separate items") {
  auto g = mmbal::make_rng(14);
  for (int t = 0; t < 40; ++t) {
    mmbal::workload w;
    const auto image = w.intern_modality("image");
    const auto audio = w.intern_modality("audio");
    const auto video = w.intern_modality("video");  // absent from some workloads
    const auto samples = mmbal::uniform_below(g, 50);
    const bool grouped = t % 3 == 0;
    for (std::uint64_t i = 0; i < samples; ++i) {
      mmbal::sample s;
      s.id = 100 + i;
      s.rank = static_cast<mmbal::rank_t>(mmbal::uniform_below(g, 7));
      if (grouped && mmbal::uniform_below(g, 2) == 0) s.group = mmbal::uniform_below(g, 4);
      const auto segments = mmbal::uniform_below(g, 6);
      for (std::uint64_t k = 0; k < segments; ++k) {
        const mmbal::modality_id m = t % 2 ? static_cast<mmbal::modality_id>(mmbal::uniform_below(g, 3))
                                           : static_cast<mmbal::modality_id>(mmbal::uniform_below(g, 4));
        s.segments.push_back({m, static_cast<mmbal::length_t>(mmbal::uniform_below(g, 300)),
                              static_cast<mmbal::length_t>(mmbal::uniform_below(g, 900))});
      }
      w.samples.push_back(s);
    }
    // Stale contents of every sink must be replaced.
    mmbal::phase_items llm{{1, 2}, {3}, {}, {9}, {}}, img = llm, vid = llm;
    std::vector<std::uint64_t> img_tokens{5, 5, 5}, vid_tokens{7};
    const std::vector<mmbal::phase_items*> encoders{nullptr, &img, nullptr, &vid};
    const std::vector<std::vector<std::uint64_t>*> tokens{nullptr, &img_tokens, nullptr, &vid_tokens};
    mmbal::collect_phase_items(w, {.llm = &llm, .encoders = encoders, .segment_tokens = tokens});

    const auto same = [](const mmbal::phase_items& a, const mmbal::phase_items& b) {
      return a.weights == b.weights && a.origin == b.origin && a.sample_of == b.sample_of &&
             a.segment_of == b.segment_of && a.group == b.group;
    };
    CHECK(same(llm, mmbal::llm_phase_items(w)));
    CHECK(same(img, mmbal::encoder_phase_items(w, image)));
    CHECK(same(vid, mmbal::encoder_phase_items(w, video)));
    // Segment tokens: the LLM tokens of the same segments, in item order.
    const auto llm_tokens_of = [&](const mmbal::phase_items& p) {
      std::vector<std::uint64_t> v;
      for (std::size_t i = 0; i < p.size(); ++i)
        v.push_back(w.samples[p.sample_of[i]].segments[p.segment_of[i]].llm_tokens);
      return v;
    };
    CHECK(img_tokens == llm_tokens_of(img));
    CHECK(vid_tokens == llm_tokens_of(vid));
    // A subset of sinks: only audio.
    mmbal::phase_items only_audio;
    const std::vector<mmbal::phase_items*> audio_only{nullptr, nullptr, &only_audio};
    mmbal::collect_phase_items(w, {.encoders = audio_only});
    CHECK(same(only_audio, mmbal::encoder_phase_items(w, audio)));
  }
}

TEST_CASE("collect_phase_items: an over-long sample is named only when the LLM phase is asked for") {
  mmbal::workload w;
  const auto image = w.intern_modality("image");
  const mmbal::length_t big = std::numeric_limits<mmbal::length_t>::max();
  w.samples.push_back({1, 0, std::nullopt, {{image, 4, 4}}});
  w.samples.push_back({77, 0, std::nullopt, {{mmbal::text_modality, big, big}, {image, 10, 10}}});
  mmbal::phase_items llm, img;
  const std::vector<mmbal::phase_items*> encoders{nullptr, &img};
  CHECK_THROWS_WITH(mmbal::collect_phase_items(w, {.llm = &llm, .encoders = encoders}),
                    Catch::Contains("sample 77") && Catch::Contains("exceeds 2^32 - 1"));
  mmbal::collect_phase_items(w, {.encoders = encoders});
  CHECK(img.weights == std::vector<mmbal::length_t>{4, 10});
}
