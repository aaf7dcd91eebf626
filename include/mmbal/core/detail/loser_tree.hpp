#pragma once
/// @file
/// One of the library's two hand-written priority queues (namespace mmbal::detail): a
/// tournament (loser) tree over bins with replace-the-minimum, the inner loop of LPT. The
/// other is `refine`'s indexed heap (core/detail/indexed_heap.hpp); every other queue of bins
/// is a Boost.Heap (balance/detail/bin_queue.hpp, balance/tolerance_lpt.hpp).

#include <mmbal/core/types.hpp>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mmbal::detail {

/// A (load, bin) key packed for branch-free comparison: the load's IEEE-754 bits (ordered
/// like the value for non-negative doubles) — or an unsigned integer load itself — and the
/// bin. `wide_key::max()` is a sentinel larger than every real key.
struct wide_key {
  std::uint64_t bits = 0;
  rank_t bin = 0;
  [[nodiscard]] static wide_key make(double load, rank_t bin) noexcept {
    // +0.0 turns a -0.0 load into +0.0, whose bits order correctly.
    return wide_key{std::bit_cast<std::uint64_t>(load + 0.0), bin};
  }
  [[nodiscard]] double load() const noexcept { return std::bit_cast<double>(bits); }
  [[nodiscard]] static constexpr wide_key max() noexcept { return wide_key{~std::uint64_t{0}, ~rank_t{0}}; }
  friend constexpr bool operator<(const wide_key& a, const wide_key& b) noexcept {
    // Non-short-circuit operators so the compiler emits flag arithmetic, not branches.
    return (a.bits < b.bits) | ((a.bits == b.bits) & (a.bin < b.bin));
  }
};

/// `c ? a : b` without a branch. A plain conditional on a 16-byte `wide_key` compiled to two
/// jumps per tree level (g++ 12 -O3), taken about half the time in LPT: the double-load LPT
/// of 153,600 items into 2,560 bins spent 8.9 ms, 58 ns per item, mostly in mispredictions
/// (bench/RESULTS.md "Session 33"). Masks keep it to a few ALU operations.
[[nodiscard]] inline wide_key select_key(bool c, const wide_key& a, const wide_key& b) noexcept {
  const std::uint64_t m = std::uint64_t{0} - std::uint64_t{c};
  const auto m32 = static_cast<rank_t>(m);
  return wide_key{(a.bits & m) | (b.bits & ~m), static_cast<rank_t>((a.bin & m32) | (b.bin & ~m32))};
}

/// `c ? a : b` for single-word keys (a conditional move already).
template <class Key>
[[nodiscard]] Key select_key(bool c, const Key& a, const Key& b) noexcept {
  return c ? a : b;
}

/// A tournament (loser) tree over `count` bins: node 0 holds the overall minimum, nodes
/// 1..P−1 the loser of the match played there, P = bit_ceil(count) leaves padded with a
/// sentinel. Replacing the minimum replays the matches on its leaf-to-root path; those node
/// addresses depend only on the bin, not on the comparisons, so the loads of all ⌈log2 P⌉
/// levels issue in parallel and the critical path is one min/max per level. `BinOf(key)`
/// gives a key's bin; keys must be a strict total order (they end in the bin).
///
/// Why hand-written (bench/bench_heap.cpp, bench/RESULTS.md "Heaps and libraries (issue 12)",
/// CPU medians, same run, shared 2-core VM): in LPT's take-least/add/put-back pattern it is
/// 5.3–5.5× faster than boost::heap::d_ary_heap<arity<4>> (pop + push) at 512, 2,560 and
/// 16,384 bins (0.27 vs 1.41 ms, 1.68 vs 9.24 ms, 13.4 vs 71.0 ms), and LPT of 153,600 items into 2,560 bins
/// takes 4.3 ms with it against 11.9 ms with the Boost heap — far above the 1.2× bar.
template <class Key, class BinOf>
class loser_tree {
 public:
  /// `key_of(b)` is bin b's initial key. O(count).
  template <class F>
  loser_tree(rank_t count, Key sentinel, F&& key_of, BinOf bin_of = {})
      : leaves_(std::bit_ceil(std::max<std::size_t>(count, 1))), tree_(leaves_, sentinel), bin_of_(bin_of) {
    // Winners of every subtree, bottom-up; the loser of each match stays in the node.
    std::vector<Key> winner(2 * leaves_, sentinel);
    for (rank_t b = 0; b < count; ++b) winner[leaves_ + b] = key_of(b);
    for (std::size_t node = leaves_ - 1; node >= 1; --node) {
      const Key& a = winner[2 * node];
      const Key& c = winner[2 * node + 1];
      const bool a_wins = !(c < a);
      winner[node] = a_wins ? a : c;
      tree_[node] = a_wins ? c : a;
    }
    tree_[0] = winner[1];
  }
  [[nodiscard]] Key top() const noexcept { return tree_[0]; }
  /// Calls `f(key)` for every key the tree holds — the minimum and the loser of every match:
  /// each bin's key once, plus one sentinel per padding leaf — in node order. O(count).
  template <class F>
  void for_each_key(F&& f) const {
    for (const Key& k : tree_) f(k);
  }
  /// Replaces the minimum by `k` (which must carry the same bin) and replays its path.
  /// O(log count).
  void replace_top(Key k) noexcept {
    Key* t = tree_.data();
    for (std::size_t node = (leaves_ + bin_of_(k)) >> 1; node >= 1; node >>= 1) {
      const Key other = t[node];
      const bool other_wins = other < k;
      t[node] = select_key(other_wins, k, other);
      k = select_key(other_wins, other, k);
    }
    t[0] = k;
  }

 private:
  std::size_t leaves_;
  std::vector<Key> tree_;
  BinOf bin_of_;
};

}  // namespace mmbal::detail
