// The pipeline model: Cornstarch's backward rules, stage times recomputed by hand, and the
// per-rank micro-batches of the existing split.
#include <mmbal/pipeline/model.hpp>
#include <mmbal/workload/generators.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

using namespace mmbal::pipeline;
using mmbal::pipeline::pipeline_module;

namespace {

pipeline_module make(std::string phase, double share, bool trainable,
                     mmbal::cost::any_batch_cost c = mmbal::cost::tokens{}) {
  pipeline_module m;
  m.name = phase;
  m.kind = phase == "llm" ? module_kind::llm : module_kind::encoder;
  m.phase = std::move(phase);
  m.share = share;
  m.cost = c;
  m.trainable = trainable;
  return m;
}

}  // namespace

TEST_CASE("backward factors follow Cornstarch 4.2") {
  pipeline_model m;
  // stage 0: frozen encoder, trainable projector; stage 1: frozen LLM; stage 2: trainable LLM
  m.stages = {
      {{make("image", 1, false), make("image", 0.01, true)}}, {{make("llm", 0.5, false)}}, {{make("llm", 0.5, true)}}};
  CHECK(backward_factors(m) == std::vector<std::vector<double>>{{0, 2}, {1}, {2}});
  m.recompute = true;
  CHECK(backward_factors(m) == std::vector<std::vector<double>>{{0, 3}, {2}, {3}});
  // all frozen: nothing needs a gradient
  pipeline_model f;
  f.stages = {{{make("image", 1, false)}}, {{make("llm", 1, false)}}};
  CHECK(backward_factors(f) == std::vector<std::vector<double>>{{0}, {0}});
}

TEST_CASE("backward factors follow the data: encoders of other modalities are parallel branches") {
  // A trainable image encoder and a frozen audio encoder on one stage: the audio encoder's
  // input is raw features, so it needs no backward whichever is listed first (it got 1 when
  // listed second).
  for (const bool image_first : {true, false}) {
    pipeline_model m;
    const pipeline_module image = make("image", 1, true), audio = make("audio", 1, false);
    m.stages = {{image_first ? std::vector{image, audio} : std::vector{audio, image}}, {{make("llm", 1, false)}}};
    CHECK(backward_factors(m) ==
          std::vector<std::vector<double>>{image_first ? std::vector<double>{2, 0} : std::vector<double>{0, 2}, {1}});
  }
  // Within a branch order matters: a frozen image module after a trainable one passes its
  // gradients on. A generator follows the LLM: frozen after a trainable LLM, factor 1; a frozen
  // generator of another modality than a trainable generator before it and with nothing
  // trainable upstream: 0.
  pipeline_model m;
  pipeline_module speech = make("audio", 1, true), picture = make("image", 1, false);
  speech.kind = picture.kind = module_kind::generator;
  m.stages = {{{make("image", 1, true), make("image", 1, false), make("audio", 1, false)}},
              {{make("llm", 1, false), speech, picture}}};
  CHECK(backward_factors(m) == std::vector<std::vector<double>>{{2, 1, 0}, {1, 2, 1}});
  pipeline_model frozen_trunk;
  frozen_trunk.stages = {{{make("image", 1, false), make("llm", 1, false), speech, picture}}};
  CHECK(backward_factors(frozen_trunk) == std::vector<std::vector<double>>{{0, 0, 2, 0}});
}

TEST_CASE("stage times from samples, recomputed by hand") {
  mmbal::workload w;
  const auto image = w.intern_modality("image");
  w.samples = {{0, 0, {}, {{0, 10, 10}, {image, 4, 100}}},                // llm 14, image encoder 100
               {1, 0, {}, {{0, 20, 20}}},                                 // llm 20
               {2, 1, {}, {{image, 6, 50}, {image, 2, 30}, {0, 5, 5}}}};  // llm 13, encoder 50 + 30
  pipeline_model m;
  m.stages = {{{make("image", 2.0, false, mmbal::cost::attention{1, 0.01}), make("llm", 0.1, true)}},
              {{make("llm", 0.9, false)}},
              {{make("audio", 1.0, true)}}};  // a modality the workload lacks: no items
  const std::vector<std::vector<std::uint32_t>> mbs{{0, 1}, {2}};
  const stage_times t = stage_times_from_samples(m, w, mbs);
  REQUIRE(t.stages == 3);
  REQUIRE(t.micro_batches == 2);
  // mb 0: encoder attention(100) = 100 + 0.01·10000 = 200, ×2 = 400; projector-like llm 0.1·34
  CHECK(t.forward_time(0, 0) == Approx(400 + 3.4));
  CHECK(t.backward_time(0, 0) == Approx(0 * 400 + 2 * 3.4));
  CHECK(t.forward_time(1, 0) == Approx(0.9 * 34));
  CHECK(t.backward_time(1, 0) == Approx(1 * 0.9 * 34));  // frozen after a trainable module
  CHECK(t.forward_time(2, 0) == 0);
  // mb 1: encoder (50 + 25) + (30 + 9) = 114, ×2 = 228; llm 13
  CHECK(t.forward_time(0, 1) == Approx(228 + 1.3));
  CHECK(t.forward_time(1, 1) == Approx(0.9 * 13));
  CHECK_THROWS_AS(stage_times_from_samples(m, w, std::vector<std::vector<std::uint32_t>>{{7}}), mmbal::invalid_input);
  CHECK_THROWS_WITH(stage_times_from_samples(m, w, std::vector<std::vector<std::uint32_t>>{{0, 1}, {1}}),
                    Catch::Contains("sample 1 is in two micro-batches"));
  CHECK_THROWS_AS(stage_times_from_samples(pipeline_model{}, w, mbs), mmbal::invalid_input);
}

TEST_CASE("rank micro-batches keep samples on their rank and cover each once") {
  mmbal::generator_options o;
  o.samples = 300;
  o.ranks = 4;
  o.seed = 2;
  const mmbal::workload w = mmbal::generate(mmbal::family::omni, o, mmbal::default_length_data());
  const auto mbs = rank_micro_batches(w, 4, 8, mmbal::cost::tokens{});
  REQUIRE(mbs.size() == 4);
  std::vector<int> seen(w.samples.size(), 0);
  for (std::uint32_t r = 0; r < 4; ++r) {
    REQUIRE(mbs[r].size() == 8);
    for (const auto& mb : mbs[r])
      for (std::uint32_t i : mb) {
        CHECK(w.samples[i].rank == r);
        ++seen[i];
      }
  }
  CHECK(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
}
