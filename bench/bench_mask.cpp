// Bitfield attention mask workloads and context-parallel token distribution (docs/DESIGN.md §7):
// - 1 M tokens, MP layout, B = 128, G = 8: per-token workloads + LPT (goal <= 2 ms), beside a
//   memcpy of the mask's bit array and the naive per-token workload loop;
// - max/mean per CP rank for EP, EE, MP packs at 32 K, 64 K, 128 K, G = 8, every policy
//   (goal <= 1.01 for LPT; zigzag beside it).
// Packs come from the realistic long-context generator (docs/WORKLOADS.md (e)).
#include <mmbal/context/distribute.hpp>
#include <mmbal/mask/mask.hpp>
#include <mmbal/spec/context.hpp>
#include <mmbal/workload/generators.hpp>
#include <mmbal/workload/length_data.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

using namespace mmbal;

namespace {

const length_data& data() {
  static const length_data d = load_length_data(MMBAL_DATA_DIR);
  return d;
}

constexpr std::uint32_t million = 1u << 20;

// The 1 M-token MP pack. Modality bits: MP documents of the long-context histogram reach
// 256 K tokens with well over 61 spans, which per-span bits cannot represent (docs/DESIGN.md §5.3).
const bitfield_mask& big_mask() {
  static const bitfield_mask m = [] {
    const workload w = generate_pack(pack_layout::mp, million, 1, data());
    return build_bitfield_mask(std::span<const sample>(w.samples), bit_assignment::modality);
  }();
  return m;
}

// Naive per-token workloads: per document, for every token a pattern lookup and, for text
// tokens, a scan of the prefix counts of all patterns (O(T · P), no runs).
std::vector<std::uint32_t> naive_token_workloads(const bitfield_mask& mask) {
  std::vector<std::uint32_t> out(mask.size());
  const auto bits = mask.bits();
  for (std::uint32_t d = 0; d < mask.document_count(); ++d) {
    const auto [b, e] = mask.document_range(d);
    std::vector<std::uint64_t> pats(bits.begin() + b, bits.begin() + e);
    std::sort(pats.begin(), pats.end());
    pats.erase(std::unique(pats.begin(), pats.end()), pats.end());
    std::vector<std::uint32_t> total(pats.size(), 0), prefix(pats.size(), 0);
    std::vector<std::uint32_t> idx(e - b);
    for (std::uint32_t t = b; t < e; ++t) {
      idx[t - b] = static_cast<std::uint32_t>(std::lower_bound(pats.begin(), pats.end(), bits[t]) - pats.begin());
      ++total[idx[t - b]];
    }
    for (std::uint32_t t = b; t < e; ++t) {
      const std::uint32_t p = idx[t - b];
      ++prefix[p];
      if (bits[t] & text_bit) {
        std::uint32_t s = 0;
        for (std::size_t j = 0; j < pats.size(); ++j)
          if (pats[j] & bits[t] & ~control_bits) s += prefix[j];
        out[t] = s;
      } else {
        out[t] = total[p];
      }
    }
  }
  return out;
}

void set_common(benchmark::State& state) {
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * big_mask().size());
  state.counters["tokens"] = big_mask().size();
  state.counters["runs"] = static_cast<double>(big_mask().runs().size());
  state.counters["documents"] = big_mask().document_count();
}

// The goal's pipeline: per-run workloads, per-token workloads (the full T-array), block
// workloads (from the runs), LPT over G = 8.
void BM_token_workloads_lpt_1M(benchmark::State& state) {
  const bitfield_mask& m = big_mask();
  double mom = 0;
  for (auto _ : state) {
    const auto runs = workload_runs(m);
    const auto tw = token_workloads(runs, m.size());
    const auto bw = block_workloads(runs, m.size(), 128);
    benchmark::DoNotOptimize(tw.data());
    const auto dist = distribute_tokens(bw, m.size(), 128, 8, lpt_distributor{});
    mom = dist.max_over_mean();
    benchmark::DoNotOptimize(dist.rank_workloads.data());
  }
  set_common(state);
  state.counters["max_over_mean"] = mom;
}
BENCHMARK(BM_token_workloads_lpt_1M)->Unit(benchmark::kMicrosecond);

// The same with the per-token array in a reused buffer (a dataloader keeps it across steps):
// no allocation, no page faults, one write pass.
void BM_token_workloads_lpt_1M_reused_buffer(benchmark::State& state) {
  const bitfield_mask& m = big_mask();
  std::vector<std::uint32_t> tw(m.size());
  double mom = 0;
  for (auto _ : state) {
    const auto runs = workload_runs(m);
    fill_token_workloads(runs, tw);
    const auto bw = block_workloads(runs, m.size(), 128);
    const auto dist = distribute_tokens(bw, m.size(), 128, 8, lpt_distributor{});
    mom = dist.max_over_mean();
    benchmark::DoNotOptimize(tw.data());
    benchmark::DoNotOptimize(dist.rank_workloads.data());
  }
  set_common(state);
  state.counters["max_over_mean"] = mom;
}
BENCHMARK(BM_token_workloads_lpt_1M_reused_buffer)->Unit(benchmark::kMicrosecond);

// Without the per-token array: block workloads straight from the runs, then LPT.
void BM_run_block_workloads_lpt_1M(benchmark::State& state) {
  const bitfield_mask& m = big_mask();
  for (auto _ : state) {
    const auto bw = block_workloads(workload_runs(m), m.size(), 128);
    const auto dist = distribute_tokens(bw, m.size(), 128, 8, lpt_distributor{});
    benchmark::DoNotOptimize(dist.rank_workloads.data());
  }
  set_common(state);
}
BENCHMARK(BM_run_block_workloads_lpt_1M)->Unit(benchmark::kMicrosecond);

