#pragma once
/// @file
/// Balance metrics (docs/DESIGN.md §5.1, §7): per-bin loads recomputed from an assignment, max,
/// mean, max/mean, the lower bounds every result is reported against, traffic of a
/// placement change, and OmniBal's pad ratio (eq. 1) and dist ratio (eq. 2).

#include <mmbal/core/concepts.hpp>
#include <mmbal/core/detail/node_map.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/cost/functions.hpp>

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

namespace mmbal {

/// Per-bin cost when item i is on bin `bin_of[i]` (of `bins`): each bin folds its items in
/// ascending item id. Throws on a size mismatch, a bin ≥ bins or bins above `max_ranks`. O(n + bins).
/// `cost::tokens`, whose value reads only Σ l, folds one integer per bin instead of the whole
/// state — the same loads (the sum is exact), 2–3 × faster on the image phases (bench_refine
/// `BM_bin_loads`, bench/RESULTS.md "Session 39").
template <batch_cost C>
[[nodiscard]] std::vector<double> bin_loads(std::span<const rank_t> bin_of, rank_t bins,
                                            std::span<const length_t> weights, const C& cost) {
  if (bin_of.size() != weights.size())
    detail::throw_invalid("bin_loads: partition has ", bin_of.size(), " items, weights ", weights.size());
  if (bins > max_ranks) (void)checked_ranks(bins, "bin_loads: bins");  // O(bins) state follows
  // `tokens` reads only Σ l: one integer per bin instead of the whole state.
  constexpr bool sum_only = std::same_as<C, cost::tokens>;
  using accumulator = std::conditional_t<sum_only, std::uint64_t, typename C::state>;
  std::vector<accumulator> acc(bins, [&]() -> accumulator {
    if constexpr (sum_only)
      return 0;
    else
      return cost.empty();
  }());
  for (std::size_t i = 0; i < weights.size(); ++i) {
    if (bin_of[i] >= bins) detail::throw_invalid("bin_loads: item ", i, " on bin ", bin_of[i], " >= ", bins);
    if constexpr (sum_only)
      acc[bin_of[i]] += weights[i];
    else
      acc[bin_of[i]] = cost.add(acc[bin_of[i]], weights[i]);
  }
  std::vector<double> loads(bins);
  for (rank_t b = 0; b < bins; ++b) {
    if constexpr (sum_only) {
      typename C::state s = cost.empty();
      s.sum = acc[b];
      loads[b] = cost.value(s);
    } else {
      loads[b] = cost.value(acc[b]);
    }
  }
  return loads;
}

/// Per-bin cost of a partition: each bin folds its items in ascending item id. O(n + bins).
template <batch_cost C>
[[nodiscard]] std::vector<double> bin_loads(const partition& p, std::span<const length_t> weights, const C& cost) {
  return bin_loads(std::span<const rank_t>(p.bin_of), p.bins, weights, cost);
}

/// Per-bin cost of an assignment, folded in slot order. O(n + bins).
template <batch_cost C>
[[nodiscard]] std::vector<double> bin_loads(const assignment& a, std::span<const length_t> weights, const C& cost) {
  if (a.size() != weights.size())
    detail::throw_invalid("bin_loads: assignment has ", a.size(), " items, weights ", weights.size());
  std::vector<double> loads(a.bins);
  const auto bins = a.items_by_bin();
  for (rank_t b = 0; b < a.bins; ++b) {
    typename C::state s = cost.empty();
    for (item_id i : bins[b]) s = cost.add(s, weights[i]);
    loads[b] = cost.value(s);
  }
  return loads;
}

/// Max, mean and max/mean of a load vector (max/mean = 1 when the mean is 0).
struct load_summary {
  double max = 0;
  double mean = 0;
  double max_over_mean = 1;
};

[[nodiscard]] inline load_summary summarize_loads(std::span<const double> loads) {
  load_summary s;
  if (loads.empty()) return s;
  double total = 0;
  for (double l : loads) {
    s.max = std::max(s.max, l);
    total += l;
  }
  s.mean = total / static_cast<double>(loads.size());
  s.max_over_mean = s.mean > 0 ? s.max / s.mean : 1.0;
  return s;
}

/// Lower bound on the maximum bin cost: max(Σ c(w) / d, max c(w)), with c(w) the cost of an
/// item alone. Exact for additive costs; for any cost whose batch value is at least the
/// sum of its items' solo values (all built-in costs) it is still a valid bound. O(n).
/// Throws `invalid_input` for bins = 0, and when the items' total cost is not finite: finite
/// cost parameters can still overflow a double (`attention:alpha=1e308`), and every load would
/// then be infinite — valid placements of a meaningless balance, reported instead.
template <batch_cost C>
[[nodiscard]] double lower_bound(std::span<const length_t> weights, rank_t bins, const C& cost) {
  if (bins == 0) detail::throw_invalid("lower_bound: bins = 0");
  double total = 0, largest = 0;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    const double c = cost.value(cost.add(cost.empty(), weights[i]));
    if (std::isnan(c)) detail::throw_invalid("item ", i, " (length ", weights[i], ") alone costs NaN");
    total += c;
    largest = std::max(largest, c);
  }
  if (!std::isfinite(total))
    detail::throw_invalid("the items' total cost is ", total, " (largest item cost ", largest, ", longest item ",
                          *std::max_element(weights.begin(), weights.end()),  // not empty: total ≠ 0
                          "): the cost's parameters overflow a double");
  return std::max(total / bins, largest);
}

