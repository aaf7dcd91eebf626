// The orchestrator's concurrency tests (docs/DESIGN.md §5.5), tagged [concurrency]: plans are
// bit-identical for every thread count (also when the workload scan and the item collection
// split into chunks), into a reused orchestration, and from concurrent calls.
// A file of their own, so that the ThreadSanitizer build (scripts/tsan.sh) compiles these alone.
#include "orchestrate/support.hpp"

#include <thread>

using namespace orchestrate_test;

TEST_CASE("orchestrator: plans are bit-identical for every thread count", "[orchestrate][concurrency]") {
  const mmbal::rank_t d = 16, c = 4;
  const auto w = omni(d * 12, d, 5);
  auto with_threads = [&](unsigned threads) {
    orchestrator_options o;
    o.ranks = d;
    o.ranks_per_node = c;
    o.bytes_per_token = 2;
    o.threads = threads;
    return orchestrator(o).plan(w);
  };
  const auto serial = with_threads(1);
  REQUIRE(serial.fingerprint == orchestrator::plan_fingerprint(serial));
  for (const unsigned threads : {0u, 2u, 3u, 7u}) {
    INFO("threads " << threads);
    require_same(with_threads(threads), serial);
  }
}

TEST_CASE("orchestrator: the workload scan and item collection split into chunks give the serial plan and error",
          "[orchestrate][concurrency]") {
  // More than two chunks' worth of samples (16,384 each at least), so threads = 2 and 3 split
  // the scan and the collection of items; groups on some samples (the group column too).
  const mmbal::rank_t d = 64;
  auto w = omni(50'000, d, 21);
  for (std::size_t i = 0; i < w.samples.size(); i += 5) w.samples[i].group = i % 97;
  auto with_threads = [&](unsigned threads) {
    orchestrator_options o;
    o.ranks = d;
    o.ranks_per_node = 8;
    o.bytes_per_token = 3;
    o.threads = threads;
    return orchestrator(o);
  };
  const auto serial = with_threads(1).plan(w);
  for (const unsigned threads : {2u, 3u}) {
    INFO("threads " << threads);
    require_same(with_threads(threads).plan(w), serial);
  }
  // Bad samples in two chunks: the first in input order is named whatever the threads.
  w.samples[30'000].rank = d;
  w.samples[45'000].segments.push_back({200, 1, 1});  // a modality id the workload does not name
  for (const unsigned threads : {1u, 2u, 3u})
    REQUIRE_THROWS_WITH(with_threads(threads).plan(w), Catch::Contains("index 30000"));
  w.samples[30'000].rank = 0;
  for (const unsigned threads : {1u, 2u, 3u})
    REQUIRE_THROWS_WITH(with_threads(threads).plan(w), Catch::Contains("modality id 200"));
}

TEST_CASE("orchestrator: planning into a reused orchestration equals a fresh plan", "[orchestrate][concurrency]") {
  // Steps of different shapes and sizes through one orchestration object: more and fewer
  // samples, a step without audio, other rank counts, relabeling on and off.
  auto no_audio = omni(150, 10, 4);
  const auto audio = no_audio.find_modality("audio");
  for (auto& smp : no_audio.samples)
    std::erase_if(smp.segments, [&](const mmbal::segment& g) { return audio && g.modality == *audio; });
  struct step {
    mmbal::workload w;
    mmbal::rank_t d, c;
    bool relabel;
  };
  const std::vector<step> steps{{omni(160, 16, 1), 16, 4, true}, {omni(480, 16, 2), 16, 4, true},
                                {omni(40, 16, 3), 16, 4, true},  {no_audio, 10, 5, true},
                                {omni(90, 6, 5), 6, 2, false},   {omni(300, 24, 6), 24, 8, true}};
  mmbal::orchestrate::orchestration reused;
  for (std::size_t t = 0; t < steps.size(); ++t) {
    INFO("step " << t);
    const auto orch = make(steps[t].d, steps[t].c, 1 + t % 3, steps[t].relabel);
    orch.plan(steps[t].w, reused);
    require_same(reused, make(steps[t].d, steps[t].c, 1 + t % 3, steps[t].relabel).plan(steps[t].w));
    // The orchestrator's own buffers are reused too: a second plan with it is the same.
    require_same(orch.plan(steps[t].w), reused);
  }
}

TEST_CASE("orchestrator: concurrent plan calls on one orchestrator give the same plan", "[orchestrate][concurrency]") {
  const auto w = omni(16 * 12, 16, 8);
  const auto orch = make(16, 4);
  const auto expected = orch.plan(w);
  std::vector<mmbal::orchestrate::orchestration> results(4);
  {
    std::vector<std::jthread> callers;
    for (auto& r : results) callers.emplace_back([&] { r = orch.plan(w); });
  }
  for (const auto& r : results) require_same(r, expected);
}
