// The partitioners whose bin queues became Boost.Heap in issue 12 (constrained LPT, tolerance
// LPT, conv LPT), at 2,560 bins × 60 items. Only public headers are used, so the same file
// also compiles against an older checkout of include/ for a before/after comparison (the
// commands are in bench/RESULTS.md "Heaps and libraries (issue 12)").
//
// Run: build/rel/bench/bench_heap_algorithms --benchmark_repetitions=3 --benchmark_report_aggregates_only=true

#include <mmbal/balance/conv_lpt.hpp>
#include <mmbal/balance/lpt.hpp>
#include <mmbal/balance/tolerance_lpt.hpp>
#include <mmbal/cost/functions.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace {

using namespace mmbal;

constexpr rank_t bins = 2560;

std::vector<length_t> weights() {
  std::mt19937_64 g(7);
  std::vector<length_t> w(std::size_t{bins} * 60);
  for (auto& x : w) x = static_cast<length_t>(64 + g() % 8192);
  return w;
}

// Same-run baseline: std::sort of the same weights (every partitioner below sorts them once).
void BM_sort_baseline(benchmark::State& state) {
  const auto w = weights();
  for (auto _ : state) {
    std::vector<length_t> copy = w;
    std::sort(copy.begin(), copy.end());
    benchmark::DoNotOptimize(copy.data());
  }
}

// LPT with equal counts: the greedy placement over a min-queue of (load, bin).
void BM_lpt_equal_counts(benchmark::State& state) {
  const auto w = weights();
  balance::constraints limits;
  limits.counts.kind = balance::count_cap::mode::equal;
  for (auto _ : state) benchmark::DoNotOptimize(balance::lpt{}(w, bins, cost::tokens{}, limits));
}

// LPT with a capacity and an attention cost: the state-keeping greedy path.
void BM_lpt_capacity_attention(benchmark::State& state) {
  const auto w = weights();
  const cost::attention c{1.0, 1.0 / 4096};
  balance::constraints limits;
  limits.capacity = 1e12;
  for (auto _ : state) benchmark::DoNotOptimize(balance::lpt{}(w, bins, c, limits));
}

// Tolerance LPT: three mutable queues with update and erase.
void BM_tolerance(benchmark::State& state) {
  const auto w = weights();
  for (auto _ : state) benchmark::DoNotOptimize(balance::tolerance_lpt{64.0}(w, bins, cost::tokens{}));
}

// conv LPT: phase 3 pops and pushes (load, bin) keys.
void BM_conv_lpt(benchmark::State& state) {
  const auto w = weights();
  const cost::conv_attention c{1.0 / 4096};
  for (auto _ : state) benchmark::DoNotOptimize(balance::conv_lpt{}(w, bins, c));
}

BENCHMARK(BM_sort_baseline)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_lpt_equal_counts)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_lpt_capacity_attention)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_tolerance)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_conv_lpt)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
