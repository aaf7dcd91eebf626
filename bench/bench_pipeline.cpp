// Pipeline schedules and micro-batch orders (docs/DESIGN.md §5.7, issue 11):
// - BM_simulate_1f1b: 1F1B simulation at p = 16, m = 256, reusing a workspace; counter
//   ns_per_op per forward or backward operation (goal ≤ 100 ns). Same-run baseline:
//   BM_baseline_sum_times reads the same 2·p·m times once (the floor of any simulator).
// - BM_search: the search order at p = 8, m = 64 on an omni instance (goal ≤ 50 ms).
// - BM_quality: heterogeneous realistic workloads (families omni and internvl, generated
//   samples split into m micro-batches balanced on LLM tokens, the modality encoders on the
//   first stage, the LLM split evenly over the other p − 1 stages), p ∈ {4, 8},
//   m ∈ {8, 16, 32}, 20 instances each: mean makespan / lower bound of identity, random (one
//   seeded shuffle per instance), verl, DistTrain and search; `search_vs_best` = 1 −
//   mean(search) / min(mean(verl), mean(DistTrain)) (goal ≥ 0.04); `disttrain_vs_random` =
//   mean(random) / mean(DistTrain) (DistTrain §8 claims 1.03–1.11× throughput over random).
// - BM_brute_force: m ∈ {5, 6, 7}: search / optimum over all m! orders (goal ≤ 1.01).
// - BM_optimum_m8: the m = 8 quality instances against the optimum over all 8! orders.
#include <mmbal/core/rng.hpp>
#include <mmbal/cost/functions.hpp>
#include <mmbal/pipeline/pipeline.hpp>
#include <mmbal/workload/generators.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace {

using namespace mmbal;
using namespace mmbal::pipeline;

constexpr std::uint32_t samples_per_micro_batch = 8;

// One instance: m micro-batches of generated samples; stage 0 holds every modality encoder
// (linear in encoder length: tiles, frames and audio windows are encoded independently), stages 1..p−1 an equal share
// of the LLM (attention cost on LLM tokens, 4K-context ratio of quadratic to linear work). Everything is trainable
// (DistTrain's setting; backward = 2 × forward) unless `frozen_encoder`, where the encoders are
// frozen with a small trainable projector behind them (Cornstarch's). The encoder is scaled so
// that its mean forward time equals the mean LLM stage forward time: stage 0 is as loaded as
// the others on average and differs per micro-batch (modality composition).
stage_times make_instance(family f, std::uint32_t p, std::uint32_t m, std::uint64_t seed, bool frozen_encoder) {
  generator_options o;
  o.samples = std::uint64_t{m} * samples_per_micro_batch;
  o.ranks = 1;
  o.seed = seed;
  const workload w = generate(f, o, default_length_data());
  const auto mbs = rank_micro_batches(w, 1, m, cost::tokens{})[0];
  const cost::attention llm_cost{1.0, 1.0 / 4096};
  const cost::tokens enc_cost;  // encoders run tiles, frames and 30 s windows independently: linear
  pipeline_model model;
  model.stages.resize(p);
  for (std::size_t k = 1; k < w.modalities.size(); ++k) {
    pipeline_module e;
    e.kind = module_kind::encoder;
    e.phase = w.modalities[k];
    e.cost = enc_cost;
    e.trainable = !frozen_encoder;
    model.stages[0].modules.push_back(e);
  }
  pipeline_module proj;
  proj.phase = "llm";
  proj.share = 0.01;
  model.stages[0].modules.push_back(proj);
  for (std::uint32_t s = 1; s < p; ++s) {
    pipeline_module l;
    l.phase = "llm";
    l.cost = llm_cost;
    l.share = 1.0 / (p - 1);
    model.stages[s].modules.push_back(l);
  }
  if (p == 1) return stage_times_from_samples(model, w, mbs);
  // calibrate the encoder share: mean encoder forward = mean LLM stage forward
  const stage_times raw = stage_times_from_samples(model, w, mbs);
  double enc = 0, llm = 0;
  for (std::uint32_t j = 0; j < m; ++j) enc += raw.forward_time(0, j), llm += raw.forward_time(1, j);
  const double scale = enc > 0 ? llm / enc : 1.0;
  for (std::size_t k = 0; k + 1 < model.stages[0].modules.size(); ++k) model.stages[0].modules[k].share = scale;
  return stage_times_from_samples(model, w, mbs);
}