/// Lower bound under equal counts (every bin holds ⌊n/d⌋ or ⌈n/d⌉ items), for additive costs
/// (for the others it bounds the sum of solo costs); the largest of:
/// - the plain bound (`lower_bound`);
/// - some bin holds ⌈n/d⌉ items, at least the ⌈n/d⌉ smallest;
/// - pigeonhole: of the t largest items (t = 1..n) some bin holds c = ⌈t/d⌉, at least the c
///   smallest of them, and with them at least ⌊n/d⌋ − c further items, at least the ⌊n/d⌋ − c
///   smallest of all. t = 1 is docs/DESIGN.md §5.1's "max item + the (⌊n/d⌋ − 1) smallest"
///   (⌊n/d⌋, not ⌈n/d⌉: the largest item may sit in a bin of ⌊n/d⌋ items); larger t catch a
///   few heavy items that cannot all have bins of their own (d = 2, items 10, 10, 10, 1, 1, 1:
///   21 = the optimum, where the average gives 16.5 and t = 1 gives 12).
/// Never above the optimum (tested against exhaustive search). O(n log n).
template <batch_cost C>
[[nodiscard]] double equal_count_lower_bound(std::span<const length_t> weights, rank_t bins, const C& cost) {
  const double plain = lower_bound(weights, bins, cost);
  if (weights.empty()) return plain;
  std::vector<double> solo;
  solo.reserve(weights.size());
  for (length_t w : weights) solo.push_back(cost.value(cost.add(cost.empty(), w)));
  std::sort(solo.begin(), solo.end());
  const std::size_t n = solo.size();
  const std::size_t floor_count = n / bins;
  const std::size_t ceil_count = (n + bins - 1) / bins;
  // smallest[k] = Σ of the k smallest solo costs.
  std::vector<double> smallest(n + 1, 0.0);
  for (std::size_t k = 0; k < n; ++k) smallest[k + 1] = smallest[k] + solo[k];
  double best = std::max(plain, smallest[ceil_count]);
  // The c smallest of the t largest are solo[n − t .. n − t + c): Σ = smallest[n − t + c] − smallest[n − t].
  for (std::size_t t = 1; t <= n; ++t) {
    const std::size_t c = (t + bins - 1) / bins;
    const double heavy = smallest[n - t + c] - smallest[n - t];
    best = std::max(best, heavy + (c < floor_count ? smallest[floor_count - c] : 0.0));
  }
  return best;
}

/// What a placement change moves: items and bytes whose rank changes, and the bytes whose
/// node changes (node = rank / ranks_per_node; ranks_per_node = 0 means one node).
struct traffic {
  std::uint64_t moved_items = 0;
  std::uint64_t moved_bytes = 0;
  std::uint64_t inter_node_bytes = 0;
};

namespace detail {

/// Counts one item's move from rank a to rank b carrying `bytes` into `t`: nothing when a == b,
/// inter-node bytes when node(a) ≠ node(b). The one definition of what a move costs, shared by
/// every traffic count (here, rearrange/composition.hpp, balance/migrate.hpp). Throws
/// `invalid_input` when the moved bytes leave 64 bits rather than wrapping.
inline void add_move(traffic& t, rank_t a, rank_t b, std::uint64_t bytes, const node_map& node) {
  if (a == b) return;
  ++t.moved_items;
  t.moved_bytes = checked_add(t.moved_bytes, bytes, "traffic: the moved bytes");
  if (node(a) != node(b)) t.inter_node_bytes += bytes;  // ≤ moved_bytes
}

}  // namespace detail

/// Traffic from `origin` (rank per item) to the ranks of `destination`. O(n + bins).
[[nodiscard]] inline traffic placement_traffic(std::span<const rank_t> origin, const partition& destination,
                                               std::span<const std::uint64_t> item_bytes, rank_t ranks_per_node) {
  if (origin.size() != destination.bin_of.size() || item_bytes.size() != origin.size())
    detail::throw_invalid("placement_traffic: sizes differ (origin ", origin.size(), ", destination ",
                          destination.bin_of.size(), ", bytes ", item_bytes.size(), ")");
  const detail::node_map node(destination.bins, ranks_per_node);
  traffic t;
  for (std::size_t i = 0; i < origin.size(); ++i)
    detail::add_move(t, origin[i], destination.bin_of[i], item_bytes[i], node);
  return t;
}

/// OmniBal eq. (1), pad ratio of one mini-batch: Σ (t_max − t_i) / (t_max · B). 0 for an empty
/// or all-zero batch. @see OmniBal §3.
[[nodiscard]] inline double pad_ratio(std::span<const std::uint64_t> sample_tokens) {
  if (sample_tokens.empty()) return 0.0;
  const std::uint64_t t_max = *std::max_element(sample_tokens.begin(), sample_tokens.end());
  if (t_max == 0) return 0.0;
  double pad = 0;  // a double: Σ (t_max − t_i) can leave 64 bits; exact below 2^53
  for (std::uint64_t t : sample_tokens) pad += static_cast<double>(t_max - t);
  return pad / (static_cast<double>(t_max) * static_cast<double>(sample_tokens.size()));
}

/// OmniBal eq. (2), dist ratio across N devices: Σ (T_max − T_i) / (T_max · N), with T_i the
/// tokens of device i's mini-batch. 0 when empty or all zero. @see OmniBal §3.
[[nodiscard]] inline double dist_ratio(std::span<const std::uint64_t> device_tokens) {
  return pad_ratio(device_tokens);  // the same formula over devices instead of samples
}

}  // namespace mmbal
