#pragma once
/// @file
/// Shared machinery of the partitioners (namespace mmbal::balance::detail): argument and
/// constraint validation, groups merged into units ("super-items"), per-bin count limits,
/// the descending sort of LPT, and the flat min-heap of (load, bin).

#include <mmbal/balance/constraints.hpp>
#include <mmbal/core/concepts.hpp>
#include <mmbal/core/error.hpp>
#include <mmbal/core/types.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

namespace mmbal::balance::detail {

/// Checks the arguments every partitioner shares; `algorithm` names the caller in errors.
/// Throws `invalid_input` on bins = 0, more than 2^32 − 1 items, a group list of the wrong
/// size, a negative/NaN/infinite capacity, or a fixed count cap with cap · bins < n.
inline void check_problem(const char* algorithm, std::span<const length_t> weights, rank_t bins,
                          const constraints& limits) {
  if (bins == 0) mmbal::detail::throw_invalid(algorithm, ": bins = 0 (need at least one bin)");
  const std::uint32_t n = checked_count(weights.size(), "item count");
  if (!limits.groups.empty() && limits.groups.size() != weights.size())
    mmbal::detail::throw_invalid(algorithm, ": groups has ", limits.groups.size(), " entries but there are ", n,
                                 " items");
  if (limits.capacity && (!std::isfinite(*limits.capacity) || *limits.capacity < 0))
    mmbal::detail::throw_invalid(algorithm, ": capacity = ", *limits.capacity, " must be finite and >= 0");
  if (limits.counts.kind == count_cap::mode::fixed &&
      static_cast<std::uint64_t>(limits.counts.cap) * bins < static_cast<std::uint64_t>(n))
    mmbal::detail::throw_invalid(algorithm, ": count cap ", limits.counts.cap, " x ", bins,
                                 " bins = ", static_cast<std::uint64_t>(limits.counts.cap) * bins, " < ", n,
                                 " items (infeasible)");
  if (limits.counts.kind != count_cap::mode::none && limits.counts.kind != count_cap::mode::equal &&
      limits.counts.kind != count_cap::mode::fixed)
    mmbal::detail::throw_invalid(algorithm, ": unknown count_cap mode ", static_cast<int>(limits.counts.kind));
}

/// Throws `invalid_input` naming `constraint` as unsupported by `algorithm`.
[[noreturn]] inline void reject_constraint(const char* algorithm, const char* constraint, const char* why = "") {
  mmbal::detail::throw_invalid(algorithm, ": constraint '", constraint, "' is not supported", why);
}

/// Items merged by group into units. Unit u holds items `members[offsets[u] .. offsets[u+1])`
/// in ascending id; units are ordered by their smallest member id, so without groups unit u is
/// item u (and `members`/`offsets` stay empty: `trivial`).
struct units {
  bool trivial = true;
  std::uint32_t count = 0;
  std::vector<item_id> members;
  std::vector<std::uint32_t> offsets;

