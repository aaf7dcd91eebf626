// Planning hidden behind compute (docs/DESIGN.md §5.5 "Prefetching"; issue goal: the plan fully
// hidden when compute ≥ plan time). One training step = get the step's plan + compute, where
// compute is a sleep (the accelerator's time: the host core is free) of f × P, P being the
// inline plan time measured at start-up in the same run, f = 0.5, 1, 2.
//
// Workload: omni (docs/WORKLOADS.md family d), 640 ranks × 60 samples, 8 ranks per node, four
// different global batches (seeds 1–4) cycled over the steps; the "gather" is a copy of the
// step's batch. The orchestrator plans with 1 thread (the loader thread), default policies.
// Reported (wall time per step, `UseRealTime`):
// - BM_compute_alone/f: the sleep only (baseline: the best a step can be);
// - BM_plan_inline/f: copy + `plan(batch, previous)` + sleep on one thread;
// - BM_plan_prefetched/f: `prefetching_planner::next()` + sleep + `recycle` (depth 1), counter
//   wait_ms (time in next()); BM_plan_prefetched_depth2/f: the same with a queue of two.
// Counters: plan_ms (P), compute_ms, compute_share (compute time / step time: 1 = plan hidden);
// BM_plan_inline also plan_ms_here (copy + plan in that run: P drifts with the machine's load).
#include <mmbal/orchestrate/orchestrator.hpp>
#include <mmbal/orchestrate/prefetch.hpp>
#include <mmbal/workload/generators.hpp>
#include <mmbal/workload/length_data.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using namespace mmbal;
using clock_type = std::chrono::steady_clock;

constexpr rank_t ranks = 640;
constexpr std::uint64_t samples_per_rank = 60;

const std::vector<workload>& batches() {
  static const std::vector<workload> all = [] {
    std::vector<workload> out;
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
      generator_options o;
      o.samples = samples_per_rank * ranks;
      o.ranks = ranks;
      o.seed = seed;
      out.push_back(generate(family::omni, o, default_length_data()));
    }
    return out;
  }();
  return all;
}

orchestrate::orchestrator planner() {
  orchestrate::orchestrator_options o;
  o.ranks = ranks;
  o.ranks_per_node = 8;
  o.threads = 1;
  return orchestrate::orchestrator(o);
}

double plan_ms = 0;  // P, measured in main before the benchmarks are registered

void compute(double ms) { std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms)); }

void report(benchmark::State& state, double compute_ms) {
  state.counters["plan_ms"] = plan_ms;
  state.counters["compute_ms"] = compute_ms;
  // Compute time over step time: 1.0 = the plan fully hidden.
  state.counters["compute_share"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * compute_ms / 1e3, benchmark::Counter::kIsRate);
}

void BM_compute_alone(benchmark::State& state, double f) {
  for (auto _ : state) compute(f * plan_ms);
  report(state, f * plan_ms);
}

void BM_plan_inline(benchmark::State& state, double f) {
  const auto p = planner();
  orchestrate::orchestration out;
  std::uint64_t k = 0;
  double planning_s = 0;
  for (auto _ : state) {
    const auto t0 = clock_type::now();
    workload batch = batches()[k++ % batches().size()];
    p.plan(batch, out);
    benchmark::DoNotOptimize(out.fingerprint);
    planning_s += std::chrono::duration<double>(clock_type::now() - t0).count();
    compute(f * plan_ms);
  }
  report(state, f * plan_ms);
  // The copy + plan time in this run (P drifts with the machine's load).
  state.counters["plan_ms_here"] = 1e3 * planning_s / static_cast<double>(state.iterations());
}

void run_prefetched(benchmark::State& state, double f, std::size_t depth) {
  orchestrate::prefetching_planner loader(
      planner(), [](std::uint64_t k) -> std::optional<workload> { return batches()[k % batches().size()]; }, depth);
  double waited_s = 0;
  for (auto _ : state) {
    const auto t0 = clock_type::now();
    std::optional<orchestrate::prefetched_step> s = loader.next();
    waited_s += std::chrono::duration<double>(clock_type::now() - t0).count();
    benchmark::DoNotOptimize(s->plan.fingerprint);
    compute(f * plan_ms);
    loader.recycle(std::move(*s));
  }
  report(state, f * plan_ms);
  // Time per step spent in next() (the first step of a run is never hidden: P / iterations).
  state.counters["wait_ms"] = 1e3 * waited_s / static_cast<double>(state.iterations());
}

void BM_plan_prefetched(benchmark::State& state, double f) { run_prefetched(state, f, 1); }
void BM_plan_prefetched_depth2(benchmark::State& state, double f) { run_prefetched(state, f, 2); }

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  {  // P: median of 7 inline plans into a reused orchestration (the steady state)
    const auto p = planner();
    orchestrate::orchestration out;
    std::vector<double> ms;
    for (int k = 0; k < 8; ++k) {
      workload batch = batches()[static_cast<std::size_t>(k) % batches().size()];
      const auto t0 = clock_type::now();
      p.plan(batch, out);
      if (k > 0) ms.push_back(std::chrono::duration<double, std::milli>(clock_type::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    plan_ms = ms[ms.size() / 2];
  }
  for (const double f : {0.5, 1.0, 2.0}) {
    const std::string arg = "/compute:" + std::to_string(f).substr(0, 3) + "xP";
    for (auto [name, fn] :
         {std::pair{"BM_compute_alone", &BM_compute_alone}, std::pair{"BM_plan_inline", &BM_plan_inline},
          std::pair{"BM_plan_prefetched", &BM_plan_prefetched},
          std::pair{"BM_plan_prefetched_depth2", &BM_plan_prefetched_depth2}})
      benchmark::RegisterBenchmark((name + arg).c_str(), fn, f)
          ->Iterations(40)
          ->Repetitions(3)
          ->ReportAggregatesOnly(true)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
