#pragma once
/// @file
/// The library's second hand-written priority queue (namespace mmbal::detail): an indexed
/// 4-ary heap of (load, bin) keys with in-place key updates and a lazy walk in key order —
/// the bin order of `refine`'s search (balance/refine.hpp `load_order`; where every load is an
/// integer in a narrow range that order is a bitmap, core/detail/bitmap_set.hpp). The first is the
/// loser tree of LPT (core/detail/loser_tree.hpp); every other queue of bins is a Boost.Heap
/// (balance/detail/bin_queue.hpp).

#include <mmbal/core/types.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace mmbal::detail {

/// An indexed 4-ary heap over `count` bins keyed by (load, bin): least (load, bin) first, or
/// with `Max` the greatest load first, ties by the smaller bin — a strict total order either
/// way, so `top()` and the walk do not depend on the heap's layout.
///
/// - `top()` O(1); `update(b, load)` (either direction) O(log₄ d); construction O(d) (Floyd).
/// - `restart()` / `next()`: the bins in heap order (increasing key), lazily — a frontier
///   heap of the positions whose parents were already returned, so the first k bins cost
///   O(k log k) whatever d is. The keys must not change during a walk.
/// - Keys are stored in the heap (updated only by `update`), so a caller may change several
///   loads and then update their bins one by one.
/// - 4-ary: half the levels of a binary heap, a node's children in one or two cache lines (the
///   sifts are chains of dependent loads). The comparisons are branch-free: equal loads are
///   common (integral costs).
///
/// Why hand-written (bench/RESULTS.md "Session 13 — one indexed heap", shared 2-core VM, omni
/// LLM phase, 2,560 bins × 60 items, same runs): `refine`'s load order on two mutable
/// `boost::heap::d_ary_heap<arity<4>>` (`indexed_bin_queue`, walked by Boost's ordered
/// iterator) makes `refine` alone 1.11–1.23× slower (thread CPU, best of 40, five alternated
/// runs: tokens 2.82 → 3.47 ms, attention 7.92 → 8.80 ms, equal counts 2.83 → 3.45 ms), and
/// `lpt+refine` / `lpt` rises from 1.99 to 2.16 (median of five `bench_refine` runs; goal
/// ≤ 2). A Boost heap holding the keys itself is as slow (≈ 1.16× in one run).
template <bool Max>
class indexed_heap {
 public:
  static constexpr std::size_t arity = 4;
  static constexpr rank_t none = std::numeric_limits<rank_t>::max();

  /// A heap key: the bin's load and the bin.
  struct entry {
    double load = 0;
    rank_t bin = 0;
  };

  /// Bin b at `load[b]`. O(d).
  explicit indexed_heap(std::span<const double> load) : at_(load.size()), pos_(load.size()) {
    const std::size_t d = load.size();
    for (std::size_t b = 0; b < d; ++b) at_[b] = entry{load[b], static_cast<rank_t>(b)};
    if (d > 0)
      for (std::size_t i = d / arity + 1; i-- > 0;) sift_down(i);  // Floyd's construction, O(d)
    for (std::size_t i = 0; i < d; ++i) pos_[at_[i].bin] = static_cast<std::uint32_t>(i);
  }

  /// The first bin (least key; with `Max` the greatest load, ties: the smallest index). The
  /// heap must not be empty.
  [[nodiscard]] rank_t top() const noexcept { return at_[0].bin; }
  /// Bin b's load as of its last `update` (or the construction). O(1).
  [[nodiscard]] double key(rank_t b) const noexcept { return at_[pos_[b]].load; }

  /// Sets bin b's load and restores the order (either direction). O(log₄ d).
  void update(rank_t b, double load) {
    const std::size_t i = pos_[b];
    at_[i].load = load;
    if (i > 0 && before(at_[i], at_[(i - 1) / arity]))
      sift_up(i);
    else
      sift_down(i);
  }

  /// Starts a walk over the bins in key order (the frontier's buffer is reused).
  void restart() {
    frontier_.clear();
    if (!at_.empty()) frontier_.push_back(0);
  }

  /// The next bin of the walk, or `none` after the last. O(log k) for the k-th bin.
  [[nodiscard]] rank_t next() {
    if (frontier_.empty()) return none;
    auto later = [&](std::uint32_t x, std::uint32_t y) { return before(at_[y], at_[x]); };
    std::pop_heap(frontier_.begin(), frontier_.end(), later);
    const std::uint32_t i = frontier_.back();
    frontier_.pop_back();
    for (std::size_t c = arity * std::size_t{i} + 1; c <= arity * std::size_t{i} + arity && c < at_.size(); ++c) {
      frontier_.push_back(static_cast<std::uint32_t>(c));
      std::push_heap(frontier_.begin(), frontier_.end(), later);
    }
    return at_[i].bin;
  }

 private:
  [[nodiscard]] static bool before(const entry& x, const entry& y) noexcept {
    const bool ahead = Max ? x.load > y.load : x.load < y.load;
    return ahead | ((x.load == y.load) & (x.bin < y.bin));
  }
  void sift_up(std::size_t i) {
    const entry k = at_[i];
    while (i > 0) {
      const std::size_t parent = (i - 1) / arity;
      if (!before(k, at_[parent])) break;
      at_[i] = at_[parent];
      pos_[at_[i].bin] = static_cast<std::uint32_t>(i);
      i = parent;
    }
    at_[i] = k;
    pos_[k.bin] = static_cast<std::uint32_t>(i);
  }
  void sift_down(std::size_t i) {
    const std::size_t d = at_.size();
    const entry k = at_[i];
    for (;;) {
      const std::size_t first = arity * i + 1;
      if (first >= d) break;
      std::size_t c = first;
      for (std::size_t x = first + 1; x < std::min(first + arity, d); ++x) c = before(at_[x], at_[c]) ? x : c;
      if (!before(at_[c], k)) break;
      at_[i] = at_[c];
      pos_[at_[i].bin] = static_cast<std::uint32_t>(i);
      i = c;
    }
    at_[i] = k;
    pos_[k.bin] = static_cast<std::uint32_t>(i);
  }

  std::vector<entry> at_;                // heap position → (load, bin)
  std::vector<std::uint32_t> pos_;       // bin → heap position
  std::vector<std::uint32_t> frontier_;  // walk: heap positions, a heap by their keys
};

}  // namespace mmbal::detail
