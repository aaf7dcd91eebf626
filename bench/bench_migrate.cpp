// migrate vs lpt on data whose current placement is random (docs/DESIGN.md §7: max within 0.5 % of
// lpt's while moving <= 25 % of the bytes lpt moves). Same-run baseline: lpt from scratch.
#include <mmbal/balance/lpt.hpp>
#include <mmbal/balance/migrate.hpp>
#include <mmbal/balance/padded_binary_search.hpp>
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
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace {

using namespace mmbal;

/// LLM phase of a generated workload with a random current placement; bytes = 2 per token
/// (bf16 token ids / embeddings scale with tokens).
struct dataset {
  std::vector<length_t> weights;
  std::vector<rank_t> origin;
  std::vector<std::uint64_t> bytes;
};

const dataset& data(family f, rank_t d, std::uint64_t per_bin) {
  static std::map<std::tuple<int, rank_t, std::uint64_t>, dataset> cache;
  auto& slot = cache[{static_cast<int>(f), d, per_bin}];
  if (slot.weights.empty()) {
    generator_options o;
    o.samples = std::uint64_t{d} * per_bin;
    o.ranks = d;
    o.seed = 2026;
    slot.weights = llm_phase_items(generate(f, o, default_length_data())).weights;
    rng_engine g = make_rng(2026, 77);
    slot.origin.resize(slot.weights.size());
    for (auto& r : slot.origin) r = static_cast<rank_t>(uniform_below(g, d));
    slot.bytes.resize(slot.weights.size());
    for (std::size_t i = 0; i < slot.weights.size(); ++i) slot.bytes[i] = 2ull * slot.weights[i];
  }
  return slot;
}

double max_of(const std::vector<double>& v) { return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()); }

constexpr rank_t ranks_per_node = 8;

// args: family, d, items per bin, epsilon in units of 1e-4
void BM_migrate(benchmark::State& state) {
  const auto f = static_cast<family>(state.range(0));
  const rank_t d = static_cast<rank_t>(state.range(1));
  const dataset& ds = data(f, d, static_cast<std::uint64_t>(state.range(2)));
  const double eps = static_cast<double>(state.range(3)) * 1e-4;
  balance::migrate_result r;
  for (auto _ : state) {
    r = balance::migrate(ds.weights, ds.origin, ds.bytes, d, cost::tokens{}, balance::constraints{},
                         balance::migrate_options{eps, ranks_per_node});
    benchmark::DoNotOptimize(r);
  }
  // Same-run baseline: lpt from scratch, its max and the bytes it moves from the same origin.
  const assignment base = balance::lpt{}(ds.weights, d, cost::tokens{});
  const traffic lt = placement_traffic(ds.origin, base.to_partition(), ds.bytes, ranks_per_node);
  const double lpt_max = max_of(bin_loads(base, ds.weights, cost::tokens{}));
  const double mig_max = max_of(bin_loads(r.placement, ds.weights, cost::tokens{}));
  const double before = max_of(bin_loads(partition{d, ds.origin}, ds.weights, cost::tokens{}));
  state.counters["max_over_lpt"] = mig_max / lpt_max;
  state.counters["bytes_over_lpt"] = static_cast<double>(r.moved_bytes) / static_cast<double>(lt.moved_bytes);
  state.counters["inter_node_share"] =
      r.moved_bytes == 0 ? 0.0 : static_cast<double>(r.inter_node_bytes) / static_cast<double>(r.moved_bytes);
  state.counters["lpt_inter_node_share"] =
      static_cast<double>(lt.inter_node_bytes) / static_cast<double>(lt.moved_bytes);
  state.counters["items_moved_share"] = static_cast<double>(r.moved_items) / static_cast<double>(ds.weights.size());
  state.counters["max_before_over_lpt"] = before / lpt_max;
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * ds.weights.size()));
}

// Baseline: lpt from scratch on the same items (what migrate is compared with).
void BM_lpt_baseline(benchmark::State& state) {
  const auto f = static_cast<family>(state.range(0));
  const rank_t d = static_cast<rank_t>(state.range(1));
  const dataset& ds = data(f, d, static_cast<std::uint64_t>(state.range(2)));
  for (auto _ : state) benchmark::DoNotOptimize(balance::lpt{}(ds.weights, d, cost::tokens{}));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * ds.weights.size()));
}

void args(benchmark::internal::Benchmark* b) {
  const int omni = static_cast<int>(family::omni);
  for (int d : {64, 512, 2560})
    for (int per : {16, 60})
      for (int eps : {10, 50}) b->Args({omni, d, per, eps});
  b->Args({static_cast<int>(family::internvl), 512, 60, 10});
  b->Args({static_cast<int>(family::audio), 512, 60, 10});
  b->Args({static_cast<int>(family::llava), 512, 60, 10});
  b->Unit(benchmark::kMillisecond);
}

void base_args(benchmark::internal::Benchmark* b) {
  const int omni = static_cast<int>(family::omni);
  for (int d : {64, 512, 2560}) b->Args({omni, d, 60});
  b->Unit(benchmark::kMillisecond);
}

