// Orchestration at OrchMLLM's scale (docs/DESIGN.md §7): 2,560 ranks × 60 omni samples, three
// phases (image, audio, LLM), including relabeling and composition.
//
// Workload: docs/WORKLOADS.md family (d) (omni), 153,600 samples dealt round-robin, seed 1. Video
// segments are encoded by the same ViT as images in Qwen2-VL, so they join the image phase
// here (three phases as in OrchMLLM's MLLM-10B evaluation). Policies: the orchestrator's
// defaults (image tokens + lpt+refine, audio padded + padded, LLM attention + lpt+refine), 8
// ranks per node, 1 byte per token.
//
// Reported in the same run:
// - BM_sort_baseline: std::sort of as many random 64-bit keys as the three phases have items
//   (a copy of the keys is sorted each iteration; the copy is included);
// - BM_orchestrate/threads: the full plan (wall time; /0 = hardware concurrency, /1 = serial); counters
// `peak_extra_MiB` (peak heap growth while planning,
//   from a counting operator new), `composed_over_two_hop` (encoder→LLM bytes), the items;
// - BM_orchestrate_reuse/threads: the same, each plan written into the previous one's
//   orchestration with one caller-owned workspace (`plan(w, out, workspace)`, a training
//   loop's steady state);
// - BM_orchestrate_alone/threads/lpt: a fresh result every call with nothing else of the
//   benchmark's alive (BM_orchestrate keeps two more orchestrations for its counters, which
//   keeps glibc's heap fragmented): a loop of fresh plans; counter `faults_per_plan` (minor
//   page faults, getrusage; bench/RESULTS.md "Session 13 — first touches"); `lpt` = 1: the
//   image and LLM phases with plain `lpt` (the defaults before session 31), the same-run
//   baseline of the default `lpt+refine`, with counters `max_over_lb_<phase>`;
// - BM_orchestrate_no_relabel: the same without node-wise relabeling;
// - BM_orchestrate_migrate: every phase with `migrate` (eps 0.1 %, its default); counters compare with the
//   lpt plan: total and inter-node bytes per step and the worst per-phase max ratio.
#include "counting_allocator.hpp"
#include "omni_step.hpp"

#include <mmbal/orchestrate/orchestrator.hpp>
#include <mmbal/spec/policy.hpp>

#include <benchmark/benchmark.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#ifdef __unix__
#include <sys/resource.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <new>
#include <vector>

