// rearrange/: pack/unpack vs memcpy, node-wise relabeling at d = 2,560 and vs the exact
// optimum for small d, composed vs two-hop encoder -> LLM bytes on realistic omni data.
#include "omni_step.hpp"

#include <mmbal/balance/lpt.hpp>
#include <mmbal/balance/migrate.hpp>
#include <mmbal/cost/functions.hpp>
#include <mmbal/rearrange/alltoall_plan.hpp>
#include <mmbal/rearrange/composition.hpp>
#include <mmbal/rearrange/pack.hpp>
#include <mmbal/rearrange/relabel.hpp>

#include <mmbal/workload/generators.hpp>
#include <mmbal/workload/length_data.hpp>
#include <mmbal/workload/sample.hpp>
#include "../tests/rearrange/relabel_oracle.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <vector>

namespace {

using namespace mmbal;

/// A realistic omni global batch: `per_rank` samples on each of `d` ranks (dealt round-robin).
const workload& omni(rank_t d, std::uint64_t per_rank, std::uint64_t seed = 2026) {
  static std::map<std::tuple<rank_t, std::uint64_t, std::uint64_t>, workload> cache;
  auto& w = cache[{d, per_rank, seed}];
  if (w.samples.empty()) {
    generator_options o;
    o.samples = std::uint64_t{d} * per_rank;
    o.ranks = d;
    o.seed = seed;
    w = generate(family::omni, o, default_length_data());
  }
  return w;
}

/// Π of one phase: origin placement → `lpt` on the phase weights (tokens cost).
rearrangement lpt_plan(const phase_items& items, rank_t d) {
  return rearrangement::from_origin(items.origin, balance::lpt{}(items.weights, d, cost::tokens{}));
}

std::vector<std::uint64_t> bytes_of(const phase_items& items, std::uint64_t bytes_per_token) {
  std::vector<std::uint64_t> b(items.size());
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = std::uint64_t{items.weights[i]} * bytes_per_token;
  return b;
}

// ---------------------------------------------------------------------------------------------
// pack / unpack vs memcpy. Plan: rank 0 of an lpt rearrangement of omni LLM-phase samples on
// 8 ranks (~60 samples per rank); item bytes = tokens × arg1 (64 B/token: ~100 KiB items;
// 2 B/token: ~3 KiB items). Baseline: one memcpy of the same number of bytes.
struct pack_fixture {
  alltoall_plan plan;
  std::vector<std::byte> input, send, recv, output;
};

const pack_fixture& pack_data(std::uint64_t bytes_per_token) {
  static std::map<std::uint64_t, pack_fixture> cache;
  auto& f = cache[bytes_per_token];
  if (f.input.empty()) {
    const rank_t d = 8;
    const auto items = llm_phase_items(omni(d, 60));
    const auto r = lpt_plan(items, d);
    f.plan = make_alltoall_plan(r, bytes_of(items, bytes_per_token), 0);
    f.input.assign(f.plan.input_bytes, std::byte{1});
    f.send.resize(f.plan.send_bytes);
    f.recv.assign(f.plan.recv_bytes, std::byte{2});
    f.output.resize(f.plan.output_bytes);
  }
  return f;
}

void BM_memcpy(benchmark::State& state) {
  auto& f = const_cast<pack_fixture&>(pack_data(static_cast<std::uint64_t>(state.range(0))));
  for (auto _ : state) {
    std::memcpy(f.send.data(), f.input.data(), f.input.size());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * f.input.size()));
  state.counters["items"] = static_cast<double>(f.plan.pack_sizes.size());
}

void BM_pack(benchmark::State& state) {
  auto& f = const_cast<pack_fixture&>(pack_data(static_cast<std::uint64_t>(state.range(0))));
  for (auto _ : state) {
    pack(f.plan, f.input, f.send);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * f.plan.send_bytes));
  state.counters["items"] = static_cast<double>(f.plan.pack_sizes.size());
}

void BM_unpack(benchmark::State& state) {
  auto& f = const_cast<pack_fixture&>(pack_data(static_cast<std::uint64_t>(state.range(0))));
  for (auto _ : state) {
    unpack(f.plan, f.recv, f.output);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * f.plan.recv_bytes));
  state.counters["items"] = static_cast<double>(f.plan.unpack_sizes.size());
}

BENCHMARK(BM_memcpy)->Arg(64)->Arg(2)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_pack)->Arg(64)->Arg(2)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_unpack)->Arg(64)->Arg(2)->Unit(benchmark::kMicrosecond);