/// One phase of the omni workload as the tool builds it: the phase's items with their origin
/// (the sample's data-loader rank), bytes = 2 per token.
struct phase_dataset {
  std::vector<length_t> weights;
  std::vector<rank_t> origin;
  std::vector<std::uint64_t> bytes;
};

const char* const phase_names[] = {"audio", "image", "llm"};

const phase_dataset& phase_data(int phase, rank_t d) {
  static std::map<std::pair<int, rank_t>, phase_dataset> cache;
  auto& slot = cache[{phase, d}];
  if (slot.weights.empty()) {
    generator_options o;
    o.samples = std::uint64_t{d} * 60;
    o.ranks = d;
    o.seed = 2026;
    const workload w = generate(family::omni, o, default_length_data());
    const phase_items items = phase_items_of(w, phase_names[phase]);
    slot.weights = items.weights;
    slot.origin = items.origin;
    phase_item_bytes(items, 2, phase_names[phase], slot.bytes);
  }
  return slot;
}

// Quality of migrate for every cost (issue 13: within 0.5 % of the phase's best shipped
// algorithm while moving <= 25 % of that algorithm's bytes from the same origin). Args: phase
// (0 audio, 1 image, 2 llm), cost (0 tokens, 1 padded), d. The timed loop is migrate; the
// counters compare it with the best of the shipped algorithms listed below (same run).
void BM_migrate_phase(benchmark::State& state) {
  const int phase = static_cast<int>(state.range(0));
  const bool padded = state.range(1) == 1;
  const rank_t d = static_cast<rank_t>(state.range(2));
  const phase_dataset& ds = phase_data(phase, d);
  const spec::any_cost cost = spec::parse_cost(padded ? "padded" : "tokens");
  balance::problem p{ds.weights, d};
  p.origin = ds.origin;
  p.item_bytes = ds.bytes;
  p.ranks_per_node = ranks_per_node;
  balance::migrate_result r;
  for (auto _ : state) {
    std::visit(
        [&](const auto& c) {
          r = balance::migrate(ds.weights, ds.origin, ds.bytes, d, c, balance::constraints{},
                               balance::migrate_options{0.001, ranks_per_node});
        },
        cost);
    benchmark::DoNotOptimize(r);
  }
  // The best shipped algorithm for this cost (lpt+refine on padded costs never beats padded
  // there: it ends 1.5–9.7 × above it, session 18; left out).
  const std::vector<std::string> shipped =
      padded ? std::vector<std::string>{"padded", "lpt"} : std::vector<std::string>{"lpt", "lpt+refine", "kk"};
  double best_max = std::numeric_limits<double>::infinity();
  std::uint64_t best_bytes = 0;
  int best_index = -1;
  for (std::size_t a = 0; a < shipped.size(); ++a) {
    const assignment s = spec::solve(spec::parse_algorithm(shipped[a]), cost, p);
    const double m = std::visit([&](const auto& c) { return max_of(bin_loads(s, ds.weights, c)); }, cost);
    if (m < best_max) {
      best_max = m;
      best_index = static_cast<int>(a);
      best_bytes = placement_traffic(ds.origin, s.to_partition(), ds.bytes, ranks_per_node).moved_bytes;
    }
  }
  const double mig_max = std::visit([&](const auto& c) { return max_of(bin_loads(r.placement, ds.weights, c)); }, cost);
  state.counters["best_algorithm"] = best_index;  // index into the list above
  state.counters["best_max"] = best_max;
  state.counters["max_over_best"] = mig_max / best_max;
  state.counters["bytes_over_best"] =
      best_bytes == 0 ? 0.0 : static_cast<double>(r.moved_bytes) / static_cast<double>(best_bytes);
  state.counters["strategy_relabel"] = r.strategy == balance::migrate_strategy::relabel ? 1 : 0;
  state.counters["strategy_regroup"] = r.strategy == balance::migrate_strategy::regroup ? 1 : 0;
  state.counters["target_reached"] = r.target_reached ? 1 : 0;
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * ds.weights.size()));
}

// Baseline of the padded rows: `padded` alone on the same phase (the reference migrate starts from).
void BM_padded_phase(benchmark::State& state) {
  const int phase = static_cast<int>(state.range(0));
  const rank_t d = static_cast<rank_t>(state.range(2));
  const phase_dataset& ds = phase_data(phase, d);
  for (auto _ : state) benchmark::DoNotOptimize(balance::padded_binary_search{}(ds.weights, d, cost::padded{}));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * ds.weights.size()));
}

void phase_args(benchmark::internal::Benchmark* b) {
  for (int phase = 0; phase < 3; ++phase)
    for (int padded = 0; padded < 2; ++padded) b->Args({phase, padded, 2560});
  b->Unit(benchmark::kMillisecond)->Iterations(3);
}

}  // namespace

BENCHMARK(BM_lpt_baseline)->Apply(base_args);
BENCHMARK(BM_migrate)->Apply(args);
BENCHMARK(BM_migrate_phase)->Apply(phase_args);
BENCHMARK(BM_padded_phase)->Args({0, 1, 2560})->Args({1, 1, 2560})->Args({2, 1, 2560})->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