  [[nodiscard]] std::uint32_t size(std::uint32_t u) const noexcept {
    return trivial ? 1u : offsets[u + 1] - offsets[u];
  }
  /// Calls `f(item)` for every member of unit u in ascending id.
  template <class F>
  void for_each(std::uint32_t u, F&& f) const {
    if (trivial) {
      f(static_cast<item_id>(u));
      return;
    }
    for (std::uint32_t k = offsets[u]; k < offsets[u + 1]; ++k) f(members[k]);
  }
};

/// Builds the units of `groups` (empty = every item its own unit). O(n log n) with groups.
[[nodiscard]] inline units make_units(std::size_t n, std::span<const std::uint64_t> groups) {
  units u;
  u.count = static_cast<std::uint32_t>(n);
  if (groups.empty()) return u;
  u.trivial = false;
  std::vector<item_id> by_group(n);
  for (item_id i = 0; i < n; ++i) by_group[i] = i;
  std::sort(by_group.begin(), by_group.end(),
            [&](item_id a, item_id b) { return groups[a] != groups[b] ? groups[a] < groups[b] : a < b; });
  // Runs of equal group ids, then ordered by their first (smallest) member.
  std::vector<std::pair<item_id, std::uint32_t>> runs;  // (first member, start in by_group)
  for (std::uint32_t k = 0; k < n; ++k)
    if (k == 0 || groups[by_group[k]] != groups[by_group[k - 1]]) runs.emplace_back(by_group[k], k);
  std::sort(runs.begin(), runs.end());
  u.count = static_cast<std::uint32_t>(runs.size());
  u.members.reserve(n);
  u.offsets.reserve(runs.size() + 1);
  for (const auto& [first, start] : runs) {
    u.offsets.push_back(static_cast<std::uint32_t>(u.members.size()));
    const std::uint64_t g = groups[by_group[start]];
    for (std::uint32_t k = start; k < n && groups[by_group[k]] == g; ++k) u.members.push_back(by_group[k]);
  }
  u.offsets.push_back(static_cast<std::uint32_t>(u.members.size()));
  return u;
}

/// Σ weights of every unit (u64: a group's total can exceed 2^32).
[[nodiscard]] inline std::vector<std::uint64_t> unit_weights(const units& u, std::span<const length_t> weights) {
  std::vector<std::uint64_t> out(u.count, 0);
  for (std::uint32_t k = 0; k < u.count; ++k) u.for_each(k, [&](item_id i) { out[k] += weights[i]; });
  return out;
}

/// Cost state of a unit alone, folded in ascending member id.
template <batch_cost C>
[[nodiscard]] typename C::state unit_state(const units& u, std::uint32_t k, std::span<const length_t> weights,
                                           const C& cost, typename C::state s) {
  u.for_each(k, [&](item_id i) { s = cost.add(s, weights[i]); });
  return s;
}

/// Throws `invalid_input` naming the first item (or group) whose cost alone exceeds the
/// capacity: no placement can honour the cap then.
template <batch_cost C>
void check_solo_capacity(const char* algorithm, const units& u, std::span<const length_t> weights, const C& cost,
                         const constraints& limits) {
  if (!limits.capacity) return;
  const double cap = *limits.capacity;
  for (std::uint32_t k = 0; k < u.count; ++k) {
    const double solo = cost.value(unit_state(u, k, weights, cost, cost.empty()));
    if (solo > cap) {
      if (u.trivial)
        mmbal::detail::throw_invalid(algorithm, ": item ", k, " (weight ", weights[k], ") costs ", solo,
                                     " alone, above the capacity ", cap);
      mmbal::detail::throw_invalid(algorithm, ": group of item ", u.members[u.offsets[k]], " (", u.size(k),
                                   " items) costs ", solo, " alone, above the capacity ", cap);
    }
  }
}

/// Per-bin item-count limit as the greedy placement loops use it.
/// `equal`: every bin ends with ⌊n/d⌋ or ⌈n/d⌉ items — a bin may grow past ⌊n/d⌋ only while
/// fewer than n mod d bins have done so. `fixed`: at most `cap` items.
class count_limiter {
 public:
  count_limiter(const count_cap& c, std::uint32_t n, rank_t bins) : kind_(c.kind) {
    if (kind_ == count_cap::mode::fixed) {
      floor_ = c.cap;
      big_left_ = 0;
    } else if (kind_ == count_cap::mode::equal) {
      floor_ = n / bins;
      big_left_ = n % bins;
    }
  }
  [[nodiscard]] bool active() const noexcept { return kind_ != count_cap::mode::none; }
  /// Whether a bin holding `count` items can take `k` more.
  [[nodiscard]] bool admits(std::uint32_t count, std::uint32_t k) const noexcept {
    if (kind_ == count_cap::mode::none) return true;
    const std::uint64_t after = std::uint64_t{count} + k;
    if (after <= floor_) return true;
    return kind_ == count_cap::mode::equal && after == std::uint64_t{floor_} + 1 && big_left_ > 0;
  }
  /// Records that a bin holding `count` items took `k` more (after `admits` said yes).
  void take(std::uint32_t count, std::uint32_t k) noexcept {
    if (kind_ == count_cap::mode::equal && std::uint64_t{count} + k > floor_) --big_left_;
  }

