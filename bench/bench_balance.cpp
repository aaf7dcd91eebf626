// Speed of the DP post-balancing partitioners (docs/DESIGN.md §7):
// - LPT at n = 153,600 items into d = 2,560 bins (OrchMLLM's 2,560-GPU scale, 60 samples per
//   rank) on the LLM lengths of generated omni workloads (family d), against, in the same
//   run, std::sort of the same n keys and a textbook std::priority_queue LPT;
// - Karmarkar–Karp at n = 16,384, d = 128 (unconstrained and equal-count);
// - the overhead of `+refine` through `solve`.
// Ratios are reported as counters by the `*_ratio` benchmarks, which time both sides in the
// same loop iteration (alternating), so machine load affects both alike.
#include <mmbal/balance/karmarkar_karp.hpp>
#include <mmbal/balance/lpt.hpp>
#include <mmbal/cost/functions.hpp>
#include <mmbal/cost/metrics.hpp>
#include <mmbal/spec/algorithm.hpp>
#include <mmbal/workload/generators.hpp>
#include <mmbal/workload/length_data.hpp>
#include <mmbal/workload/sample.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <queue>
#include <utility>
#include <vector>

namespace {

using namespace mmbal;

/// LLM-phase lengths (total tokens per sample) of a generated omni workload.
const std::vector<length_t>& omni_lengths(std::uint64_t n) {
  static std::map<std::uint64_t, std::vector<length_t>> cache;
  auto& slot = cache[n];
  if (slot.empty()) {
    generator_options o;
    o.samples = n;
    o.ranks = 2560;
    o.seed = 2026;
    slot = llm_phase_items(generate(family::omni, o, default_length_data())).weights;
  }
  return slot;
}

constexpr std::uint64_t lpt_items = 153600;
constexpr rank_t lpt_bins = 2560;

/// Textbook LPT: std::sort of (weight, id) pairs, std::priority_queue of (load, bin).
assignment naive_lpt(const std::vector<length_t>& w, rank_t d) {
  std::vector<std::pair<length_t, item_id>> items(w.size());
  for (item_id i = 0; i < w.size(); ++i) items[i] = {w[i], i};
  std::sort(items.begin(), items.end(),
            [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  using entry = std::pair<std::uint64_t, rank_t>;
  std::priority_queue<entry, std::vector<entry>, std::greater<entry>> heap;
  for (rank_t b = 0; b < d; ++b) heap.emplace(0, b);
  assignment a{d, std::vector<location>(w.size())};
  std::vector<std::uint32_t> count(d, 0);
  for (const auto& [len, i] : items) {
    const auto [load, b] = heap.top();
    heap.pop();
    a.where[i] = location{b, count[b]++};
    heap.emplace(load + len, b);
  }
  return a;
}

void sort_keys(const std::vector<length_t>& w) {
  std::vector<length_t> keys(w.begin(), w.end());
  std::sort(keys.begin(), keys.end());
  benchmark::DoNotOptimize(keys.data());
  benchmark::ClobberMemory();
}

void BM_std_sort_keys(benchmark::State& state) {
  const auto& w = omni_lengths(lpt_items);
  for (auto _ : state) sort_keys(w);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * w.size()));
}
BENCHMARK(BM_std_sort_keys)->Unit(benchmark::kMillisecond);

void BM_lpt_tokens(benchmark::State& state) {
  const auto& w = omni_lengths(lpt_items);
  for (auto _ : state) benchmark::DoNotOptimize(balance::lpt{}(w, lpt_bins, cost::tokens{}));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * w.size()));
  const assignment a = balance::lpt{}(w, lpt_bins, cost::tokens{});
  const auto loads = bin_loads(a, w, cost::tokens{});
  state.counters["max_over_lb"] = *std::max_element(loads.begin(), loads.end()) /
                                  lower_bound(std::span<const length_t>(w), lpt_bins, cost::tokens{});
}
BENCHMARK(BM_lpt_tokens)->Unit(benchmark::kMillisecond);

void BM_lpt_attention(benchmark::State& state) {
  const auto& w = omni_lengths(lpt_items);
  const cost::attention c{1.0, 1.0 / 8192};
  for (auto _ : state) benchmark::DoNotOptimize(balance::lpt{}(w, lpt_bins, c));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * w.size()));
}
BENCHMARK(BM_lpt_attention)->Unit(benchmark::kMillisecond);