// ---------------------------------------------------------------------------------------------
// Node-wise relabeling at scale: omni LLM phase, d ranks × 60 samples, 8 ranks per node,
// destination = lpt (arg1 = 0) or migrate eps = 0.001 (arg1 = 1); arg1 = 2: the image phase
// of the image-heavy mix (`bench::omni_step(d, 60, true)`, 3.8 images per sample) under lpt.
// Baseline in the same run: building the volume of the identity (max_inter_node_volume), i.e.
// the cost of just looking; `BM_fingerprint` hashes the same plans.
struct relabel_fixture {
  rearrangement r;
  std::vector<std::uint64_t> bytes;
};

const relabel_fixture& relabel_data(rank_t d, int algo) {
  static std::map<std::pair<rank_t, int>, relabel_fixture> cache;
  auto& f = cache[{d, algo}];
  if (f.r.ranks == 0) {
    const auto items =
        algo == 2 ? phase_items_of(bench::omni_step(d, 60, true), "image") : llm_phase_items(omni(d, 60));
    f.bytes = bytes_of(items, 1);
    if (algo != 1) {
      f.r = lpt_plan(items, d);
    } else {
      const auto current = assignment::from_partition(partition{d, items.origin});
      const auto m = balance::migrate(items.weights, items.origin, f.bytes, d, cost::tokens{}, balance::constraints{},
                                      balance::migrate_options{.ranks_per_node = 8});
      f.r = rearrangement::between(current, m.placement);
    }
  }
  return f;
}

void BM_relabel_identity_volume(benchmark::State& state) {
  const auto& f = relabel_data(static_cast<rank_t>(state.range(0)), static_cast<int>(state.range(1)));
  for (auto _ : state) benchmark::DoNotOptimize(max_inter_node_volume(f.r, f.bytes, 8));
}

void BM_relabel(benchmark::State& state) {
  const auto& f = relabel_data(static_cast<rank_t>(state.range(0)), static_cast<int>(state.range(1)));
  relabeling out;
  for (auto _ : state) benchmark::DoNotOptimize(out = relabel_nodewise(f.r, f.bytes, 8));
  state.counters["max_identity"] = static_cast<double>(out.max_identity);
  state.counters["max_relabeled"] = static_cast<double>(out.max_relabeled);
  state.counters["relabeled_over_identity"] =
      out.max_identity ? static_cast<double>(out.max_relabeled) / static_cast<double>(out.max_identity) : 1.0;
  state.counters["swaps"] = out.iterations;
}

void BM_fingerprint(benchmark::State& state) {
  const auto& f = relabel_data(static_cast<rank_t>(state.range(0)), static_cast<int>(state.range(1)));
  for (auto _ : state) benchmark::DoNotOptimize(fingerprint(f.r, f.bytes));
  state.counters["items"] = static_cast<double>(f.r.size());
}

BENCHMARK(BM_relabel_identity_volume)->Args({2560, 0})->Args({2560, 1})->Args({2560, 2})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_relabel)->Args({2560, 0})->Args({2560, 1})->Args({2560, 2})->Args({512, 0})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_fingerprint)->Args({2560, 0})->Args({2560, 2})->Unit(benchmark::kMillisecond);

// ---------------------------------------------------------------------------------------------
// Heuristic vs exact optimum, d ≤ 16. arg0 = d, arg1 = ranks per node, arg2 = instance kind:
// 0 random (items uniformly from everywhere to everywhere, lognormal bytes), 1 realistic
// (omni samples, 12 per rank, lpt), 2 shuffled (new batches = old mini-batches under random
// labels, 30 % of items elsewhere: the case relabeling exists for). 20 instances each.
rearrangement random_instance(rng_engine& g, rank_t d, std::uint32_t n, std::vector<std::uint64_t>& bytes, int kind,
                              std::uint64_t seed) {
  if (kind == 1) {
    const auto items = llm_phase_items(omni(d, 12, seed));
    bytes = bytes_of(items, 1);
    return lpt_plan(items, d);
  }
  bytes.resize(n);
  for (auto& b : bytes) b = 1 + static_cast<std::uint64_t>(lognormal(g, 1000.0, 1.0));
  std::vector<rank_t> src(n), dst(n), label(d);
  std::iota(label.begin(), label.end(), rank_t{0});
  shuffle(std::span<rank_t>(label), g);
  for (std::uint32_t i = 0; i < n; ++i) {
    src[i] = static_cast<rank_t>(uniform_below(g, d));
    dst[i] = kind == 2 && uniform01(g) >= 0.3 ? label[src[i]] : static_cast<rank_t>(uniform_below(g, d));
  }
  return rearrangement::from_origin(src, assignment::from_partition(partition{d, dst}));
}

