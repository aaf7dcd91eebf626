// Balance quality of every partitioner (docs/DESIGN.md §7): max / lower bound on realistic
// lengths, ≥ 16 items per bin, d ∈ {8, 64, 512, 2560}; equal-count max / equal-count lower
// bound. Datasets: the LLM lengths of generated families (a) llava, (b) internvl, (c) audio,
// (d) omni, and the real files: InternVL-Chat-1.2 token counts (OmniBal) and LibriSpeech
// utterances as Whisper encoder frames (50 per second). Cost: tokens (Σ l). One iteration
// per benchmark; every number is a counter (a ratio ≥ 1; 1 = optimal).
#include <mmbal/core/rng.hpp>
#include <mmbal/cost/functions.hpp>
#include <mmbal/cost/metrics.hpp>
#include <mmbal/spec/algorithm.hpp>
#include <mmbal/spec/cost.hpp>
#include <mmbal/workload/generators.hpp>
#include <mmbal/workload/length_data.hpp>
#include <mmbal/workload/sample.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace {

using namespace mmbal;

constexpr std::uint64_t items_per_bin = 16;

// Dataset ids: 0..3 generated families (a)–(d), 4 InternVL real, 5 LibriSpeech real.
const char* dataset_name(int id) {
  static const char* names[] = {"llava", "internvl", "audio", "omni", "real_internvl", "real_librispeech"};
  return names[id];
}

std::vector<length_t> dataset(int id, std::uint64_t n) {
  const length_data& data = default_length_data();
  if (id < 4) {
    static const family families[] = {family::llava, family::internvl, family::audio, family::omni};
    generator_options o;
    o.samples = n;
    o.ranks = 8;
    o.seed = 2026 + static_cast<std::uint64_t>(id);
    return llm_phase_items(generate(families[id], o, data)).weights;
  }
  rng_engine g = make_rng(7, static_cast<std::uint64_t>(id));
  std::vector<length_t> w(n);
  if (id == 4) {
    std::vector<length_t> pool;
    for (const auto& subset : data.omnibal)
      for (const auto& row : subset) pool.push_back(row.token_num);
    for (auto& x : w) x = pool[uniform_below(g, pool.size())];
  } else {
    const auto& secs = data.librispeech_train;
    for (auto& x : w) x = static_cast<length_t>(std::lround(secs[uniform_below(g, secs.size())] * 50.0));
  }
  return w;
}

double max_of(const std::vector<double>& v) { return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()); }

// args: dataset, d
void BM_quality(benchmark::State& state) {
  const int id = static_cast<int>(state.range(0));
  const rank_t d = static_cast<rank_t>(state.range(1));
  const std::vector<length_t> w = dataset(id, items_per_bin * d);
  const cost::tokens c;
  const double lb = lower_bound(std::span<const length_t>(w), d, c);
  const double eq_lb = equal_count_lower_bound(std::span<const length_t>(w), d, c);
  balance::constraints equal;
  equal.counts.kind = balance::count_cap::mode::equal;
  std::vector<rank_t> origin(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) origin[i] = static_cast<rank_t>(i % d);
  for (auto _ : state) {
    for (const char* spec : {"lpt", "lpt+refine", "greedy-ascending", "tolerance:v=64", "kk", "kk+refine"}) {
      const assignment a = spec::solve(spec::parse_algorithm(spec), c, balance::problem{w, d});
      state.counters[spec] = max_of(bin_loads(a, w, c)) / lb;
    }
    for (const char* spec : {"lpt", "lpt+refine", "kk", "kk+refine"}) {
      const assignment a = spec::solve(spec::parse_algorithm(spec), c, balance::problem{w, d, equal});
      state.counters[std::string("eq_") + spec] = max_of(bin_loads(a, w, c)) / eq_lb;
    }
    balance::problem p{w, d};
    p.origin = origin;
    const assignment m = spec::solve(spec::parse_algorithm("migrate:eps=0.001"), c, p);
    state.counters["migrate"] = max_of(bin_loads(m, w, c)) / lb;
  }
  state.SetLabel(std::string(dataset_name(id)) + " d=" + std::to_string(d) + " n=" + std::to_string(w.size()));
}

