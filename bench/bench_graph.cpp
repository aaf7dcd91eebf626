// Boost.Graph against node-wise relabeling (issue 12). With one rank per node relabeling is an
// assignment of new batches to ranks; the library minimises the largest per-rank inter-node
// volume (a bottleneck assignment, solved exactly). Boost.Graph's maximum_weighted_matching
// maximises the bytes that stay local (a sum). Both run on the same shuffled instances (new
// batches = old mini-batches under random labels, 30 % of items elsewhere); the counters give
// the bottleneck each reaches (lower is better) and its ratio to the identity.
//
// Run: build/rel/bench/bench_graph --benchmark_repetitions=3 --benchmark_report_aggregates_only=true

#include <mmbal/core/rng.hpp>
#include <mmbal/rearrange/relabel.hpp>

#include <benchmark/benchmark.h>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/maximum_weighted_matching.hpp>

#include <cstdint>
#include <map>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

namespace {

using namespace mmbal;

struct instance {
  rearrangement r;
  std::vector<std::uint64_t> bytes;
};

instance shuffled(rank_t d) {
  auto g = make_rng(99, d, 2);
  const std::uint32_t n = 12 * d;
  instance in;
  in.bytes.resize(n);
  for (auto& b : in.bytes) b = 1 + static_cast<std::uint64_t>(lognormal(g, 1000.0, 1.0));
  std::vector<rank_t> src(n), dst(n), label(d);
  std::iota(label.begin(), label.end(), rank_t{0});
  shuffle(std::span<rank_t>(label), g);
  for (std::uint32_t i = 0; i < n; ++i) {
    src[i] = static_cast<rank_t>(uniform_below(g, d));
    dst[i] = uniform01(g) >= 0.3 ? label[src[i]] : static_cast<rank_t>(uniform_below(g, d));
  }
  in.r = rearrangement::from_origin(src, assignment::from_partition(partition{d, dst}));
  return in;
}

const instance& cached(rank_t d) {
  static std::map<rank_t, instance> cache;
  auto it = cache.find(d);
  if (it == cache.end()) it = cache.emplace(d, shuffled(d)).first;
  return it->second;
}

void counters(benchmark::State& state, const instance& in, std::span<const rank_t> sigma) {
  const std::uint64_t identity = max_inter_node_volume(in.r, in.bytes, 1);
  const std::uint64_t reached = max_inter_node_volume(apply_relabeling(in.r, sigma), in.bytes, 1);
  state.counters["max_volume"] = static_cast<double>(reached);
  state.counters["over_identity"] = identity ? static_cast<double>(reached) / static_cast<double>(identity) : 1.0;
}

// The library: exact bottleneck assignment (exact_up_to raised to d).
void BM_relabel_bottleneck(benchmark::State& state) {
  const auto d = static_cast<rank_t>(state.range(0));
  const instance& in = cached(d);
  relabel_options opt;
  opt.exact_up_to = d;
  relabeling out;
  for (auto _ : state) benchmark::DoNotOptimize(out = relabel_nodewise(in.r, in.bytes, 1, opt));
  counters(state, in, out.rank_of_batch);
}

// Boost.Graph: maximum-weight matching of ranks to batches, weight = bytes that stay on the rank.
void BM_relabel_boost_matching(benchmark::State& state) {
  const auto d = static_cast<rank_t>(state.range(0));
  const instance& in = cached(d);
  using graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS, boost::no_property,
                                      boost::property<boost::edge_weight_t, long>>;
  std::vector<rank_t> sigma(d);
  for (auto _ : state) {
    std::map<std::pair<rank_t, rank_t>, long> local;  // (source rank, batch) → bytes
    for (std::size_t i = 0; i < in.r.size(); ++i)
      local[{in.r.source[i].rank, in.r.destination[i].rank}] += static_cast<long>(in.bytes[i]);
    graph gr(2 * std::size_t{d});
    for (const auto& [e, w] : local) boost::add_edge(e.first, d + e.second, w, gr);
    std::vector<boost::graph_traits<graph>::vertex_descriptor> mate(2 * std::size_t{d});
    boost::maximum_weighted_matching(gr, &mate[0]);
    std::vector<bool> used(d, false);
    constexpr rank_t none = ~rank_t{0};
    for (rank_t j = 0; j < d; ++j) {
      const auto m = mate[d + j];
      sigma[j] = m == boost::graph_traits<graph>::null_vertex() ? none : static_cast<rank_t>(m);
      if (sigma[j] != none) used[sigma[j]] = true;
    }
    rank_t free_rank = 0;  // unmatched batches take the free ranks in order
    for (rank_t j = 0; j < d; ++j)
      if (sigma[j] == none) {
        while (used[free_rank]) ++free_rank;
        sigma[j] = free_rank;
        used[free_rank] = true;
      }
    benchmark::DoNotOptimize(sigma);
  }
  counters(state, in, sigma);
}

BENCHMARK(BM_relabel_bottleneck)->Arg(16)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_relabel_boost_matching)->Arg(16)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