// Wall-clock nanoseconds per operation: (time / iterations) / ops.
benchmark::Counter ns_per(const benchmark::State& state, double ops) {
  return benchmark::Counter(ops * static_cast<double>(state.iterations()) / 1e9,
                            benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// p × m forward times uniform in [0.5, 2], backward twice the forward (seed 1).
stage_times random_times(std::uint32_t p, std::uint32_t m) {
  stage_times t(p, m);
  rng_engine g = make_rng(1);
  for (std::size_t i = 0; i < t.forward.size(); ++i)
    t.forward[i] = uniform_real(g, 0.5, 2), t.backward[i] = 2 * t.forward[i];
  return t;
}

void BM_baseline_sum_times(benchmark::State& state) {
  const auto p = static_cast<std::uint32_t>(state.range(0)), m = static_cast<std::uint32_t>(state.range(1));
  const stage_times t = random_times(p, m);
  for (auto _ : state) {
    double s = 0;
    for (std::size_t i = 0; i < t.forward.size(); ++i) s += t.forward[i] + t.backward[i];
    benchmark::DoNotOptimize(std::as_const(s));
  }
  state.counters["ns_per_op"] = ns_per(state, 2.0 * p * m);
}
BENCHMARK(BM_baseline_sum_times)->Args({16, 256});

void BM_simulate_1f1b(benchmark::State& state) {
  const auto p = static_cast<std::uint32_t>(state.range(0)), m = static_cast<std::uint32_t>(state.range(1));
  const stage_times t = random_times(p, m);
  const std::vector<std::uint32_t> order = identity_order(m);
  simulation_workspace ws;
  const schedule sched{state.range(2) == 0 ? schedule_kind::one_f_one_b : schedule_kind::interleaved,
                       static_cast<std::uint32_t>(std::max<std::int64_t>(1, state.range(2)))};
  for (auto _ : state) benchmark::DoNotOptimize(simulate(t, order, sched, 0.0, ws));
  const double ops = 2.0 * p * m * sched.chunks;
  state.counters["ns_per_op"] = ns_per(state, ops);
}
BENCHMARK(BM_simulate_1f1b)->Args({16, 256, 0})->Args({16, 256, 2})->Args({8, 64, 0});

void BM_search(benchmark::State& state) {
  const stage_times t = make_instance(family::omni, 8, 64, 7, false);
  const std::vector<std::vector<std::uint32_t>> starts{identity_order(64), verl_order(t), disttrain_order(t)};
  double ms = 0;
  for (auto _ : state) {
    const search_result r = search_order(t, starts);
    ms = r.makespan;
    // the const overload: Debian's libbenchmark 1.7 "+r" constraint garbles a double lvalue at -O3
    benchmark::DoNotOptimize(std::as_const(ms));
  }
  state.counters["makespan_over_lb"] = ms / lower_bound(t);
}
BENCHMARK(BM_search)->Unit(benchmark::kMillisecond);

void BM_disttrain_order(benchmark::State& state) {
  const stage_times t = make_instance(family::omni, 8, 64, 7, false);
  for (auto _ : state) benchmark::DoNotOptimize(disttrain_order(t));
}
BENCHMARK(BM_disttrain_order)->Unit(benchmark::kMillisecond);

// args: family (0 omni, 1 internvl), p, m, frozen encoder
void BM_quality(benchmark::State& state) {
  const family f = state.range(0) == 0 ? family::omni : family::internvl;
  const auto p = static_cast<std::uint32_t>(state.range(1)), m = static_cast<std::uint32_t>(state.range(2));
  const bool frozen = state.range(3) != 0;
  constexpr int instances = 20;
  // sums of makespans: identity, random, verl, disttrain, search; and of lower bounds
  double sum[5] = {0, 0, 0, 0, 0}, lb = 0, worst_gap = 0;
  for (auto _ : state) {
    for (int i = 0; i < instances; ++i) {
      const stage_times t = make_instance(f, p, m, 1000 + static_cast<std::uint64_t>(i), frozen);
      std::vector<std::uint32_t> random = identity_order(m);
      rng_engine g = make_rng(99, static_cast<std::uint64_t>(i));
      shuffle(std::span<std::uint32_t>(random), g);
      const auto reports = compute_orders(t, all_order_kinds);
      sum[0] += reports[0].makespan;
      sum[1] += simulate(t, random);
      sum[2] += reports[1].makespan;
      sum[3] += reports[2].makespan;
      sum[4] += reports[3].makespan;
      const double bound = lower_bound(t);
      lb += bound;
      worst_gap = std::max(worst_gap, reports[3].makespan / bound - 1);
    }
  }
  state.counters["identity"] = sum[0] / lb;
  state.counters["random"] = sum[1] / lb;
  state.counters["verl"] = sum[2] / lb;
  state.counters["disttrain"] = sum[3] / lb;
  state.counters["search"] = sum[4] / lb;
  state.counters["search_vs_best"] = 1 - sum[4] / std::min(sum[2], sum[3]);
  state.counters["disttrain_vs_random"] = sum[1] / sum[3];
  state.counters["search_worst_gap"] = worst_gap;
}
BENCHMARK(BM_quality)
    ->ArgsProduct({{0, 1}, {4, 8}, {8, 16, 32}, {0}})
    ->ArgsProduct({{0, 1}, {4, 8}, {16}, {1}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// args: family, p, m
void BM_brute_force(benchmark::State& state) {
  const family f = state.range(0) == 0 ? family::omni : family::internvl;
  const auto p = static_cast<std::uint32_t>(state.range(1)), m = static_cast<std::uint32_t>(state.range(2));
  constexpr int instances = 10;
  double worst = 0, sum_ratio = 0, sum_lb = 0;
  for (auto _ : state) {
    for (int i = 0; i < instances; ++i) {
      const stage_times t = make_instance(f, p, m, 500 + static_cast<std::uint64_t>(i), false);
      simulation_workspace ws;
      double best = std::numeric_limits<double>::infinity();
      std::vector<std::uint32_t> o = identity_order(m);
      do best = std::min(best, simulate(t, o, {}, 0.0, ws));
      while (std::next_permutation(o.begin(), o.end()));
      const double searched = compute_orders(t, std::vector<order_kind>{order_kind::search})[0].makespan;
      worst = std::max(worst, searched / best);
      sum_ratio += searched / best;
      sum_lb += best / lower_bound(t);
    }
  }
  state.counters["search_over_opt_mean"] = sum_ratio / instances;
  state.counters["search_over_opt_max"] = worst;
  state.counters["opt_over_lb_mean"] = sum_lb / instances;
}
BENCHMARK(BM_brute_force)->ArgsProduct({{0, 1}, {4, 8}, {5, 6, 7}})->Iterations(1)->Unit(benchmark::kMillisecond);

// The quality instances at m = 8 (the same seeds as BM_quality), against the optimum over
// all 8! orders: how much better than verl's and DistTrain's orders any order can be.
// args: family, p
void BM_optimum_m8(benchmark::State& state) {
  const family f = state.range(0) == 0 ? family::omni : family::internvl;
  const auto p = static_cast<std::uint32_t>(state.range(1));
  constexpr std::uint32_t m = 8;
  constexpr int instances = 20;
  double verl = 0, dt = 0, searched = 0, optimum = 0;
  for (auto _ : state) {
    for (int i = 0; i < instances; ++i) {
      const stage_times t = make_instance(f, p, m, 1000 + static_cast<std::uint64_t>(i), false);
      const auto reports = compute_orders(t, all_order_kinds);
      simulation_workspace ws;
      double best = std::numeric_limits<double>::infinity();
      std::vector<std::uint32_t> o = identity_order(m);
      do best = std::min(best, simulate(t, o, {}, 0.0, ws));
      while (std::next_permutation(o.begin(), o.end()));
      verl += reports[1].makespan;
      dt += reports[2].makespan;
      searched += reports[3].makespan;
      optimum += best;
    }
  }
  state.counters["optimum_vs_best"] = 1 - optimum / std::min(verl, dt);
  state.counters["search_vs_best"] = 1 - searched / std::min(verl, dt);
  state.counters["search_over_opt"] = searched / optimum;
}
BENCHMARK(BM_optimum_m8)->ArgsProduct({{0, 1}, {4, 8}})->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