void BM_lpt_naive_priority_queue(benchmark::State& state) {
  const auto& w = omni_lengths(lpt_items);
  for (auto _ : state) benchmark::DoNotOptimize(naive_lpt(w, lpt_bins));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * w.size()));
  state.counters["same_as_lpt"] = naive_lpt(w, lpt_bins) == balance::lpt{}(w, lpt_bins, cost::tokens{});
}
BENCHMARK(BM_lpt_naive_priority_queue)->Unit(benchmark::kMillisecond);

/// Same-run ratio: every iteration times std::sort and LPT back to back; the counters are
/// the ratios of the summed times (and of the per-pair minima, less sensitive to noise).
void BM_lpt_vs_sort_ratio(benchmark::State& state) {
  const auto& w = omni_lengths(lpt_items);
  using clock = std::chrono::steady_clock;
  double sort_total = 0, lpt_total = 0, naive_total = 0;
  double sort_min = 1e300, lpt_min = 1e300, naive_min = 1e300;
  for (auto _ : state) {
    const auto t0 = clock::now();
    sort_keys(w);
    const auto t1 = clock::now();
    benchmark::DoNotOptimize(balance::lpt{}(w, lpt_bins, cost::tokens{}));
    const auto t2 = clock::now();
    benchmark::DoNotOptimize(naive_lpt(w, lpt_bins));
    const auto t3 = clock::now();
    const double s = std::chrono::duration<double>(t1 - t0).count();
    const double l = std::chrono::duration<double>(t2 - t1).count();
    const double q = std::chrono::duration<double>(t3 - t2).count();
    sort_total += s, lpt_total += l, naive_total += q;
    sort_min = std::min(sort_min, s), lpt_min = std::min(lpt_min, l), naive_min = std::min(naive_min, q);
  }
  state.counters["lpt_over_sort"] = lpt_total / sort_total;
  state.counters["lpt_over_sort_min"] = lpt_min / sort_min;
  state.counters["naive_over_sort"] = naive_total / sort_total;
  state.counters["sort_ms_min"] = sort_min * 1e3;
  state.counters["lpt_ms_min"] = lpt_min * 1e3;
  state.counters["naive_ms_min"] = naive_min * 1e3;
}
BENCHMARK(BM_lpt_vs_sort_ratio)->Unit(benchmark::kMillisecond)->Iterations(60);

void BM_kk(benchmark::State& state) {
  const auto& w = omni_lengths(16384);
  const rank_t d = 128;
  balance::constraints limits;
  if (state.range(0) == 1) limits.counts.kind = balance::count_cap::mode::equal;
  for (auto _ : state) benchmark::DoNotOptimize(balance::karmarkar_karp{}(w, d, cost::tokens{}, limits));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * w.size()));
  const assignment kk = balance::karmarkar_karp{}(w, d, cost::tokens{}, limits);
  const assignment l = balance::lpt{}(w, d, cost::tokens{}, limits);
  const double lb = state.range(0) == 1 ? equal_count_lower_bound(std::span<const length_t>(w), d, cost::tokens{})
                                        : lower_bound(std::span<const length_t>(w), d, cost::tokens{});
  const auto kl = bin_loads(kk, w, cost::tokens{});
  const auto ll = bin_loads(l, w, cost::tokens{});
  state.counters["kk_max_over_lb"] = *std::max_element(kl.begin(), kl.end()) / lb;
  state.counters["lpt_max_over_lb"] = *std::max_element(ll.begin(), ll.end()) / lb;
}
BENCHMARK(BM_kk)->Arg(0)->Arg(1)->ArgName("equal")->Unit(benchmark::kMillisecond);

/// `+refine` overhead through `solve` at the LPT goal scale.
void BM_solve(benchmark::State& state, const char* spec) {
  const auto& w = omni_lengths(lpt_items);
  const spec::algorithm_spec s = spec::parse_algorithm(spec);
  const spec::any_cost c = cost::tokens{};
  for (auto _ : state) benchmark::DoNotOptimize(spec::solve(s, c, balance::problem{w, lpt_bins}));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * w.size()));
  const assignment a = spec::solve(s, c, balance::problem{w, lpt_bins});
  const auto loads = bin_loads(a, w, cost::tokens{});
  state.counters["max_over_lb"] = *std::max_element(loads.begin(), loads.end()) /
                                  lower_bound(std::span<const length_t>(w), lpt_bins, cost::tokens{});
}
BENCHMARK_CAPTURE(BM_solve, lpt, "lpt")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_solve, lpt_refine, "lpt+refine")->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
