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
  if (keys.size() < 1024) {
    std::sort(keys.begin(), keys.end());
    return;
  }
  constexpr int digit = 11;
  constexpr std::size_t radix = std::size_t{1} << digit;
  std::vector<std::uint64_t> tmp(keys.size());
  std::vector<std::uint32_t> count(radix);
  for (int shift = 32; shift < 32 + bits; shift += digit) {
    std::fill(count.begin(), count.end(), 0u);
    for (std::uint64_t k : keys) ++count[(k >> shift) & (radix - 1)];
    std::uint32_t sum = 0;
    for (auto& c : count) sum += std::exchange(c, sum);
    for (std::uint64_t k : keys) tmp[count[(k >> shift) & (radix - 1)]++] = k;
    keys.swap(tmp);
  }
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