void quality_args(benchmark::internal::Benchmark* b) {
  for (int id = 0; id < 6; ++id)
    for (const int d : {8, 64, 512, 2560}) b->Args({id, d});
}
BENCHMARK(BM_quality)->Apply(quality_args)->Iterations(1)->Unit(benchmark::kMillisecond);

// Issue 13: equal counts on the omni LLM phase (items as the tool builds them, count cap
// `equal`), few items per bin. args: samples per rank, d, cost (0 tokens, 1 attention β = 1e-4,
// 2 attention β = 1e-3), seed. Counters: max / equal-count lower bound.
void BM_equal_count_omni(benchmark::State& state) {
  const auto per_rank = static_cast<std::uint64_t>(state.range(0));
  const rank_t d = static_cast<rank_t>(state.range(1));
  static const char* cost_specs[] = {"tokens", "attention:alpha=1,beta=0.0001", "attention:alpha=1,beta=0.001"};
  const char* cost_spec = cost_specs[state.range(2)];
  generator_options o;
  o.samples = per_rank * d;
  o.ranks = d;
  o.seed = static_cast<std::uint64_t>(state.range(3));
  const std::vector<length_t> w = phase_items_of(generate(family::omni, o, default_length_data()), "llm").weights;
  const spec::any_cost c = spec::parse_cost(cost_spec);
  balance::constraints equal;
  equal.counts.kind = balance::count_cap::mode::equal;
  for (auto _ : state) {
    std::visit(
        [&](const auto& cc) {
          const double eq_lb = equal_count_lower_bound(std::span<const length_t>(w), d, cc);
          for (const char* spec : {"lpt", "lpt+refine", "kk", "kk+refine"}) {
            const assignment a = spec::solve(spec::parse_algorithm(spec), c, balance::problem{w, d, equal});
            state.counters[std::string("eq_") + spec] = max_of(bin_loads(a, w, cc)) / eq_lb;
          }
        },
        c);
  }
  state.SetLabel(std::string("omni ") + cost_spec + " d=" + std::to_string(d) + " n=" + std::to_string(w.size()) +
                 " seed=" + std::to_string(o.seed));
}

void equal_count_args(benchmark::internal::Benchmark* b) {
  for (const int seed : {1, 2, 3, 2026})
    for (const int cost : {0, 1, 2}) b->Args({8, 512, cost, seed});
  for (const int seed : {1, 2, 3, 2026})
    for (const int cost : {0, 1, 2}) b->Args({64, 512, cost, seed});
}
BENCHMARK(BM_equal_count_omni)->Apply(equal_count_args)->Iterations(1)->Unit(benchmark::kMillisecond);

// Issue 13: time of equal-count `kk` against equal-count `lpt` (the same-run baseline) on the
// omni LLM phase, 65,536 samples on 512 ranks, tokens. arg: 0 lpt, 1 kk.
void BM_equal_count_time(benchmark::State& state) {
  const rank_t d = 512;
  generator_options o;
  o.samples = 65536;
  o.ranks = d;
  o.seed = 1;
  const std::vector<length_t> w = phase_items_of(generate(family::omni, o, default_length_data()), "llm").weights;
  const spec::any_cost c = spec::parse_cost("tokens");
  balance::constraints equal;
  equal.counts.kind = balance::count_cap::mode::equal;
  const spec::algorithm_spec algorithm = spec::parse_algorithm(state.range(0) == 0 ? "lpt" : "kk");
  for (auto _ : state) benchmark::DoNotOptimize(spec::solve(algorithm, c, balance::problem{w, d, equal}));
  state.SetLabel(std::string(state.range(0) == 0 ? "eq_lpt" : "eq_kk") + " omni d=512 n=" + std::to_string(w.size()));
}
BENCHMARK(BM_equal_count_time)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
