// Scaling of a fresh orchestration in items (docs/DESIGN.md §7; issue goal: time and memory grow
// no faster than linearly; memory ≤ 64 MiB per 2,560 ranks of the public omni mix).
//
// Workloads, 60 samples per rank, 8 ranks per node, seed 1, for d = 320 … 16,384 ranks:
// - omni: docs/WORKLOADS.md family (d), video joined to the image phase (the same ViT in
//   Qwen2-VL; `generator_options::video_as_image`), three phases — `bench::omni_step`, as
//   bench_orchestrate.cpp;
// - images: the same with the multi-image variant (`generator_options::multi_image`,
//   docs/WORKLOADS.md "Variants"): 65 % of the samples carry U{1..10} images (existing image
//   segments count; the added ones are copies of image segments drawn uniformly from the same
//   workload, inserted after the text prefix), ≈ 3.8 images per sample (omni 0.63). The same
//   workload from the tool, at 2,560 ranks: `mmbal generate --family omni --samples 153600
//   --ranks 2560 --seed 1 --video-as-image --multi-image-fraction 0.65 --multi-image-max 10`.
// Each iteration times, in the same run, (1) std::sort of a copy of the samples' totals (LLM
// tokens per sample, the baseline) and (2) a fresh `orchestrator::plan(w)` (no plan handed
// back; threads = hardware concurrency; default policies). Manual time = the plan.
// Counters: items (all phases), sort_ms, ratio_vs_sort, ns_per_item, peak_extra_MiB (one fresh
// plan with a new orchestrator, counting operator new), MiB_per_2560_ranks.
// `--huge_page_heap` (first argument) sets up the heap as the `mmbal` tool does
// (`reserve_huge_page_heap`).
#include "counting_allocator.hpp"
#include "omni_step.hpp"

#include <mmbal/core/huge_page_heap.hpp>
#include <mmbal/orchestrate/orchestrator.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

namespace {

using namespace mmbal;
using clock_type = std::chrono::steady_clock;

constexpr std::uint64_t samples_per_rank = 60;
constexpr rank_t ranks_per_node = 8;
enum mix : int { omni_mix = 0, image_mix = 1 };

/// The workload of the running benchmark (one kept at a time: the largest take ~0.5 GiB).
const workload& workload_for(mix m, rank_t d) {
  static std::pair<std::pair<int, rank_t>, std::unique_ptr<workload>> cache;
  if (!cache.second || cache.first != std::pair<int, rank_t>{m, d}) {
    cache.second.reset();
    cache.first = {m, d};
    cache.second = std::make_unique<workload>(bench::omni_step(d, samples_per_rank, m == image_mix));
  }
  return *cache.second;
}

orchestrate::orchestrator planner(rank_t d) {
  orchestrate::orchestrator_options o;
  o.ranks = d;
  o.ranks_per_node = ranks_per_node;
  return orchestrate::orchestrator(o);
}

void BM_fresh_plan(benchmark::State& state) {
  const auto m = static_cast<mix>(state.range(0));
  const auto d = static_cast<rank_t>(state.range(1));
  const workload& w = workload_for(m, d);
  std::vector<std::uint64_t> totals;
  for (const sample& s : w.samples) {
    std::uint64_t t = 0;
    for (const segment& g : s.segments) t += g.llm_tokens;
    totals.push_back(t);
  }
  std::uint64_t items = 0;
  const std::int64_t peak = bench_heap::peak_extra_bytes([&] {
    const orchestrate::orchestration o = planner(d).plan(w);
    for (const auto& p : o.phases) items += p.report.items;
  });
  const auto orch = planner(d);
  std::vector<std::uint64_t> work(totals.size());
  double sort_s = 0, plan_s = 0;
  for (auto _ : state) {
    auto t0 = clock_type::now();
    std::copy(totals.begin(), totals.end(), work.begin());
    std::sort(work.begin(), work.end());
    benchmark::DoNotOptimize(work.data());
    sort_s += std::chrono::duration<double>(clock_type::now() - t0).count();
    t0 = clock_type::now();
    const orchestrate::orchestration o = orch.plan(w);
    benchmark::DoNotOptimize(o.fingerprint);
    const double dt = std::chrono::duration<double>(clock_type::now() - t0).count();
    plan_s += dt;
    state.SetIterationTime(dt);
  }
  const auto n = static_cast<double>(state.iterations());
  const double mib = static_cast<double>(peak) / (1024.0 * 1024.0);
  state.counters["ranks"] = d;
  state.counters["items"] = static_cast<double>(items);
  state.counters["sort_ms"] = 1e3 * sort_s / n;
  state.counters["ratio_vs_sort"] = sort_s > 0 ? plan_s / sort_s : 0.0;
  state.counters["ns_per_item"] = 1e9 * plan_s / n / static_cast<double>(items);
  state.counters["peak_extra_MiB"] = mib;
  state.counters["MiB_per_2560_ranks"] = mib * 2560.0 / d;
}

void register_all() {
  for (const int m : {omni_mix, image_mix})
    for (const rank_t d : {320u, 640u, 1280u, 2560u, 5120u, 10240u, 16384u})
      benchmark::RegisterBenchmark(m == omni_mix ? "BM_fresh_plan/omni" : "BM_fresh_plan/images", BM_fresh_plan)
          ->Args({m, static_cast<std::int64_t>(d)})
          ->Iterations(std::max<std::int64_t>(3, 20480 / d))
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
}

}  // namespace

int main(int argc, char** argv) {
  // --huge_page_heap: the heap setting of the `mmbal` tool (a one-shot planner), so a cold
  // point measures what `mmbal orchestrate` reports (bench/RESULTS.md, session 16).
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == "--huge_page_heap") {
      if (!reserve_huge_page_heap().advised()) std::fprintf(stderr, "--huge_page_heap: the heap was not advised\n");
      std::copy(argv + i + 1, argv + argc + 1, argv + i);
      --argc;
      break;
    }
  benchmark::Initialize(&argc, argv);
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
