// refine on top of lpt: overhead (same-run baselines: lpt alone, std::sort of the same keys)
// and quality (max / lower bound before and after) on realistic generated workloads; refine's
// padded path (same-run baseline: `padded_binary_search` alone) and its quality and time after
// `lpt` (same-run baselines: `lpt` and `padded_binary_search` alone on the same lengths); the
// price of the re-differencing's whole-instance pool on small instances (same-run baselines:
// `lpt` and `kk` alone).
#include "omni_step.hpp"

#include <mmbal/balance/karmarkar_karp.hpp>
#include <mmbal/balance/lpt.hpp>
#include <mmbal/balance/padded_binary_search.hpp>
#include <mmbal/balance/refine.hpp>
#include <mmbal/core/detail/least_loaded.hpp>
#include <mmbal/cost/functions.hpp>
#include <mmbal/cost/metrics.hpp>
#include <mmbal/orchestrate/policy.hpp>
#include <mmbal/workload/generators.hpp>
#include <mmbal/workload/length_data.hpp>
#include <mmbal/workload/sample.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
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
  state.counters["start_max_over_lb"] = max_of(bin_loads(before, w, cost)) / lb;
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

// The re-differencing's whole-instance pool (`refine_options::redifference_whole_units`) and
// its refined pool splits (`refine_options::refine_pool_splits`) on small instances, where the
// re-differencing runs. args: n, d, equal counts (0/1), what runs (0 `lpt` alone, 1 `kk` alone:
// the same-run baselines; 2 `lpt+refine` without the whole pool, 3 the default, 4 without the
// refined pool splits). Omni LLM lengths, the attention cost of the rows above.
void BM_whole_pool(benchmark::State& state) {
  const auto n = static_cast<std::uint64_t>(state.range(0));
  const rank_t d = static_cast<rank_t>(state.range(1));
  const auto& w = llm_lengths(family::omni, n);
  const cost::attention c{1.0, 1.0 / 4096};
  balance::constraints limits;
  if (state.range(2) != 0) limits.counts.kind = balance::count_cap::mode::equal;
  balance::refine_options opts;
  if (state.range(3) == 2) opts.redifference_whole_units = 0;
  if (state.range(3) == 4) opts.refine_pool_splits = false;
  assignment r;
  for (auto _ : state) {
    if (state.range(3) == 1) {
      r = balance::karmarkar_karp{}(w, d, c, limits);
    } else {
      r = balance::lpt{}(w, d, c, limits);
      if (state.range(3) >= 2) r = balance::refine(w, r, c, limits, opts);
    }
    benchmark::DoNotOptimize(r);
  }
  const double kk_max = max_of(bin_loads(balance::karmarkar_karp{}(w, d, c, limits), w, c));
  state.counters["max_over_kk"] = max_of(bin_loads(r, w, c)) / kk_max;
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

// Every phase of the orchestrator's 2,560-rank workload (omni, 60 samples per rank, video in
// the image phase: `bench::omni_step`) under its default policy (orchestrate/policy.hpp),
// the phase's algorithm alone (args: phase, 0) and followed by refine (phase, 1), or by refine
// scanning every partner (phase, 2: `cost_class_filter` off, the same result), or for the
// image phases lpt and refine as two calls (phase, 3; (phase, 1) runs them fused, as the
// policy does): image tokens + lpt, audio padded + padded_binary_search, llm attention + lpt.
constexpr std::array<const char*, 3> phases = {"image", "audio", "llm"};

// Phases 0–2 of `bench::omni_step(2560)`, and as phase 3 the image phase of its image-heavy mix
// (3.8 images per sample, 584 K images).
const std::vector<length_t>& orchestrated_phase(std::size_t phase) {
  static const std::array<std::vector<length_t>, 4> lengths = [] {
    const workload w = bench::omni_step(2560);
    std::array<std::vector<length_t>, 4> out;
    for (std::size_t k = 0; k < phases.size(); ++k) out[k] = phase_items_of(w, phases[k]).weights;
    out[3] = phase_items_of(bench::omni_step(2560, 60, true), "image").weights;
    return out;
  }();
  return lengths[phase];
}

[[nodiscard]] std::string phase_label(std::size_t phase) {
  return phase < phases.size() ? phases[phase] : "image (image-heavy)";
}

template <class Algorithm, class C>
void run_phase(benchmark::State& state, const Algorithm& algorithm, const C& cost) {
  const auto phase = static_cast<std::size_t>(state.range(0));
  const bool with_refine = state.range(1) != 0;
  balance::refine_options options;
  options.cost_class_filter = state.range(1) != 2;
  const std::vector<length_t>& w = orchestrated_phase(phase);
  const rank_t d = 2560;
  assignment a, r;
  // The two parts timed apart in the same iterations as well: their ratio does not drift with
  // the VM's speed between two benchmarks.
  double alone_s = 0, refine_s = 0;
  // `lpt+refine` under `tokens` runs fused (`lpt_refined`), as the policy runs it, except in
  // mode 3: the two calls; then X+refine's time is that of the fused call, X alone timed
  // before it in the same iteration.
  constexpr bool fusable = std::same_as<Algorithm, balance::lpt> && std::same_as<C, cost::tokens>;
  const bool fused = fusable && with_refine && state.range(1) != 3;
  for (auto _ : state) {  // as the policy's `X+refine` runs: the start handed over, its slots not checked again
    const auto t0 = std::chrono::steady_clock::now();
    a = algorithm(w, d, cost, balance::constraints{});
    const auto t1 = std::chrono::steady_clock::now();
    if constexpr (fusable)
      if (fused) r = balance::detail::lpt_refined(w, d, cost, options);
    if (with_refine && !fused)
      r = balance::detail::refine_valid_start(w, std::move(a), cost, balance::constraints{}, options);
    benchmark::DoNotOptimize(a);
    benchmark::DoNotOptimize(r);
    alone_s += std::chrono::duration<double>(t1 - t0).count();
    refine_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  }
  if (with_refine) {
    quality_counters(state, w, d, cost, algorithm(w, d, cost, balance::constraints{}), r);
    state.counters["with_refine_over_alone"] = ((fused ? 0 : alone_s) + refine_s) / alone_s;  // same iterations
  }
  state.SetLabel(phase_label(phase) + (with_refine ? " +refine" : "") + (fused ? " (fused)" : "") +
                 (options.cost_class_filter ? "" : " (no class filter)"));
  state.counters["items"] = static_cast<double>(w.size());
}

void BM_orchestrated_phase(benchmark::State& state) {
  switch (state.range(0)) {
    case 0:
    case 3:
      return run_phase(state, balance::lpt{}, cost::tokens{});
    case 1:
      return run_phase(state, balance::padded_binary_search{}, cost::padded{});
    default:
      return run_phase(state, balance::lpt{}, cost::attention{1.0, orchestrate::default_llm_beta});
  }
}

// `bin_loads` of a phase's items on their origin ranks (consecutive items of one sample share a
// rank), as the orchestrator's report folds them (args: phase as in `BM_orchestrated_phase`
// but 0 or 3; 0 the same-run baseline, a user cost equal to `tokens` and so folded through the
// whole state; 1 `tokens`, one integer per bin).
struct tokens_by_state : cost::stats_cost_base {
  [[nodiscard]] double value(const state& s) const noexcept { return static_cast<double>(s.sum); }
  [[nodiscard]] double item(length_t l) const noexcept { return static_cast<double>(l); }
};
void BM_bin_loads(benchmark::State& state) {
  static const std::array<phase_items, 2> items = [] {
    return std::array<phase_items, 2>{phase_items_of(bench::omni_step(2560), "image"),
                                      phase_items_of(bench::omni_step(2560, 60, true), "image")};
  }();
  const phase_items& p = items[state.range(0) == 0 ? 0 : 1];
  std::vector<double> loads;
  for (auto _ : state) {
    if (state.range(1) == 0)
      loads = bin_loads(std::span<const rank_t>(p.origin), 2560, p.weights, tokens_by_state{});
    else
      loads = bin_loads(std::span<const rank_t>(p.origin), 2560, p.weights, cost::tokens{});
    benchmark::DoNotOptimize(loads.data());
  }
  state.SetLabel(phase_label(static_cast<std::size_t>(state.range(0))) +
                 (state.range(1) == 0 ? " state fold (baseline)" : " tokens"));
  state.counters["items"] = static_cast<double>(p.size());
}

// LPT's placement loop alone (`deal_least_loaded_packed` over the phase's lengths sorted
// descending, 2,560 bins; args: phase as in `BM_orchestrated_phase`, 0 item by item — the
// same-run baseline — or 1 with runs of equal lengths dealt in bulk, as `lpt` does).
void BM_lpt_deal(benchmark::State& state) {
  std::vector<length_t> w = orchestrated_phase(static_cast<std::size_t>(state.range(0)));
  std::sort(w.begin(), w.end(), std::greater<>());
  const rank_t d = 2560;
  std::vector<rank_t> bin(w.size());
  auto add = [&](std::size_t k) { return std::uint64_t{w[k]}; };
  auto place = [&](std::size_t k, rank_t b) { bin[k] = b; };
  for (auto _ : state) {
    if (state.range(1) == 0)
      mmbal::detail::deal_least_loaded_packed(w.size(), d, add, place);
    else
      mmbal::detail::deal_least_loaded_packed(w.size(), d, add, place,
                                              [&](std::size_t k, std::size_t e) { return w[k] == w[e]; });
    benchmark::DoNotOptimize(bin.data());
  }
  std::size_t in_runs = 0;
  for (std::size_t k = 0, e = 0; k < w.size(); k = e) {
    for (e = k; e < w.size() && w[e] == w[k];) ++e;
    if (e - k >= mmbal::detail::min_equal_run(d)) in_runs += e - k;
  }
  state.SetLabel(phase_label(static_cast<std::size_t>(state.range(0))) + (state.range(1) ? " runs" : " item by item"));
  state.counters["items"] = static_cast<double>(w.size());
  state.counters["in_runs"] = static_cast<double>(in_runs);
}

// Every phase of the same step under the padded cost and `padded_binary_search` (args: phase,
// 0 alone / 1 followed by refine): refine's padded path on all three phases, the audio one
// being `BM_orchestrated_phase/1/*`.
void BM_padded_phase(benchmark::State& state) { run_phase(state, balance::padded_binary_search{}, cost::padded{}); }

// The item lengths of phase `range(0)` of `bench::omni_step(range(1) ranks, range(2) samples
// per rank)`: the instances of `BM_padded_lpt_refine` and `BM_padded_alone`.
std::vector<length_t> padded_instance_lengths(const benchmark::State& state) {
  const workload step =
      bench::omni_step(static_cast<rank_t>(state.range(1)), static_cast<std::uint64_t>(state.range(2)));
  return phase_items_of(step, phases[static_cast<std::size_t>(state.range(0))]).weights;
}

// `lpt` + refine under the padded cost, against `padded_binary_search` on the same lengths
// (args: phase, ranks, samples per rank; `bench::omni_step`): `lpt` mixes long and short items
// in every bin; the pool re-split (refine's padded escape) regroups them where a pool of
// ≤ 1,024 items spans enough bins.
// Counters: maxima over `padded_binary_search`'s, refine without the escape
// (`padded_pool_work` = 0) and with it (the default). Timed: lpt + refine with the escape.
void BM_padded_lpt_refine(benchmark::State& state) {
  const auto phase = static_cast<std::size_t>(state.range(0));
  const auto d = static_cast<rank_t>(state.range(1));
  const std::vector<length_t> w = padded_instance_lengths(state);
  const cost::padded cost;
  assignment a, r;
  for (auto _ : state) {
    a = balance::lpt{}(w, d, cost);
    r = balance::refine(w, a, cost, balance::constraints{});
    benchmark::DoNotOptimize(r);
  }
  balance::refine_options no_escape;
  no_escape.padded_pool_work = 0;
  const double best = max_of(bin_loads(balance::padded_binary_search{}(w, d, cost), w, cost));
  state.counters["lpt_over_pbs"] = max_of(bin_loads(a, w, cost)) / best;
  state.counters["refined_no_escape_over_pbs"] =
      max_of(bin_loads(balance::refine(w, a, cost, balance::constraints{}, no_escape), w, cost)) / best;
  state.counters["refined_over_pbs"] = max_of(bin_loads(r, w, cost)) / best;
  state.counters["items"] = static_cast<double>(w.size());
  state.SetLabel(phases[phase]);
}

// The same-run time baselines of `BM_padded_lpt_refine`, on the same lengths (args: phase,
// ranks, samples per rank, then 0 = `lpt` alone, 1 = `padded_binary_search` alone).
void BM_padded_alone(benchmark::State& state) {
  const auto phase = static_cast<std::size_t>(state.range(0));
  const auto d = static_cast<rank_t>(state.range(1));
  const std::vector<length_t> w = padded_instance_lengths(state);
  const cost::padded cost;
  const bool binary_search = state.range(3) == 1;
  for (auto _ : state) {
    assignment a = binary_search ? balance::padded_binary_search{}(w, d, cost) : balance::lpt{}(w, d, cost);
    benchmark::DoNotOptimize(a);
  }
  state.SetLabel(std::string(phases[phase]) + (binary_search ? " padded_binary_search" : " lpt"));
}

// The instances of `BM_padded_lpt_refine` (phase, ranks, samples per rank), with `extra`
// appended to each (the baselines' algorithm).
void padded_instances(benchmark::internal::Benchmark* b, std::initializer_list<std::int64_t> extra) {
  for (const auto& [phase, d, spr] : {std::array<std::int64_t, 3>{2, 8, 16},
                                      {2, 16, 4},
                                      {2, 16, 16},
                                      {2, 64, 16},
                                      {2, 8, 60},
                                      {1, 8, 16},
                                      {1, 64, 4},
                                      {1, 256, 60},
                                      {2, 2560, 60}}) {
    std::vector<std::int64_t> a{phase, d, spr};
    a.insert(a.end(), extra);
    b->Args(a);
  }
  b->Unit(benchmark::kMillisecond);
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

// Few samples per rank (8), where the longest sample often sets the maximum (llava): lpt alone
// and lpt + refine on the same lengths.
void small_args(benchmark::internal::Benchmark* b) {
  for (int f : {static_cast<int>(family::omni), static_cast<int>(family::llava)})
    for (int d : {8, 32, 512}) b->Args({f, d, 8});
  b->Unit(benchmark::kMicrosecond);
}
BENCHMARK(BM_lpt)->Apply(small_args);
BENCHMARK(BM_lpt_refine)->Apply(small_args);

BENCHMARK(BM_whole_pool)
    ->ArgsProduct({{128, 256, 512}, {8, 64}, {0, 1}, {0, 1, 2, 3, 4}})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_orchestrated_phase)->ArgsProduct({{0, 1, 2, 3}, {0, 1, 2}})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_orchestrated_phase)->ArgsProduct({{0, 3}, {3}})->Unit(benchmark::kMillisecond);  // unfused
BENCHMARK(BM_bin_loads)->ArgsProduct({{0, 3}, {0, 1}})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_lpt_deal)->ArgsProduct({{0, 1, 2, 3}, {0, 1}})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_padded_phase)->ArgsProduct({{0, 1, 2}, {0, 1}})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_padded_lpt_refine)->Apply([](benchmark::internal::Benchmark* b) { padded_instances(b, {}); });
BENCHMARK(BM_padded_alone)->Apply([](benchmark::internal::Benchmark* b) {
  padded_instances(b, {0});
  padded_instances(b, {1});
});
BENCHMARK_MAIN();