// Parts of the pipeline.
void BM_token_workloads_1M(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(token_workloads(big_mask()).data());
  set_common(state);
}
BENCHMARK(BM_token_workloads_1M)->Unit(benchmark::kMicrosecond);

void BM_block_workloads_from_tokens_1M(benchmark::State& state) {
  const auto tw = token_workloads(big_mask());
  for (auto _ : state) benchmark::DoNotOptimize(block_workloads(std::span<const std::uint32_t>(tw), 128).data());
  set_common(state);
}
BENCHMARK(BM_block_workloads_from_tokens_1M)->Unit(benchmark::kMicrosecond);

void BM_lpt_only_8192_blocks(benchmark::State& state) {
  const auto bw = block_workloads(big_mask(), 128);
  for (auto _ : state) benchmark::DoNotOptimize(lpt_distributor{}(bw, 8).data());
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(bw.size()));
}
BENCHMARK(BM_lpt_only_8192_blocks)->Unit(benchmark::kMicrosecond);

// Baselines in the same run.
void BM_baseline_memcpy_bits_1M(benchmark::State& state) {
  const auto bits = big_mask().bits();
  std::vector<std::uint64_t> dst(bits.size());
  for (auto _ : state) {
    std::memcpy(dst.data(), bits.data(), bits.size_bytes());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(bits.size_bytes()));
}
BENCHMARK(BM_baseline_memcpy_bits_1M)->Unit(benchmark::kMicrosecond);

void BM_baseline_naive_token_workloads_1M(benchmark::State& state) {
  const bitfield_mask& m = big_mask();
  bool same = false;
  for (auto _ : state) {
    const auto tw = naive_token_workloads(m);
    same = tw == token_workloads(m);  // outside the goal; keeps the baseline honest
    benchmark::DoNotOptimize(tw.data());
  }
  set_common(state);
  state.counters["agrees"] = same ? 1 : 0;
}
BENCHMARK(BM_baseline_naive_token_workloads_1M)->Unit(benchmark::kMicrosecond);

void BM_build_mask_1M(benchmark::State& state) {
  const workload w = generate_pack(pack_layout::mp, million, 1, data());
  for (auto _ : state)
    benchmark::DoNotOptimize(build_bitfield_mask(std::span<const sample>(w.samples), bit_assignment::modality).size());
  set_common(state);
}
BENCHMARK(BM_build_mask_1M)->Unit(benchmark::kMicrosecond);

// ---------------------------------------------------------------- balance quality
constexpr int packs_per_config = 20;

struct quality_packs {
  std::vector<std::vector<std::uint64_t>> blocks;  // block workloads per pack
  std::vector<std::uint32_t> tokens;
  int modality_fallbacks = 0;  // packs with > 61 spans in a document: built with modality bits
};

const quality_packs& packs(pack_layout layout, std::uint32_t len) {
  static std::map<std::pair<int, std::uint32_t>, quality_packs> cache;
  auto [it, fresh] = cache.try_emplace({static_cast<int>(layout), len});
  if (fresh) {
    pack_generator gen(layout, len, 2026, data());
    for (int i = 0; i < packs_per_config; ++i) {
      const workload w = gen.next();
      bitfield_mask m;
      try {
        m = build_bitfield_mask(std::span<const sample>(w.samples), bit_assignment::span);
      } catch (const invalid_input&) {
        m = build_bitfield_mask(std::span<const sample>(w.samples), bit_assignment::modality);
        ++it->second.modality_fallbacks;
      }
      it->second.blocks.push_back(block_workloads(m, 128));
      it->second.tokens.push_back(m.size());
    }
  }
  return it->second;
}

void BM_cp_balance(benchmark::State& state, pack_layout layout, std::uint32_t len, const char* policy) {
  const quality_packs& p = packs(layout, len);
  const spec::any_distributor d = spec::parse_distributor(policy, 7);
  double sum = 0, worst = 0;
  for (auto _ : state) {
    sum = 0;
    worst = 0;
    for (std::size_t i = 0; i < p.blocks.size(); ++i) {
      const auto r = spec::distribute_tokens(p.blocks[i], p.tokens[i], 128, 8, d);
      sum += r.max_over_mean();
      worst = std::max(worst, r.max_over_mean());
    }
  }
  state.counters["mom_mean"] = sum / static_cast<double>(p.blocks.size());
  state.counters["mom_worst"] = worst;
  state.counters["packs"] = static_cast<double>(p.blocks.size());
  state.counters["modality_fallbacks"] = p.modality_fallbacks;
}

const bool quality_registered = [] {
  const std::pair<const char*, pack_layout> layouts[] = {
      {"EP", pack_layout::ep}, {"EE", pack_layout::ee}, {"MP", pack_layout::mp}};
  for (auto [lname, l] : layouts)
    for (std::uint32_t len : {32768u, 65536u, 131072u})
      for (const char* policy : {"lpt", "zigzag", "contiguous", "random"})
        benchmark::RegisterBenchmark(
            ("BM_cp_balance/" + std::string(lname) + "/" + std::to_string(len / 1024) + "K/" + policy).c_str(),
            [l = l, len, policy](benchmark::State& s) { BM_cp_balance(s, l, len, policy); })
            ->Unit(benchmark::kMicrosecond)
            ->Iterations(3);
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
