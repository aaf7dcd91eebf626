// Heaps (issue 12): the library's one hand-written queue (core/detail/loser_tree.hpp) against
// Boost.Heap in LPT's pattern — take the least-loaded bin, add an item, put it back — at
// 512–16,384 bins, and LPT itself at 2,560 bins × 60 items each.
//
// Run: build/release/bench/bench_heap --benchmark_repetitions=3 --benchmark_report_aggregates_only=true

#include <mmbal/balance/lpt.hpp>
#include <mmbal/core/detail/least_loaded.hpp>
#include <mmbal/core/detail/loser_tree.hpp>
#include <mmbal/core/detail/order.hpp>
#include <mmbal/cost/functions.hpp>

#include <benchmark/benchmark.h>
#include <boost/heap/d_ary_heap.hpp>
#include <boost/heap/fibonacci_heap.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <vector>

namespace {

using mmbal::rank_t;

constexpr std::size_t items_per_bin = 60;

// Item weights in descending order (LPT's order), 60 per bin, seeded.
std::vector<std::uint64_t> descending_weights(std::size_t n) {
  std::mt19937_64 g(12);
  std::vector<std::uint64_t> w(n);
  for (auto& x : w) x = 64 + g() % 8192;
  std::sort(w.begin(), w.end(), std::greater<>());
  return w;
}

// Packed (load << bin_bits | bin) words: a strict total order, so every queue picks the same bins.
struct packed {
  int bits;
  std::uint64_t mask;
  explicit packed(rank_t bins)
      : bits(mmbal::detail::bin_bits(bins)), mask((std::uint64_t{1} << mmbal::detail::bin_bits(bins)) - 1) {}
};

// Runs `deal(w, bins, p, check)` — one LPT pass over 60 items per bin, adding each chosen bin
// to `check` — at state.range(0) bins.
template <class Deal>
void pattern(benchmark::State& state, Deal deal) {
  const auto bins = static_cast<rank_t>(state.range(0));
  const auto w = descending_weights(bins * items_per_bin);
  const packed p(bins);
  std::uint64_t check = 0;
  for (auto _ : state) {
    deal(w, bins, p, check);
    benchmark::DoNotOptimize(check);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * w.size()));
}

void BM_pattern_loser_tree(benchmark::State& state) {
  pattern(state, [](const std::vector<std::uint64_t>& w, rank_t bins, const packed&, std::uint64_t& check) {
    mmbal::detail::deal_least_loaded_packed(
        w.size(), bins, [&](std::size_t k) { return w[k]; }, [&](std::size_t, rank_t b) { check += b; });
  });
}

void BM_pattern_boost_dary4(benchmark::State& state) {
  using heap = boost::heap::d_ary_heap<std::uint64_t, boost::heap::arity<4>, boost::heap::compare<std::greater<>>>;
  pattern(state, [](const std::vector<std::uint64_t>& w, rank_t bins, const packed& p, std::uint64_t& check) {
    heap h;
    h.reserve(bins);
    for (rank_t b = 0; b < bins; ++b) h.push(b);
    for (const std::uint64_t x : w) {
      const std::uint64_t top = h.top();
      h.pop();
      check += top & p.mask;
      h.push(top + (x << p.bits));
    }
  });
}

// Mutable heaps: the top's key grows in place (`update`) instead of pop + push.
template <class Heap>
void pattern_mutable(benchmark::State& state) {
  pattern(state, [](const std::vector<std::uint64_t>& w, rank_t bins, const packed& p, std::uint64_t& check) {
    Heap h;
    std::vector<typename Heap::handle_type> handle(bins);
    for (rank_t b = 0; b < bins; ++b) handle[b] = h.push(b);
    for (const std::uint64_t x : w) {
      const std::uint64_t top = h.top();
      const auto b = static_cast<rank_t>(top & p.mask);
      check += b;
      h.update(handle[b], top + (x << p.bits));
    }
  });
}

void BM_pattern_boost_dary4_mutable(benchmark::State& state) {
  pattern_mutable<boost::heap::d_ary_heap<std::uint64_t, boost::heap::arity<4>, boost::heap::mutable_<true>,
                                          boost::heap::compare<std::greater<>>>>(state);
}

void BM_pattern_boost_fibonacci(benchmark::State& state) {
  pattern_mutable<boost::heap::fibonacci_heap<std::uint64_t, boost::heap::compare<std::greater<>>>>(state);
}

#define MMBAL_HEAP_SIZES ->Arg(512)->Arg(2560)->Arg(16384)->Unit(benchmark::kMicrosecond)
BENCHMARK(BM_pattern_loser_tree) MMBAL_HEAP_SIZES;
BENCHMARK(BM_pattern_boost_dary4) MMBAL_HEAP_SIZES;
BENCHMARK(BM_pattern_boost_dary4_mutable) MMBAL_HEAP_SIZES;
BENCHMARK(BM_pattern_boost_fibonacci) MMBAL_HEAP_SIZES;

// LPT at 2,560 bins × 60 items (the §7 goal size), token cost: the library's lpt (radix
// sort + loser tree) against the same sort followed by Boost's 4-ary heap.
std::vector<mmbal::length_t> lpt_weights() {
  std::mt19937_64 g(7);
  std::vector<mmbal::length_t> w(2560 * items_per_bin);
  for (auto& x : w) x = static_cast<mmbal::length_t>(64 + g() % 8192);
  return w;
}

void BM_lpt_loser_tree(benchmark::State& state) {
  const auto w = lpt_weights();
  for (auto _ : state) benchmark::DoNotOptimize(mmbal::balance::lpt{}(w, 2560, mmbal::cost::tokens{}));
}

void BM_lpt_boost_dary4(benchmark::State& state) {
  const auto w = lpt_weights();
  const rank_t bins = 2560;
  const packed p(bins);
  using heap = boost::heap::d_ary_heap<std::uint64_t, boost::heap::arity<4>, boost::heap::compare<std::greater<>>>;
  for (auto _ : state) {
    const std::vector<std::uint32_t> order = mmbal::detail::descending_order(std::span<const mmbal::length_t>(w));
    mmbal::assignment a{bins, std::vector<mmbal::location>(w.size())};
    std::vector<std::uint32_t> counts(bins, 0);
    heap h;
    h.reserve(bins);
    for (rank_t b = 0; b < bins; ++b) h.push(b);
    for (const std::uint32_t i : order) {
      const std::uint64_t top = h.top();
      h.pop();
      const auto b = static_cast<rank_t>(top & p.mask);
      a.where[i] = mmbal::location{b, counts[b]++};
      h.push(top + (std::uint64_t{w[i]} << p.bits));
    }
    benchmark::DoNotOptimize(a);
  }
}

BENCHMARK(BM_lpt_loser_tree)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_lpt_boost_dary4)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