 private:
  count_cap::mode kind_ = count_cap::mode::none;
  std::uint32_t floor_ = 0;
  std::uint32_t big_left_ = 0;
};

/// Stable LSD radix sort of packed (key << 32 | id) words by their key bits (11 bits per
/// pass over the significant bits of the largest key); small inputs use std::sort of the
/// same words. Read in id order, stability makes ties come out by ascending id.
inline void sort_packed(std::vector<std::uint64_t>& keys, length_t max_key) {
  const int bits = std::bit_width(max_key);
  if (bits == 0) return;
  const std::size_t n = keys.size();
  if (n < 1024) {
    std::sort(keys.begin(), keys.end());
    return;
  }
  constexpr int digit = 11;
  constexpr std::size_t radix = std::size_t{1} << digit;
  const int passes = (bits + digit - 1) / digit;  // 1..3
  // All digit histograms in one read of the keys.
  std::vector<std::uint32_t> count(3 * radix, 0);
  for (const std::uint64_t k : keys) {
    const auto hi = static_cast<std::uint32_t>(k >> 32);
    ++count[hi & (radix - 1)];
    ++count[radix + ((hi >> digit) & (radix - 1))];
    ++count[2 * radix + ((hi >> (2 * digit)) & (radix - 1))];
  }
  // Uninitialised scratch: every slot is written by the scatter before it is read.
  std::unique_ptr<std::uint64_t[]> scratch(new std::uint64_t[n]);
  std::uint64_t* from = keys.data();
  std::uint64_t* to = scratch.get();
  for (int pass = 0; pass < passes; ++pass) {
    std::uint32_t* c = count.data() + static_cast<std::size_t>(pass) * radix;
    std::uint32_t sum = 0;
    for (std::size_t r = 0; r < radix; ++r) sum += std::exchange(c[r], sum);
    const int shift = 32 + pass * digit;
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t k = from[i];
      to[c[(k >> shift) & (radix - 1)]++] = k;
    }
    std::swap(from, to);
  }
  if (from != keys.data()) std::copy(from, from + n, keys.data());
}

/// Item ids sorted by weight descending, ties by ascending id: a radix sort of
/// ((max w − w) << 32 | id). O(n · ⌈bits(max w) / 11⌉).
[[nodiscard]] inline std::vector<item_id> descending_order(std::span<const length_t> weights) {
  const std::size_t n = weights.size();
  length_t max_w = 0;
  for (length_t w : weights) max_w = std::max(max_w, w);
  std::vector<std::uint64_t> keys(n);
  for (std::size_t i = 0; i < n; ++i)
    keys[i] = (std::uint64_t{static_cast<length_t>(max_w - weights[i])} << 32) | static_cast<std::uint64_t>(i);
  sort_packed(keys, max_w);
  std::vector<item_id> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<item_id>(keys[i] & 0xffffffffu);
  return out;
}

/// Item ids sorted by weight ascending, ties by ascending id. O(n · ⌈bits(max w) / 11⌉).
[[nodiscard]] inline std::vector<item_id> ascending_order(std::span<const length_t> weights) {
  const std::size_t n = weights.size();
  length_t max_w = 0;
  for (length_t w : weights) max_w = std::max(max_w, w);
  std::vector<std::uint64_t> keys(n);
  for (std::size_t i = 0; i < n; ++i) keys[i] = (std::uint64_t{weights[i]} << 32) | static_cast<std::uint64_t>(i);
  sort_packed(keys, max_w);
  std::vector<item_id> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<item_id>(keys[i] & 0xffffffffu);
  return out;
}

/// Unit indices sorted by u64 weight ascending, ties by ascending unit index.
[[nodiscard]] inline std::vector<std::uint32_t> ascending_order(std::span<const std::uint64_t> weights) {
  std::vector<std::uint32_t> out(weights.size());
  for (std::uint32_t i = 0; i < out.size(); ++i) out[i] = i;
  std::sort(out.begin(), out.end(), [&](std::uint32_t a, std::uint32_t b) {
    return weights[a] != weights[b] ? weights[a] < weights[b] : a < b;
  });
  return out;
}

/// Unit indices sorted by u64 weight descending, ties by ascending unit index.
[[nodiscard]] inline std::vector<std::uint32_t> descending_order(std::span<const std::uint64_t> weights) {
  std::vector<std::uint32_t> out(weights.size());
  for (std::uint32_t i = 0; i < out.size(); ++i) out[i] = i;
  std::sort(out.begin(), out.end(), [&](std::uint32_t a, std::uint32_t b) {
    return weights[a] != weights[b] ? weights[a] > weights[b] : a < b;
  });
  return out;
}

/// A (load, bin) key ordered by load, then bin index (the deterministic tie-break).
struct bin_key {
  double load = 0;
  rank_t bin = 0;
  friend constexpr bool operator<(const bin_key& a, const bin_key& b) noexcept {
    return a.load < b.load || (a.load == b.load && a.bin < b.bin);
  }
};

