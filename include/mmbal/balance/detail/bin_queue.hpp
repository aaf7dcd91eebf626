#pragma once
/// @file
/// Min-queues of bins for the greedy placements, all Boost.Heap (namespace
/// mmbal::balance::detail). The library's two hand-written queues, each measured faster than
/// Boost.Heap in its pattern, are core/detail/loser_tree.hpp (LPT) and
/// core/detail/indexed_heap.hpp (`refine`'s bin order).

#include <mmbal/core/types.hpp>

#include <boost/heap/d_ary_heap.hpp>

#include <cstdint>
#include <functional>
#include <vector>

namespace mmbal::balance::detail {

/// A (load, bin) key ordered by load, then bin index (the deterministic tie-break).
struct bin_key {
  double load = 0;
  rank_t bin = 0;
  friend constexpr bool operator<(const bin_key& a, const bin_key& b) noexcept {
    return a.load < b.load || (a.load == b.load && a.bin < b.bin);
  }
};

/// Boost.Heap's order for least-first (its heaps are max-heaps): `Less` with its arguments
/// swapped.
template <class Less>
struct reversed {
  Less less;
  template <class T>
  [[nodiscard]] bool operator()(const T& a, const T& b) const {
    return less(b, a);
  }
};

/// A min-queue of keys: Boost.Heap's 4-ary heap, `top()` the least key. Keys here are strict
/// total orders (they end in the bin), so its choices equal those of any correct min-heap.
/// Replaces the hand-written binary and 4-ary heaps (bench/RESULTS.md "Heaps and libraries
/// (issue 12)"); the hand-written queues left are core/detail/loser_tree.hpp and
/// core/detail/indexed_heap.hpp (bench/RESULTS.md "Session 13 — one indexed heap").
template <class Key>
using min_queue = boost::heap::d_ary_heap<Key, boost::heap::arity<4>, boost::heap::compare<reversed<std::less<Key>>>>;

/// A min-queue holding every bin of `bins` at load 0.
[[nodiscard]] inline min_queue<bin_key> make_bin_queue(rank_t bins) {
  min_queue<bin_key> q;
  q.reserve(bins);
  for (rank_t b = 0; b < bins; ++b) q.push(bin_key{0.0, b});
  return q;
}

/// A mutable 4-ary Boost.Heap of bins (the default of `indexed_bin_queue`).
template <class Compare>
using mutable_quad_heap =
    boost::heap::d_ary_heap<rank_t, boost::heap::arity<4>, boost::heap::mutable_<true>, boost::heap::compare<Compare>>;

/// A min-queue of bins ordered by `Less(a, b)` on keys kept outside the queue (a strict total
/// order: keys end in the bin index), with membership, `erase` and `update` after a bin's key
/// changed (either direction), each O(log d). `Heap<Compare>` is a mutable Boost.Heap of
/// `rank_t`; `boost::heap::fibonacci_heap` fits too but is slower in this pattern
/// (bench/RESULTS.md "Heaps and libraries (issue 12)").
template <class Less, template <class> class Heap = mutable_quad_heap>
class indexed_bin_queue {
 public:
  indexed_bin_queue(rank_t bins, Less less) : heap_(reversed<Less>{less}), handle_(bins), in_(bins, false) {}
  [[nodiscard]] bool empty() const noexcept { return heap_.empty(); }
  [[nodiscard]] rank_t top() const { return heap_.top(); }
  [[nodiscard]] bool contains(rank_t b) const noexcept { return in_[b]; }
  void push(rank_t b) {
    handle_[b] = heap_.push(b);
    in_[b] = true;
  }
  void erase(rank_t b) {
    heap_.erase(handle_[b]);
    in_[b] = false;
  }
  /// Restores the order after bin b's key changed (either direction).
  void update(rank_t b) { heap_.update(handle_[b]); }

 private:
  Heap<reversed<Less>> heap_;
  std::vector<typename Heap<reversed<Less>>::handle_type> handle_;
  std::vector<bool> in_;
};

}  // namespace mmbal::balance::detail
