// ISF (OmniBal Alg. 1) benchmarks, docs/DESIGN.md §7: "ISF, 1.27 M samples, 10 iterations: ≤ 1 s".
// Data: the shipped real InternVL-Chat-1.2 subsets (data/internvl_omnibal_lengths, 30,730
// rows: ViT tiles, LLM tokens); the 1.27 M-sample set resamples those rows uniformly (seeded),
// so it has the real joint distribution of (v, t) at InternVL-1.2M scale.
// Same-run baselines: random grouping (shuffle + fixed batch of 4, OmniBal Table 3's
// "baseline") and std::sort of the same number of keys.
// Quality counters (OmniBal Table 3 on the real rows, 8 devices per step): AVE-BS, pad ratio,
// dist ratio ViT / LLM for ISF and for random grouping.
#include <mmbal/sampling/isf.hpp>
#include <mmbal/workload/length_data.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace {

using mmbal::length_t;
using namespace mmbal::sampling;

struct dataset {
  std::vector<length_t> v, t;
};

// The real InternVL rows (ai2d_train_12k and chartqa_train_18k, file order).
const dataset& real_rows() {
  static const dataset d = [] {
    dataset x;
    for (const auto& subset : mmbal::default_length_data().omnibal)
      for (const mmbal::omnibal_row& row : subset) {
        x.v.push_back(row.vit_num);
        x.t.push_back(row.token_num);
      }
    return x;
  }();
  return d;
}

// 1.27 M samples drawn uniformly (with replacement) from the real rows.
const dataset& large() {
  static const dataset d = [] {
    const dataset& real = real_rows();
    dataset x;
    constexpr std::size_t n = 1'270'000;
    x.v.reserve(n);
    x.t.reserve(n);
    auto g = mmbal::make_rng(2024);
    for (std::size_t i = 0; i < n; ++i) {
      const auto k = mmbal::uniform_below(g, real.t.size());
      x.v.push_back(real.v[k]);
      x.t.push_back(real.t[k]);
    }
    return x;
  }();
  return d;
}

isf_options options_for(const dataset& d, double target_batch, std::uint64_t seed) {
  const isf_thresholds q = derive_thresholds(compute_length_stats(d.v, d.t), target_batch);
  isf_options o;
  o.qv = q.qv;
  o.qt = q.qt;
  o.iterations = 10;
  o.seed = seed;
  return o;
}

void set_quality(benchmark::State& state, const grouping_metrics& m, const char* prefix) {
  const std::string p(prefix);
  state.counters[p + "ave_bs"] = m.average_batch;
  state.counters[p + "pad"] = m.pad_ratio;
  state.counters[p + "dist_vit"] = m.dist_ratio_vision;
  state.counters[p + "dist_llm"] = m.dist_ratio_text;
}

// ISF on 1.27 M samples, T = 10, thresholds from derive_thresholds(stats, 4). Goal ≤ 1 s.
void BM_isf_1_27M(benchmark::State& state) {
  const dataset& d = large();
  isf_options o = options_for(d, 4.0, 1);
  isf_result r;
  for (auto _ : state) {
    r = isf(d.v, d.t, o);
    benchmark::DoNotOptimize(r.groups.members.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * d.t.size()));
  state.counters["groups"] = static_cast<double>(r.groups.size());
  state.counters["leftover"] = r.stats.leftover_samples;
  state.counters["final_groups"] = r.stats.final_groups;
  state.counters["singletons"] = static_cast<double>(r.singletons.size());
  state.counters["qv"] = static_cast<double>(r.stats.thresholds.qv);
  state.counters["qt"] = static_cast<double>(r.stats.thresholds.qt);
  set_quality(state, evaluate_grouping(r.groups, d.v, d.t, 8), "");
}
BENCHMARK(BM_isf_1_27M)->Unit(benchmark::kMillisecond)->MinTime(3.0);

// Baseline: random grouping (shuffle + batches of 4) of the same 1.27 M samples.
void BM_random_grouping_1_27M(benchmark::State& state) {
  const dataset& d = large();
  grouping g;
  for (auto _ : state) {
    g = random_grouping(d.t.size(), 4, 1);
    benchmark::DoNotOptimize(g.members.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * d.t.size()));
  set_quality(state, evaluate_grouping(g, d.v, d.t, 8), "");
}
BENCHMARK(BM_random_grouping_1_27M)->Unit(benchmark::kMillisecond);

// Baseline: std::sort of 1.27 M 32-bit keys (the LLM lengths), a familiar yardstick.
void BM_sort_1_27M(benchmark::State& state) {
  const dataset& d = large();
  std::vector<length_t> keys;
  for (auto _ : state) {
    state.PauseTiming();
    keys = d.t;
    state.ResumeTiming();
    std::sort(keys.begin(), keys.end());
    benchmark::DoNotOptimize(keys.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * d.t.size()));
}
BENCHMARK(BM_sort_1_27M)->Unit(benchmark::kMillisecond);

// OmniBal Table 3 on the shipped real rows (30,730 samples), 8 devices per step:
// ISF (derive_thresholds for target batch = range(0); 0 = the paper's longest-sample rule;
// range(1) = sort_tail) with its quality counters, against random batches of the nearest
// integer size.
void BM_table3_real(benchmark::State& state) {
  const dataset& d = real_rows();
  const double target = static_cast<double>(state.range(0));
  isf_options o = options_for(d, target, 1);
  o.sort_tail = state.range(1) != 0;
  isf_result r;
  for (auto _ : state) {
    r = isf(d.v, d.t, o);
    benchmark::DoNotOptimize(r.groups.members.data());
  }
  const grouping_metrics m = evaluate_grouping(r.groups, d.v, d.t, 8);
  set_quality(state, m, "isf_");
  const auto batch = static_cast<std::uint32_t>(std::max(1.0, std::round(m.average_batch)));
  set_quality(state, evaluate_grouping(random_grouping(d.t.size(), batch, 1), d.v, d.t, 8), "rnd_");
  state.counters["qv"] = static_cast<double>(o.qv);
  state.counters["qt"] = static_cast<double>(o.qt);
  state.counters["singletons"] = static_cast<double>(r.singletons.size());
}
BENCHMARK(BM_table3_real)
    ->ArgNames({"target", "sorted_tail"})
    ->ArgsProduct({{0, 4, 8}, {0, 1}})
    ->Unit(benchmark::kMillisecond);

// The threshold search (7 × 7 grid, T = 10) on the real rows for target batch 4.
void BM_search_thresholds_real(benchmark::State& state) {
  const dataset& d = real_rows();
  threshold_search_result best;
  threshold_search_options so;
  so.seed = 1;
  for (auto _ : state) {
    best = search_thresholds(d.v, d.t, 8, 4.0, so);
    benchmark::DoNotOptimize(best.objective);
  }
  state.counters["qv"] = static_cast<double>(best.thresholds.qv);
  state.counters["qt"] = static_cast<double>(best.thresholds.qt);
  state.counters["candidates"] = static_cast<double>(best.candidates);
  set_quality(state, best.metrics, "");
}
BENCHMARK(BM_search_thresholds_real)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
