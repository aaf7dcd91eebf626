// Metadata serialization: round trip through the flat u32 wire format, and malformed input.
#include <mmbal/core/rng.hpp>
#include <mmbal/transport/metadata.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

using namespace mmbal::transport;

namespace {

mmbal::workload random_local(std::uint64_t seed) {
  auto g = mmbal::make_rng(seed, 4);
  mmbal::workload w;
  const auto image = w.intern_modality("image");
  const auto audio = w.intern_modality(seed % 2 ? "audio" : "a-much-longer-modality-name");
  const auto n = mmbal::uniform_below(g, 12);
  for (std::uint64_t i = 0; i < n; ++i) {
    mmbal::sample s;
    s.id = (std::uint64_t{1} << 40) * (seed + 1) + i;  // ids above 2^32 survive
    if (mmbal::uniform01(g) < 0.5) s.group = mmbal::uniform_below(g, UINT64_MAX);
    const auto segs = mmbal::uniform_below(g, 6);
    for (std::uint64_t k = 0; k < segs; ++k) {
      const mmbal::modality_id m = k % 3 == 0 ? mmbal::text_modality : (k % 3 == 1 ? image : audio);
      s.segments.push_back({m, static_cast<mmbal::length_t>(mmbal::uniform_below(g, 5000)),
                            static_cast<mmbal::length_t>(mmbal::uniform_below(g, UINT32_MAX))});
    }
    w.samples.push_back(s);
  }
  return w;
}

}  // namespace

TEST_CASE("serialize_samples / deserialize_samples round-trip rank-major") {
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    const std::uint32_t ranks = 1 + seed % 4;
    std::vector<std::uint32_t> words;
    std::vector<std::uint64_t> offsets{0};
    std::vector<mmbal::workload> locals;
    for (std::uint32_t r = 0; r < ranks; ++r) {
      locals.push_back(random_local(seed * 10 + r));
      const auto block = serialize_samples(locals.back());
      words.insert(words.end(), block.begin(), block.end());
      offsets.push_back(words.size());
    }
    const auto merged = deserialize_samples(words, offsets);
    std::size_t k = 0;
    for (std::uint32_t r = 0; r < ranks; ++r)
      for (const auto& s : locals[r].samples) {
        REQUIRE(k < merged.samples.size());
        const auto& m = merged.samples[k++];
        CHECK(m.rank == r);
        CHECK(m.id == s.id);
        CHECK(m.group == s.group);
        REQUIRE(m.segments.size() == s.segments.size());
        for (std::size_t j = 0; j < s.segments.size(); ++j) {
          CHECK(merged.modalities[m.segments[j].modality] == locals[r].modalities[s.segments[j].modality]);
          CHECK(m.segments[j].llm_tokens == s.segments[j].llm_tokens);
          CHECK(m.segments[j].encoder_len == s.segments[j].encoder_len);
        }
      }
    CHECK(k == merged.samples.size());
  }
}

TEST_CASE("deserialize_samples rejects malformed blocks, naming the rank") {
  mmbal::workload w;
  const auto image = w.intern_modality("image");
  w.samples.push_back({7, 0, std::nullopt, {{image, 3, 4}}});
  const auto good = serialize_samples(w);
  std::vector<std::uint32_t> two = good;
  two.insert(two.end(), good.begin(), good.end());
  const std::vector<std::uint64_t> offs{0, good.size(), two.size()};
  REQUIRE(deserialize_samples(two, offs).samples.size() == 2);

  auto bad = two;
  bad[good.size()] = 12345;  // rank 1's magic
  CHECK_THROWS_WITH(deserialize_samples(bad, offs), Catch::Contains("rank 1") && Catch::Contains("magic"));
  bad = two;
  bad.pop_back();  // truncated
  CHECK_THROWS_WITH(deserialize_samples(bad, std::vector<std::uint64_t>{0, good.size(), bad.size()}),
                    Catch::Contains("truncated"));
  bad = two;
  bad.push_back(0);  // trailing word
  CHECK_THROWS_WITH(deserialize_samples(bad, std::vector<std::uint64_t>{0, good.size(), bad.size()}),
                    Catch::Contains("trailing"));
  bad = two;
  bad[bad.size() - 3] = 9;  // modality id out of range
  CHECK_THROWS_WITH(deserialize_samples(bad, offs), Catch::Contains("modality id 9"));
  CHECK_THROWS_AS(deserialize_samples(two, std::vector<std::uint64_t>{0, 3}), mmbal::invalid_input);
  CHECK_THROWS_AS(deserialize_samples(two, std::vector<std::uint64_t>{0, two.size(), 1, two.size()}),
                  mmbal::invalid_input);
  mmbal::workload broken;
  broken.samples.push_back({1, 0, std::nullopt, {{5, 1, 1}}});
  CHECK_THROWS_AS(serialize_samples(broken), mmbal::invalid_input);
  CHECK(deserialize_samples({}, std::vector<std::uint64_t>{0}).samples.empty());
}

TEST_CASE("metadata: a corrupt count is never a reservation", "[transport][metadata]") {
  // A segment count of 0xFFFFFFFF reserved 48 GB before the truncation was noticed.
  const std::vector<std::uint32_t> words{metadata_magic, 0, 1, 7, 0, 0, 0, 0, 0xFFFFFFFFu};
  const std::vector<std::uint64_t> offsets{0, words.size()};
  REQUIRE_THROWS_WITH(deserialize_samples(words, offsets), Catch::Contains("truncated"));
  const std::vector<std::uint32_t> names{metadata_magic, 0xFFFFFFFFu};
  const std::vector<std::uint64_t> name_offsets{0, names.size()};
  REQUIRE_THROWS_WITH(deserialize_samples(names, name_offsets), Catch::Contains("truncated"));
}