void BM_relabel_vs_exact(benchmark::State& state) {
  const auto d = static_cast<rank_t>(state.range(0));
  const auto c = static_cast<rank_t>(state.range(1));
  const int kind = static_cast<int>(state.range(2));
  double sum = 0, worst = 1, identity_sum = 0;
  int optimal = 0, worse_than_identity = 0;
  const int instances = 20;
  for (auto _ : state) {
    sum = 0, worst = 1, identity_sum = 0, optimal = 0, worse_than_identity = 0;
    for (int t = 0; t < instances; ++t) {
      auto g = make_rng(99, d * 100 + c, static_cast<std::uint64_t>(t * 10 + kind));
      std::vector<std::uint64_t> bytes;
      const auto r = random_instance(g, d, 12 * d, bytes, kind, 5000 + static_cast<std::uint64_t>(t));
      const auto h = relabel_nodewise(r, bytes, c);
      const auto e = relabel_nodewise_exact(r, bytes, c);
      const double gap =
          e.max_relabeled ? static_cast<double>(h.max_relabeled) / static_cast<double>(e.max_relabeled) : 1.0;
      sum += gap;
      worst = std::max(worst, gap);
      optimal += h.max_relabeled == e.max_relabeled;
      worse_than_identity += h.max_relabeled > h.max_identity;
      identity_sum += h.max_identity ? static_cast<double>(e.max_relabeled) / static_cast<double>(h.max_identity) : 1.0;
    }
  }
  state.counters["heuristic_over_exact_mean"] = sum / instances;
  state.counters["heuristic_over_exact_worst"] = worst;
  state.counters["optimal_fraction"] = static_cast<double>(optimal) / instances;
  state.counters["worse_than_identity"] = worse_than_identity;
  state.counters["exact_over_identity_mean"] = identity_sum / instances;
}

// d = 16 with 2 ranks per node is left out: the exact search takes minutes there.
BENCHMARK(BM_relabel_vs_exact)
    ->ArgsProduct({{8}, {1, 2, 4}, {0, 1, 2}})
    ->ArgsProduct({{12}, {2, 3}, {0, 1, 2}})
    ->ArgsProduct({{16}, {1, 4, 8}, {0, 1, 2}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// ---------------------------------------------------------------------------------------------
// Composed vs two-hop encoder -> LLM bytes, omni, d ranks × 60 samples, lpt in every phase.
// Counters: bytes (2 per LLM token of each encoder output) of the composed plan and of the two
// hops, summed over image and audio (forward; backward moves the same again).
void BM_compose(benchmark::State& state) {
  const auto d = static_cast<rank_t>(state.range(0));
  const workload& w = omni(d, 60);
  const auto llm = llm_phase_items(w);
  const auto pi_m = lpt_plan(llm, d);
  struct phase {
    phase_items items;
    rearrangement pi_e;
    std::vector<std::uint64_t> bytes;
  };
  std::vector<phase> phases;
  for (std::size_t m = 1; m < w.modalities.size(); ++m) {
    phase p;
    p.items = encoder_phase_items(w, static_cast<modality_id>(m));
    if (p.items.size() == 0) continue;
    p.pi_e = lpt_plan(p.items, d);
    p.bytes.resize(p.items.size());
    for (std::size_t i = 0; i < p.items.size(); ++i)
      p.bytes[i] = 2ULL * w.samples[p.items.sample_of[i]].segments[p.items.segment_of[i]].llm_tokens;
    phases.push_back(std::move(p));
  }
  std::uint64_t composed = 0, two_hop = 0, composed_inter = 0, two_hop_inter = 0;
  for (auto _ : state) {
    composed = two_hop = composed_inter = two_hop_inter = 0;
    for (const phase& p : phases) {
      const auto plans = compose_encoder_to_llm(p.items, p.pi_e, pi_m);
      const auto t = compare_composition(plans, p.bytes, 8);
      composed += t.composed.moved_bytes;
      two_hop += t.two_hop.moved_bytes;
      composed_inter += t.composed.inter_node_bytes;
      two_hop_inter += t.two_hop.inter_node_bytes;
    }
  }
  state.counters["composed_bytes"] = static_cast<double>(composed);
  state.counters["two_hop_bytes"] = static_cast<double>(two_hop);
  state.counters["composed_over_two_hop"] = static_cast<double>(composed) / static_cast<double>(two_hop);
  state.counters["inter_node_ratio"] = static_cast<double>(composed_inter) / static_cast<double>(two_hop_inter);
  state.counters["modalities"] = static_cast<double>(phases.size());
}

BENCHMARK(BM_compose)->Arg(64)->Arg(2560)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
