// refine on top of lpt: overhead (same-run baselines: lpt alone, std::sort of the same keys)
// and quality (max / lower bound before and after) on realistic generated workloads.
#include <mmbal/balance/lpt.hpp>
#include <mmbal/balance/refine.hpp>
#include <mmbal/cost/functions.hpp>
#include <mmbal/cost/metrics.hpp>
#include <mmbal/workload/generators.hpp>
#include <mmbal/workload/length_data.hpp>
#include <mmbal/workload/sample.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

namespace {

using namespace mmbal;

/// LLM-phase lengths of a generated workload (cached per (family, n)).
const std::vector<length_t>& llm_lengths(family f, std::uint64_t n) {
  static std::map<std::pair<int, std::uint64_t>, std::vector<length_t>> cache;
  auto& slot = cache[{static_cast<int>(f), n}];
  if (slot.empty()) {
    generator_options o;
    o.samples = n;
    o.ranks = 1;
    o.seed = 2026;
    slot = llm_phase_items(generate(f, o, default_length_data())).weights;
  }
  return slot;
}

double max_of(const std::vector<double>& v) { return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()); }

template <class C>
void quality_counters(benchmark::State& state, std::span<const length_t> w, rank_t d, const C& cost,
                      const assignment& before, const assignment& after) {
  const double lb = lower_bound(w, d, cost);
  state.counters["lpt_max_over_lb"] = max_of(bin_loads(before, w, cost)) / lb;
  state.counters["refined_max_over_lb"] = max_of(bin_loads(after, w, cost)) / lb;
  std::uint64_t moved = 0;
  for (std::size_t i = 0; i < w.size(); ++i) moved += before.where[i].rank != after.where[i].rank;
  state.counters["moved_items"] = static_cast<double>(moved);
}

// args: family, d, items per bin
void BM_lpt(benchmark::State& state) {
  const auto f = static_cast<family>(state.range(0));
  const rank_t d = static_cast<rank_t>(state.range(1));
  const auto& w = llm_lengths(f, std::uint64_t{d} * static_cast<std::uint64_t>(state.range(2)));
  for (auto _ : state) benchmark::DoNotOptimize(balance::lpt{}(w, d, cost::tokens{}));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * w.size()));
}

// Same-run baselines of the attention and equal-count rows: lpt alone with that cost / cap.
void BM_lpt_attention(benchmark::State& state) {
  const auto f = static_cast<family>(state.range(0));
  const rank_t d = static_cast<rank_t>(state.range(1));
  const auto& w = llm_lengths(f, std::uint64_t{d} * static_cast<std::uint64_t>(state.range(2)));
  const cost::attention c{1.0, 1.0 / 4096};
  for (auto _ : state) benchmark::DoNotOptimize(balance::lpt{}(w, d, c));
}

void BM_lpt_equal(benchmark::State& state) {
  const auto f = static_cast<family>(state.range(0));
  const rank_t d = static_cast<rank_t>(state.range(1));
  const auto& w = llm_lengths(f, std::uint64_t{d} * static_cast<std::uint64_t>(state.range(2)));
  balance::constraints limits;
  limits.counts.kind = balance::count_cap::mode::equal;
  for (auto _ : state) benchmark::DoNotOptimize(balance::lpt{}(w, d, cost::tokens{}, limits));
}

void BM_lpt_refine(benchmark::State& state) {
  const auto f = static_cast<family>(state.range(0));
  const rank_t d = static_cast<rank_t>(state.range(1));
  const auto& w = llm_lengths(f, std::uint64_t{d} * static_cast<std::uint64_t>(state.range(2)));
  assignment a, r;
  for (auto _ : state) {
    a = balance::lpt{}(w, d, cost::tokens{});
    r = balance::refine(w, a, cost::tokens{}, balance::constraints{});
    benchmark::DoNotOptimize(r);
  }
  quality_counters(state, w, d, cost::tokens{}, a, r);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * w.size()));
}

// Quadratic (attention) cost: LLM FLOPs with a visible l² term.
void BM_lpt_refine_attention(benchmark::State& state) {
  const auto f = static_cast<family>(state.range(0));
  const rank_t d = static_cast<rank_t>(state.range(1));
  const auto& w = llm_lengths(f, std::uint64_t{d} * static_cast<std::uint64_t>(state.range(2)));
  const cost::attention c{1.0, 1.0 / 4096};
  assignment a, r;
  for (auto _ : state) {
    a = balance::lpt{}(w, d, c);
    r = balance::refine(w, a, c, balance::constraints{});
    benchmark::DoNotOptimize(r);
  }
  quality_counters(state, w, d, c, a, r);
}

// Equal counts: only swaps can help.
void BM_lpt_refine_equal(benchmark::State& state) {
  const auto f = static_cast<family>(state.range(0));
  const rank_t d = static_cast<rank_t>(state.range(1));
  const auto& w = llm_lengths(f, std::uint64_t{d} * static_cast<std::uint64_t>(state.range(2)));
  balance::constraints limits;
  limits.counts.kind = balance::count_cap::mode::equal;
  assignment a, r;
  for (auto _ : state) {
    a = balance::lpt{}(w, d, cost::tokens{}, limits);
    r = balance::refine(w, a, cost::tokens{}, limits);
    benchmark::DoNotOptimize(r);
  }
  const double lb = equal_count_lower_bound(std::span<const length_t>(w), d, cost::tokens{});
  state.counters["lpt_max_over_eq_lb"] = max_of(bin_loads(a, w, cost::tokens{})) / lb;
  state.counters["refined_max_over_eq_lb"] = max_of(bin_loads(r, w, cost::tokens{})) / lb;
}

// Baseline: std::sort of the same n keys.
void BM_std_sort(benchmark::State& state) {
  const auto f = static_cast<family>(state.range(0));
  const rank_t d = static_cast<rank_t>(state.range(1));
  const auto& w = llm_lengths(f, std::uint64_t{d} * static_cast<std::uint64_t>(state.range(2)));
  std::vector<length_t> keys;
  for (auto _ : state) {
    keys = w;
    std::sort(keys.begin(), keys.end());
    benchmark::DoNotOptimize(keys.data());
  }
}

void args(benchmark::internal::Benchmark* b) {
  for (int f : {static_cast<int>(family::omni), static_cast<int>(family::internvl), static_cast<int>(family::audio),
                static_cast<int>(family::llava)})
    for (int d : {8, 64, 512, 2560}) b->Args({f, d, 60});
  b->Args({static_cast<int>(family::omni), 2560, 16});
  b->Unit(benchmark::kMillisecond);
}

}  // namespace

BENCHMARK(BM_std_sort)->Args({static_cast<int>(mmbal::family::omni), 2560, 60})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_lpt)->Args({static_cast<int>(mmbal::family::omni), 2560, 60})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_lpt_attention)->Args({static_cast<int>(mmbal::family::omni), 2560, 60})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_lpt_equal)->Args({static_cast<int>(mmbal::family::omni), 2560, 60})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_lpt_refine)->Apply(args);
BENCHMARK(BM_lpt_refine_attention)
    ->Args({static_cast<int>(mmbal::family::omni), 2560, 60})
    ->Args({static_cast<int>(mmbal::family::omni), 64, 60})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_lpt_refine_equal)
    ->Args({static_cast<int>(mmbal::family::omni), 2560, 60})
    ->Args({static_cast<int>(mmbal::family::omni), 64, 60})
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