namespace {

constexpr mmbal::rank_t ranks = 2560;
constexpr mmbal::rank_t ranks_per_node = 8;
constexpr std::uint64_t samples_per_rank = 60;

const mmbal::workload& omni_workload() {
  static const mmbal::workload w = mmbal::bench::omni_step(ranks, samples_per_rank);
  return w;
}

mmbal::orchestrate::orchestrator make(bool relabel, const char* algorithm = nullptr, unsigned threads = 0) {
  mmbal::orchestrate::orchestrator_options opt;
  opt.ranks = ranks;
  opt.ranks_per_node = ranks_per_node;
  opt.relabel = relabel;
  opt.threads = threads;
  mmbal::orchestrate::orchestrator o(opt);
  if (algorithm)
    for (const char* phase : {"image", "audio", "llm"}) {
      o.set_policy(phase, mmbal::spec::with_specs(mmbal::orchestrate::default_policy(phase), "", algorithm));
    }
  return o;
}

std::uint64_t total_items(const mmbal::orchestrate::orchestration& o) {
  std::uint64_t n = 0;
  for (const auto& p : o.phases) n += p.report.items;
  return n;
}

void BM_sort_baseline(benchmark::State& state) {
  const auto o = make(false).plan(omni_workload());
  const std::uint64_t n = total_items(o);
  std::vector<std::uint64_t> keys(n);
  std::uint64_t x = 88172645463325252ull;
  for (auto& k : keys) {  // xorshift64: any fixed pseudo-random keys
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    k = x;
  }
  std::vector<std::uint64_t> work(n);
  for (auto _ : state) {
    std::copy(keys.begin(), keys.end(), work.begin());
    std::sort(work.begin(), work.end());
    benchmark::DoNotOptimize(work.data());
  }
  state.counters["keys"] = static_cast<double>(n);
}
BENCHMARK(BM_sort_baseline)->Unit(benchmark::kMillisecond);

void run_plan(benchmark::State& state, bool relabel, bool reuse = false) {
  const auto& w = omni_workload();
  const auto threads = static_cast<unsigned>(state.range(0));
  const auto orch = make(relabel, nullptr, threads);
  // One measured run for memory: peak heap growth above the level before planning.
  const std::int64_t before = bench_heap::live.load();
  bench_heap::peak.store(before);
  mmbal::orchestrate::orchestration o = orch.plan(w);
  const double peak_mib = static_cast<double>(bench_heap::peak.load() - before) / (1024.0 * 1024.0);
  mmbal::orchestrate::orchestration previous = orch.plan(w);
  mmbal::orchestrate::plan_workspace workspace;
  for (auto _ : state) {
    if (reuse) {  // a training loop: this step's plan goes into the last step's orchestration
      orch.plan(w, previous, workspace);
      benchmark::DoNotOptimize(previous.fingerprint);
    } else {
      auto r = orch.plan(w);
      benchmark::DoNotOptimize(r.fingerprint);
    }
  }
  state.counters["peak_extra_MiB"] = peak_mib;
  state.counters["threads"] = std::min<double>(mmbal::resolve_threads(threads), static_cast<double>(o.phases.size()));
  state.counters["items"] = static_cast<double>(total_items(o));
  state.counters["composed_over_two_hop"] =
      o.two_hop_bytes ? static_cast<double>(o.composed_bytes) / static_cast<double>(o.two_hop_bytes) : 1.0;
  double id = 0, rel = 0;
  for (const auto& p : o.phases) {
    id = std::max(id, static_cast<double>(p.report.inter_node_max_identity));
    rel = std::max(rel, static_cast<double>(p.report.inter_node_max_relabeled));
    state.counters[p.name + "_max_over_lb"] = p.report.lower_bound > 0 ? p.report.max_after / p.report.lower_bound : 1;
  }
  state.counters["internode_max_relabeled_over_identity"] = id > 0 ? rel / id : 1.0;
}

// Argument: `orchestrator_options::threads` (0 = hardware concurrency, 1 = serial). Wall time
// (UseRealTime): with threads the benchmark's CPU column counts the calling thread only.
void BM_orchestrate(benchmark::State& state) { run_plan(state, true); }
BENCHMARK(BM_orchestrate)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

// The same, planning into the previous step's orchestration with one workspace (`plan(w, out, workspace)`).
void BM_orchestrate_reuse(benchmark::State& state) { run_plan(state, true, true); }
BENCHMARK(BM_orchestrate_reuse)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

#ifdef __unix__
void BM_orchestrate_alone(benchmark::State& state) {
  const auto& w = omni_workload();
  auto orch = make(true, nullptr, static_cast<unsigned>(state.range(0)));
  if (state.range(1) == 1)
    for (const char* phase : {"image", "llm"})
      orch.set_policy(phase, mmbal::spec::with_specs(mmbal::orchestrate::default_policy(phase), "", "lpt"));
  auto minor_faults = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
  };
  const long before = minor_faults();
  for (auto _ : state) {
    const mmbal::orchestrate::orchestration o = orch.plan(w);
    benchmark::DoNotOptimize(o.fingerprint);
  }
  state.counters["faults_per_plan"] = static_cast<double>(minor_faults() - before) /
                                      static_cast<double>(std::max<benchmark::IterationCount>(1, state.iterations()));
  for (const auto& p : orch.plan(w).phases)
    state.counters["max_over_lb_" + p.name] = p.report.max_after / p.report.lower_bound;
}
BENCHMARK(BM_orchestrate_alone)->Args({0, 0})->Args({0, 1})->UseRealTime()->Unit(benchmark::kMillisecond);
#endif

void BM_orchestrate_no_relabel(benchmark::State& state) { run_plan(state, false); }
BENCHMARK(BM_orchestrate_no_relabel)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

