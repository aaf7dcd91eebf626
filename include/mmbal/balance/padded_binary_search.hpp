#pragma once
/// @file
/// OrchMLLM's post-balancing algorithm with paddings (§5.1, Alg. 2): binary search on the
/// batch bound over contiguous groups of the ascending lengths.

#include <mmbal/balance/constraints.hpp>
#include <mmbal/balance/detail/placement.hpp>
#include <mmbal/balance/detail/units.hpp>
#include <mmbal/balance/detail/validate.hpp>
#include <mmbal/core/concepts.hpp>
#include <mmbal/core/detail/order.hpp>
#include <mmbal/core/types.hpp>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace mmbal::balance {

/// Padded binary search for a `padded_cost` (a batch costs `c.padded_value(b, max l)`, e.g.
/// `padded`: b · max l, or `padded_attention`).
///
/// Sort the items by length ascending (ties by id). For a bound B, GetLeastBatches fills
/// batches in that order and starts a new batch when the item would push the current one
/// above B (for `padded`: (size + 1) · l > B) — the fewest contiguous batches within B,
/// because a contiguous batch's cost only grows when it is extended to the right and only
/// shrinks when cut on the left. Binary search finds the least B that needs ≤ d batches;
/// batch j goes to bin j (bins past the last batch stay empty).
///
/// The search runs over the IEEE-754 bit patterns of non-negative doubles between the
/// largest single-item cost and padded_value(⌈n/d⌉, max l) (docs/DESIGN.md §5.1's range
/// [max l, max l · ⌈n/d⌉] for `padded`), so it ends on the exact least bound for any padded
/// cost, integral or not.
///
/// - Guarantee: optimal among groupings into contiguous runs of the sorted order (the
///   paper's claim); not optimal among all partitions.
/// - Complexity: O(n log n) sort + O(n) per probe, ≤ 64 probes (far fewer in practice: a
///   probe moves the bounds to the costs it actually met, see `run`).
/// - Slot order: ascending length (ties by id) within each bin.
/// - Constraints: `count_cap` fixed (a batch also closes at the cap; still optimal for
///   contiguous runs); `capacity` (error when the best contiguous grouping exceeds it, naming
///   both). Rejected: `count_cap` equal, `groups`.
/// @see OrchMLLM §5.1, Alg. 2; docs/DESIGN.md §5.1.
struct padded_binary_search {
  static constexpr const char* name = "padded";

  template <padded_cost C>
  [[nodiscard]] assignment operator()(std::span<const length_t> weights, rank_t bins, const C& cost,
                                      const constraints& limits = {}) const {
    detail::check_problem(name, weights, bins, limits);
    if (limits.counts.kind == count_cap::mode::equal) detail::reject_constraint(name, "count_cap equal");
    if (!limits.groups.empty()) detail::reject_constraint(name, "groups");
    const std::size_t n = weights.size();
    const detail::units u = detail::make_units(n, {});
    detail::check_solo_capacity(name, u, weights, cost, limits);
    if (n == 0) return assignment{bins, {}};
    const std::uint64_t cap = limits.counts.kind == count_cap::mode::fixed ? limits.counts.cap : n;
    const std::vector<item_id> order = mmbal::detail::ascending_order(weights);

    // Lengths in that order, contiguous: every probe scans them.
    std::vector<length_t> sorted(n);
    for (std::size_t k = 0; k < n; ++k) sorted[k] = weights[order[k]];

    // One run of GetLeastBatches under bound B (stops counting past `bins`). Besides the
    // batch count it reports the largest batch cost it formed and the smallest cost that
    // exceeded B at a cut: every bound in [largest, B] makes the same cuts, and so does every
    // bound in [B, smallest exceeding) — the search jumps to those values instead of halving.
    struct probe {
      std::uint64_t batches = 1;
      double largest = 0;
      double smallest_exceeding = std::numeric_limits<double>::infinity();
    };
    auto run = [&](double bound) {
      probe p;
      std::uint64_t size = 0;
      for (std::size_t k = 0; k < n; ++k) {
        if (size < cap) {
          const double grown = cost.padded_value(size + 1, sorted[k]);
          if (grown <= bound) {
            ++size;
            continue;
          }
          p.smallest_exceeding = std::min(p.smallest_exceeding, grown);
        }
        if (size > 0) p.largest = std::max(p.largest, cost.padded_value(size, sorted[k - 1]));
        if (++p.batches > bins) return p;
        size = 1;
      }
      p.largest = std::max(p.largest, cost.padded_value(size, sorted[n - 1]));
      return p;
    };

    const std::uint64_t per_bin = (n + bins - 1) / bins;
    double lo = 0;
    for (const length_t l : sorted) lo = std::max(lo, cost.padded_value(1, l));
    double hi = std::max(lo, cost.padded_value(std::min<std::uint64_t>(per_bin, cap), sorted.back()));
    // hi is feasible: ⌈n/d⌉ (or cap) consecutive items per batch cost at most hi each, and
    // cap·d ≥ n is checked. Bisect on bit patterns (non-negative doubles order like them):
    // lo_bits is always infeasible or the single-item bound, hi_bits feasible.
    std::uint64_t lo_bits = std::bit_cast<std::uint64_t>(lo + 0.0), hi_bits = std::bit_cast<std::uint64_t>(hi + 0.0);
    if (const probe p = run(lo); p.batches <= bins)
      hi_bits = lo_bits;
    else if (p.smallest_exceeding < std::numeric_limits<double>::infinity())
      lo_bits = std::max(lo_bits, std::bit_cast<std::uint64_t>(p.smallest_exceeding) - 1);
    while (hi_bits > lo_bits + 1) {
      const std::uint64_t mid = lo_bits + (hi_bits - lo_bits) / 2;
      const probe p = run(std::bit_cast<double>(mid));
      if (p.batches <= bins)
        hi_bits = std::bit_cast<std::uint64_t>(p.largest + 0.0);  // ≤ mid, same cuts
      else if (p.smallest_exceeding < std::numeric_limits<double>::infinity())
        lo_bits = std::max(mid, std::bit_cast<std::uint64_t>(p.smallest_exceeding) - 1);
      else
        lo_bits = mid;
    }
    const double bound = std::bit_cast<double>(hi_bits);
    if (limits.capacity && bound > *limits.capacity)
      mmbal::detail::throw_invalid(name, ": the best contiguous grouping costs ", bound,
                                   " per bin, above the capacity ", *limits.capacity,
                                   " (try lpt, which packs non-contiguously)");

    detail::placement_builder out(n, bins);
    rank_t b = 0;
    std::uint64_t size = 0;
    for (const item_id i : order) {
      if (size >= cap || cost.padded_value(size + 1, weights[i]) > bound) {
        ++b;
        size = 0;
      }
      out.place(i, b);
      ++size;
    }
    return std::move(out).finish();
  }
};

}  // namespace mmbal::balance