/// A flat binary min-heap of bin keys (no per-operation allocation). Starts with every bin at
/// load 0 — sorted by bin, hence already a heap.
class bin_heap {
 public:
  explicit bin_heap(rank_t bins) : heap_(bins) {
    for (rank_t b = 0; b < bins; ++b) heap_[b] = bin_key{0.0, b};
  }
  [[nodiscard]] bool empty() const noexcept { return heap_.empty(); }
  [[nodiscard]] std::size_t size() const noexcept { return heap_.size(); }
  [[nodiscard]] const bin_key& top() const noexcept { return heap_.front(); }
  /// Replaces the minimum by a key that is not smaller (its load grew) and restores the heap.
  void raise_top(double load) noexcept {
    bin_key k{load, heap_.front().bin};
    sift_down(0, k);
  }
  void pop() noexcept {
    bin_key last = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) sift_down(0, last);
  }
  void push(bin_key k) {
    heap_.push_back(k);
    std::size_t i = heap_.size() - 1;
    while (i > 0) {
      const std::size_t parent = (i - 1) / 2;
      if (!(k < heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = k;
  }

 private:
  void sift_down(std::size_t i, bin_key k) noexcept {
    const std::size_t n = heap_.size();
    for (;;) {
      std::size_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && heap_[child + 1] < heap_[child]) ++child;
      if (!(heap_[child] < k)) break;
      heap_[i] = heap_[child];
      i = child;
    }
    heap_[i] = k;
  }
  std::vector<bin_key> heap_;
};

/// A (load, bin) key packed for branch-free comparison: the load's IEEE-754 bits (ordered
/// like the value for non-negative doubles) and the bin. `wide_key::max()` is a sentinel
/// larger than every real key.
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

/// A flat 4-ary min-heap with replace-top, pop and push, padded with sentinels so the
/// child selection of a node is four unconditional loads and three branch-free minima.
/// Keys: `std::uint64_t` (integer loads packed as load << bin_bits | bin) or `wide_key`.
/// Replace-top costs ⌈log4 d⌉ levels; it is the inner loop of LPT.
template <class Key>
class quad_heap {
 public:
  quad_heap(std::size_t count, Key sentinel) : n_(count), sentinel_(sentinel), h_(count + 4, sentinel) {}
  /// Fills the heap with keys that are already in ascending order (a valid heap).
  template <class F>
  void fill_sorted(F&& key_of) {
    for (std::size_t i = 0; i < n_; ++i) h_[i] = key_of(i);
  }
  [[nodiscard]] bool empty() const noexcept { return n_ == 0; }
  [[nodiscard]] Key top() const noexcept { return h_[0]; }
  /// Replaces the minimum by `k` (not smaller than it) and restores the heap.
  void replace_top(Key k) noexcept { sift_down(0, k); }
  void pop() noexcept {
    const Key last = h_[n_ - 1];
    h_[n_ - 1] = sentinel_;
    --n_;
    if (n_ > 0) sift_down(0, last);
  }
  void push(Key k) {
    if (n_ + 4 > h_.size()) h_.resize(n_ + 4, sentinel_);
    std::size_t i = n_++;
    while (i > 0) {
      const std::size_t parent = (i - 1) / 4;
      if (!(k < h_[parent])) break;
      h_[i] = h_[parent];
      i = parent;
    }
    h_[i] = k;
  }

 private:
  void sift_down(std::size_t i, Key k) noexcept {
    Key* h = h_.data();
    for (;;) {
      const std::size_t c = 4 * i + 1;
      if (c >= n_) break;
      const Key* p = h + c;
      const bool s01 = p[1] < p[0];
      const Key m01 = s01 ? p[1] : p[0];
      const bool s23 = p[3] < p[2];
      const Key m23 = s23 ? p[3] : p[2];
      const bool s = m23 < m01;
      const Key m = s ? m23 : m01;
      if (!(m < k)) break;
      h[i] = m;
      // Child offset 0..3 from bit arithmetic: a `?:` here compiles to an unpredictable branch.
      const std::size_t us = s, u23 = s23, u01 = s01;
      i = c + 2 * us + ((us & u23) | ((us ^ 1) & u01));
    }
    h[i] = k;
  }
  std::size_t n_;
  Key sentinel_;
  std::vector<Key> h_;
};

/// The bin encoded in a heap key.
[[nodiscard]] inline rank_t key_bin(const wide_key& k) noexcept { return k.bin; }

/// A tournament (loser) tree over `count` bins: node 0 holds the overall minimum, nodes
/// 1..P−1 the loser of the match played there, P = bit_ceil(count) leaves padded with a
/// sentinel. Replacing the minimum replays the matches on its leaf-to-root path; those node
/// addresses depend only on the bin, not on the comparisons, so the loads of all ⌈log2 P⌉
/// levels issue in parallel and the critical path is one min/max per level — the reason it
/// beats a d-ary heap's dependent descent in LPT's inner loop. `BinOf(key)` gives a key's bin.
template <class Key, class BinOf>
class loser_tree {
 public:
  /// `key_of(b)` is bin b's initial key.
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
  /// Replaces the minimum by `k` (which must carry the same bin) and replays its path.
  void replace_top(Key k) noexcept {
    Key* t = tree_.data();
    for (std::size_t node = (leaves_ + bin_of_(k)) >> 1; node >= 1; node >>= 1) {
      const Key other = t[node];
      const bool other_wins = other < k;
      t[node] = other_wins ? k : other;
      k = other_wins ? other : k;
    }
    t[0] = k;
  }

 private:
  std::size_t leaves_;
  std::vector<Key> tree_;
  BinOf bin_of_;
};

/// A binary min-heap of bins with position tracking, so any member's key can change
/// (`update`) or the member can leave (`erase`) in O(log d). `Less(a, b)` compares bins by
/// their current keys (a strict total order: keys end in the bin index).
template <class Less>
class indexed_heap {
 public:
  static constexpr std::uint32_t absent = ~std::uint32_t{0};
  indexed_heap(rank_t bins, Less less) : pos_(bins, absent), less_(less) { heap_.reserve(bins); }
  [[nodiscard]] bool empty() const noexcept { return heap_.empty(); }
  [[nodiscard]] rank_t top() const noexcept { return heap_.front(); }
  [[nodiscard]] bool contains(rank_t b) const noexcept { return pos_[b] != absent; }
  void push(rank_t b) {
    pos_[b] = static_cast<std::uint32_t>(heap_.size());
    heap_.push_back(b);
    up(pos_[b]);
  }
  void erase(rank_t b) {
    const std::uint32_t i = pos_[b];
    const rank_t last = heap_.back();
    heap_.pop_back();
    pos_[b] = absent;
    if (last == b) return;
    heap_[i] = last;
    pos_[last] = i;
    update(last);
  }
  /// Restores the heap after bin b's key changed (either direction).
  void update(rank_t b) {
    up(pos_[b]);
    down(pos_[b]);
  }

 private:
  void up(std::uint32_t i) {
    const rank_t b = heap_[i];
    while (i > 0) {
      const std::uint32_t parent = (i - 1) / 2;
      if (!less_(b, heap_[parent])) break;
      heap_[i] = heap_[parent];
      pos_[heap_[i]] = i;
      i = parent;
    }
    heap_[i] = b;
    pos_[b] = i;
  }
  void down(std::uint32_t i) {
    const rank_t b = heap_[i];
    const auto n = static_cast<std::uint32_t>(heap_.size());
    for (;;) {
      std::uint32_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && less_(heap_[child + 1], heap_[child])) ++child;
      if (!less_(heap_[child], b)) break;
      heap_[i] = heap_[child];
      pos_[heap_[i]] = i;
      i = child;
    }
    heap_[i] = b;
    pos_[b] = i;
  }
  std::vector<rank_t> heap_;
  std::vector<std::uint32_t> pos_;
  Less less_;
};

/// Builds an assignment while units are placed: slots follow placement order.
class placement_builder {
 public:
  placement_builder(std::size_t n, rank_t bins) : a_{bins, std::vector<location>(n)}, counts_(bins, 0) {}
  void place(item_id i, rank_t b) noexcept { a_.where[i] = location{b, counts_[b]++}; }
  [[nodiscard]] std::uint32_t count(rank_t b) const noexcept { return counts_[b]; }
  [[nodiscard]] assignment finish() && { return std::move(a_); }

 private:
  assignment a_;
  std::vector<std::uint32_t> counts_;
};

}  // namespace mmbal::balance::detail
