#pragma once
/// @file
/// `mmbal.balanced_partitions`: a drop-in for verl's `get_seqlen_balanced_partitions` over
/// 64-bit weights (verl passes workloads such as 24576·L + L², beyond the library's 32-bit
/// lengths). Karmarkar–Karp largest differencing with verl's exact tie-breaks (so the result is
/// never worse than verl's on any input), then a local search that only ever lowers the
/// spread. Sums are exact (128-bit).
/// @see Karmarkar & Karp, "The differencing method of set partitioning" (1982); docs/DESIGN.md.

#include <mmbal/core/error.hpp>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <queue>
#include <utility>
#include <vector>

namespace mmbal_python {

__extension__ typedef unsigned __int128 exact_sum;  // n · 2^53 overflows 64 bits from n = 2048

/// Items as singly linked lists in one pool, so merging two sets is O(1) and keeps
/// insertion order (verl compares the ordered item lists on ties).
struct item_pool {
  std::vector<std::uint64_t> weight;
  std::vector<std::int64_t> next;  ///< -1 ends a list
};

/// One set of a KK state: its exact sum, item count and item list (head/tail into the pool).
struct kk_set {
  exact_sum sum = 0;
  std::uint32_t count = 0;
  std::int64_t head = -1, tail = -1;
};

/// verl's Set.__lt__: by sum, then item count, then the item lists (idx, value) lexicographically.
inline bool set_less(const item_pool& pool, const kk_set& a, const kk_set& b) {
  if (a.sum != b.sum) return a.sum < b.sum;
  if (a.count != b.count) return a.count < b.count;
  std::int64_t x = a.head, y = b.head;
  for (; x >= 0 && y >= 0; x = pool.next[x], y = pool.next[y]) {
    if (x != y) return x < y;
    if (pool.weight[x] != pool.weight[y]) return pool.weight[x] < pool.weight[y];
  }
  return x < 0 && y >= 0;
}

/// A KK state: its non-empty sets in descending order (verl keeps k sets; the missing ones are
/// empty, the smallest of all under `set_less`).
struct kk_state {
  std::vector<kk_set> sets;
};

/// Largest differencing (verl's `karmarkar_karp`, same tie-breaks): per partition, the item ids
/// in insertion order; partitions in the final state's descending order. Requires k ≥ 1 and,
/// with `equal_size`, n divisible by k (checked by the caller). O(n log n · k log k) worst case.
inline std::vector<std::vector<std::uint32_t>> karmarkar_karp(const std::vector<std::uint64_t>& w, std::uint32_t k,
                                                              bool equal_size) {
  const std::size_t n = w.size();
  item_pool pool{w, std::vector<std::int64_t>(n, -1)};
  std::vector<std::uint32_t> sorted(n);
  for (std::uint32_t i = 0; i < n; ++i) sorted[i] = i;
  std::sort(sorted.begin(), sorted.end(),
            [&](std::uint32_t a, std::uint32_t b) { return w[a] != w[b] ? w[a] < w[b] : a < b; });

  auto descending = [&](kk_state& s) {
    std::sort(s.sets.begin(), s.sets.end(), [&](const kk_set& a, const kk_set& b) { return set_less(pool, b, a); });
  };
  auto spread = [&](const kk_state& s) -> exact_sum {
    return s.sets.size() < k ? s.sets.front().sum : s.sets.front().sum - s.sets.back().sum;
  };
  std::vector<kk_state> states;
  states.reserve(equal_size ? n / k : n);
  if (equal_size) {
    for (std::size_t off = 0; off < n; off += k) {
      kk_state s;
      for (std::uint32_t j = 0; j < k; ++j) {
        const std::uint32_t i = sorted[off + j];
        s.sets.push_back(kk_set{w[i], 1, i, i});
      }
      descending(s);
      states.push_back(std::move(s));
    }
  } else {
    for (std::uint32_t i : sorted) states.push_back(kk_state{{kk_set{w[i], 1, i, i}}});
  }
  // verl's State.__lt__ on a min-heap: the largest spread first, then the largest first set.
  auto pops_first = [&](std::size_t a, std::size_t b) {
    const exact_sum sa = spread(states[a]), sb = spread(states[b]);
    if (sa != sb) return sa > sb;
    return set_less(pool, states[b].sets.front(), states[a].sets.front());
  };
  auto heap_less = [&](std::size_t a, std::size_t b) { return pops_first(b, a); };
  std::priority_queue<std::size_t, std::vector<std::size_t>, decltype(heap_less)> heap(heap_less);
  for (std::size_t s = 0; s < states.size(); ++s) heap.push(s);
  while (heap.size() > 1) {
    const std::size_t a = heap.top();
    heap.pop();
    const std::size_t b = heap.top();
    heap.pop();
    kk_state& x = states[a];
    kk_state& y = states[b];
    // x.sets[i] absorbs y.sets[k-1-i]; y's set j is non-empty for j < |y|, i.e. i ≥ k - |y|.
    // x's sets before `first` are untouched and stay in descending order, so only the
    // changed tail is sorted and then merged with them (verl re-sorts all k sets; same result).
    const std::size_t nx = x.sets.size(), ny = y.sets.size();
    const std::size_t first = k - ny;
    const std::size_t kept = std::min(nx, first);
    for (std::size_t i = first; i < k; ++i) {
      const kk_set& from = y.sets[k - 1 - i];
      if (i < nx) {
        kk_set& to = x.sets[i];
        pool.next[to.tail] = from.head;
        to.tail = from.tail;
        to.sum += from.sum;
        to.count += from.count;
      } else {
        x.sets.push_back(from);  // i ≥ nx: an empty set of x takes y's set as is
      }
    }
    auto greater = [&](const kk_set& l, const kk_set& r) { return set_less(pool, r, l); };
    const auto tail = x.sets.begin() + static_cast<std::ptrdiff_t>(kept);
    if (nx <= first)
      std::reverse(tail, x.sets.end());  // y's sets appended in ascending order: now descending
    else
      std::sort(tail, x.sets.end(), greater);
    std::inplace_merge(x.sets.begin(), tail, x.sets.end(), greater);
    y.sets = {};
    heap.push(a);
  }
  std::vector<std::vector<std::uint32_t>> out(k);
  if (!states.empty()) {
    const kk_state& last = states[heap.top()];
    for (std::size_t j = 0; j < last.sets.size(); ++j)
      for (std::int64_t i = last.sets[j].head; i >= 0; i = pool.next[i])
        out[j].push_back(static_cast<std::uint32_t>(i));
  }
  return out;
}

/// Local search on `parts` (item ids per partition, weights `w`): while it helps, moves one item
/// (not with `equal_size`; never empties a partition) or swaps two between the heaviest and the
/// lightest partition, choosing the transfer d closest to half their gap with 0 < d < gap. Every
/// step lowers Σ sum² strictly and never raises the maximum nor lowers the minimum, so the
/// result is at least as balanced as the input. At most `max_steps` steps; O(m log m) each.
inline void refine_partitions(std::vector<std::vector<std::uint32_t>>& parts, const std::vector<std::uint64_t>& w,
                              bool equal_size, std::size_t max_steps) {
  const std::size_t k = parts.size();
  if (k < 2) return;
  std::vector<exact_sum> sum(k, 0);
  for (std::size_t p = 0; p < k; ++p)
    for (std::uint32_t i : parts[p]) sum[p] += w[i];
  for (std::size_t step = 0; step < max_steps; ++step) {
    std::size_t hi = 0, lo = 0;
    for (std::size_t p = 1; p < k; ++p) {
      if (sum[p] > sum[hi]) hi = p;
      if (sum[p] < sum[lo]) lo = p;
    }
    const exact_sum gap = sum[hi] - sum[lo];
    if (gap < 2) return;  // no integer 0 < d < gap... d = 1 needs gap ≥ 2
    // Best transfer: |2d - gap| minimal over 0 < d < gap.
    exact_sum best_cost = gap;  // |2d - gap| < gap for every admissible d
    std::ptrdiff_t move_from = -1, swap_with = -1;
    auto consider = [&](exact_sum d, std::ptrdiff_t x, std::ptrdiff_t y) {
      if (d == 0 || d >= gap) return;
      const exact_sum twice = 2 * d;
      const exact_sum cost = twice > gap ? twice - gap : gap - twice;
      if (cost < best_cost) {
        best_cost = cost;
        move_from = x;
        swap_with = y;
      }
    };
    if (!equal_size && parts[hi].size() > 1)
      for (std::size_t a = 0; a < parts[hi].size(); ++a) consider(w[parts[hi][a]], static_cast<std::ptrdiff_t>(a), -1);
    // Positions in parts[lo], by weight.
    std::vector<std::ptrdiff_t> light(parts[lo].size());
    for (std::size_t b = 0; b < light.size(); ++b) light[b] = static_cast<std::ptrdiff_t>(b);
    auto weight_at = [&](std::ptrdiff_t b) { return w[parts[lo][static_cast<std::size_t>(b)]]; };
    std::sort(light.begin(), light.end(),
              [&](std::ptrdiff_t a, std::ptrdiff_t b) { return weight_at(a) < weight_at(b); });
    const exact_sum half = gap / 2;
    for (std::size_t a = 0; a < parts[hi].size(); ++a) {
      const std::uint64_t x = w[parts[hi][a]];
      // The y nearest x - gap/2 from both sides (x - y closest to gap/2); `consider` rejects y ≥ x.
      const std::uint64_t target = half >= x ? 0 : static_cast<std::uint64_t>(x - half);
      const auto it = std::lower_bound(light.begin(), light.end(), target,
                                       [&](std::ptrdiff_t b, std::uint64_t v) { return weight_at(b) < v; });
      if (it != light.end() && weight_at(*it) < x)
        consider(exact_sum{x} - weight_at(*it), static_cast<std::ptrdiff_t>(a), *it);
      if (it != light.begin() && weight_at(*(it - 1)) < x)
        consider(exact_sum{x} - weight_at(*(it - 1)), static_cast<std::ptrdiff_t>(a), *(it - 1));
    }
    if (move_from < 0) return;
    const std::uint32_t x = parts[hi][static_cast<std::size_t>(move_from)];
    parts[hi].erase(parts[hi].begin() + move_from);
    sum[hi] -= w[x];
    sum[lo] += w[x];
    if (swap_with >= 0) {
      const std::uint32_t y = parts[lo][static_cast<std::size_t>(swap_with)];
      parts[lo][static_cast<std::size_t>(swap_with)] = x;
      parts[hi].push_back(y);
      sum[hi] += w[y];
      sum[lo] -= w[y];
    } else {
      parts[lo].push_back(x);
    }
  }
}

/// verl's `get_seqlen_balanced_partitions` contract: k non-empty partitions, each sorted
/// ascending; `invalid_input` (verl asserts) for n < k or, with `equal_size`, n % k ≠ 0.
/// `refine = false` returns verl's KK result exactly (the tests compare it).
inline std::vector<std::vector<std::uint32_t>> balanced_partitions(const std::vector<std::uint64_t>& w, std::uint32_t k,
                                                                   bool equal_size, bool refine = true) {
  if (w.size() < k)
    mmbal::detail::throw_invalid("balanced_partitions: ", w.size(), " items < k_partitions = ", k,
                                 " (every partition must be non-empty)");
  if (equal_size && w.size() % k != 0)
    mmbal::detail::throw_invalid("balanced_partitions: equal_size with ", w.size(),
                                 " items is not divisible by k_partitions = ", k);
  auto parts = karmarkar_karp(w, k, equal_size);
  if (refine) {
    refine_partitions(parts, w, equal_size, 4 * w.size() + 16);
    // verl returns its sets by descending sum (then size): keep that order after the moves. A
    // stable sort leaves KK's own order, which already is, unchanged.
    std::vector<std::pair<exact_sum, std::size_t>> key(parts.size());
    for (std::size_t i = 0; i < parts.size(); ++i) {
      key[i].second = parts[i].size();
      for (const std::uint32_t x : parts[i]) key[i].first += w[x];
    }
    std::vector<std::size_t> order(parts.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return key[a] > key[b]; });
    std::vector<std::vector<std::uint32_t>> sorted(parts.size());
    for (std::size_t i = 0; i < order.size(); ++i) sorted[i] = std::move(parts[order[i]]);
    parts = std::move(sorted);
  }
  for (auto& p : parts) {
    if (p.empty()) mmbal::detail::throw_runtime("balanced_partitions: an empty partition (internal error)");
    std::sort(p.begin(), p.end());
  }
  return parts;
}

}  // namespace mmbal_python