// Where the time goes: the orchestrator's stages run one by one (same calls as `plan`), CPU
// milliseconds per stage summed over the three phases as counters.
void BM_breakdown(benchmark::State& state) {
  const auto& w = omni_workload();
  const auto cpu_ms = [] { return static_cast<double>(std::clock()) * 1000.0 / CLOCKS_PER_SEC; };
  double items_ms = 0, solve_ms = 0, relabel_ms = 0, compose_ms = 0, report_ms = 0;
  std::int64_t runs = 0;
  for (auto _ : state) {
    std::vector<mmbal::phase_items> items;
    std::vector<mmbal::rearrangement> forward;
    for (const char* phase : {"image", "audio", "llm"}) {
      double t = cpu_ms();
      mmbal::phase_items it = mmbal::phase_items_of(w, phase);
      std::vector<std::uint64_t> bytes(it.weights.begin(), it.weights.end());
      items_ms += cpu_ms() - t;
      t = cpu_ms();
      const auto policy = mmbal::orchestrate::default_policy(phase);
      mmbal::balance::problem prob;
      prob.weights = it.weights;
      prob.bins = ranks;
      prob.origin = it.origin;
      prob.item_bytes = bytes;
      prob.ranks_per_node = ranks_per_node;
      const mmbal::assignment a = policy.balancer.balance(prob);
      solve_ms += cpu_ms() - t;
      t = cpu_ms();
      const mmbal::rearrangement r = mmbal::rearrangement::from_origin(it.origin, a);
      const mmbal::relabeling rl = mmbal::relabel_nodewise(r, bytes, ranks_per_node);
      mmbal::rearrangement f = mmbal::apply_relabeling(r, rl.rank_of_batch);
      relabel_ms += cpu_ms() - t;
      t = cpu_ms();
      std::vector<mmbal::rank_t> final_ranks(f.size());
      for (std::size_t i = 0; i < f.size(); ++i) final_ranks[i] = f.destination[i].rank;
      const auto loads = policy.balancer.measure(it.weights, it.origin, final_ranks, ranks, false);
      benchmark::DoNotOptimize(loads.after.data());
      benchmark::DoNotOptimize(mmbal::fingerprint(f, bytes));
      report_ms += cpu_ms() - t;
      items.push_back(std::move(it));
      forward.push_back(std::move(f));
    }
    const double t = cpu_ms();
    for (std::size_t k = 0; k < 2; ++k) {
      mmbal::rearrangement c;
      mmbal::compose_to_llm(items[k], forward[k], forward[2], mmbal::plan_validation::trusted, c);
      benchmark::DoNotOptimize(c.destination.data());
    }
    compose_ms += cpu_ms() - t;
    ++runs;
  }
  const double n = static_cast<double>(std::max<std::int64_t>(runs, 1));
  state.counters["items_ms"] = items_ms / n;
  state.counters["solve_ms"] = solve_ms / n;
  state.counters["relabel_ms"] = relabel_ms / n;
  state.counters["compose_ms"] = compose_ms / n;
  state.counters["loads_fp_ms"] = report_ms / n;
}
BENCHMARK(BM_breakdown)->Unit(benchmark::kMillisecond);

void BM_orchestrate_migrate(benchmark::State& state) {
  const auto& w = omni_workload();
  const auto lpt = make(true, "lpt").plan(w);
  const auto orch = make(true, "migrate:eps=0.001");
  const std::int64_t before = bench_heap::live.load();
  bench_heap::peak.store(before);
  const auto mig = orch.plan(w);
  const double peak_mib = static_cast<double>(bench_heap::peak.load() - before) / (1024.0 * 1024.0);
  for (auto _ : state) {
    auto r = orch.plan(w);
    benchmark::DoNotOptimize(r.fingerprint);
  }
  double lpt_bytes = 0, mig_bytes = 0, lpt_inter = 0, mig_inter = 0, worst_max = 0;
  for (std::size_t k = 0; k < mig.phases.size(); ++k) {
    const auto& a = lpt.phases[k].report;
    const auto& b = mig.phases[k].report;
    lpt_bytes += static_cast<double>(a.moved_bytes);
    mig_bytes += static_cast<double>(b.moved_bytes);
    lpt_inter += static_cast<double>(a.inter_node_bytes);
    mig_inter += static_cast<double>(b.inter_node_bytes);
    worst_max = std::max(worst_max, a.max_after > 0 ? b.max_after / a.max_after : 1.0);
    state.counters[b.name + "_bytes_vs_lpt"] =
        a.moved_bytes ? static_cast<double>(b.moved_bytes) / static_cast<double>(a.moved_bytes) : 1.0;
  }
  state.counters["peak_extra_MiB"] = peak_mib;
  state.counters["bytes_vs_lpt"] = lpt_bytes > 0 ? mig_bytes / lpt_bytes : 1.0;
  state.counters["internode_bytes_vs_lpt"] = lpt_inter > 0 ? mig_inter / lpt_inter : 1.0;
  state.counters["worst_max_vs_lpt"] = worst_max;
  state.counters["worst_max_excess_pct"] = (worst_max - 1.0) * 100.0;
  state.counters["lpt_bytes_per_step"] = lpt_bytes;
  state.counters["migrate_bytes_per_step"] = mig_bytes;
}
BENCHMARK(BM_orchestrate_migrate)->UseRealTime()->Unit(benchmark::kMillisecond);

#ifdef __GLIBC__
// The same plan in a process whose allocator keeps freed pages (glibc told not to trim its
// heap nor to mmap large blocks; jemalloc and tcmalloc behave so by default). Fresh pages
// cost about 2 µs each on this VM and glibc returns the ~30 MB a plan frees at the end of
// every call, so by default every plan faults its memory in again. Registered last: mallopt
// changes the process for every benchmark after it.
void BM_orchestrate_retained_heap(benchmark::State& state) {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's maximum; every block of a plan is smaller
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  run_plan(state, true);
}
BENCHMARK(BM_orchestrate_retained_heap)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);
#endif

}  // namespace

BENCHMARK_MAIN();
