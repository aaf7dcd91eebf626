#pragma once
/// @file
/// Greedy least-loaded placement (Graham's list scheduling), the core of every unconstrained
/// LPT in the library: balance::lpt's hot path and context::lpt_distributor (namespace
/// mmbal::detail). The caller fixes the order; this places.

#include <mmbal/core/detail/loser_tree.hpp>
#include <mmbal/core/detail/radix_sort.hpp>
#include <mmbal/core/types.hpp>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace mmbal::detail {

/// Bits of a bin index in a packed (load << bits | bin) word: bit_width(bins − 1).
[[nodiscard]] inline int bin_bits(rank_t bins) noexcept { return std::bit_width(bins - 1); }

/// Whether integer loads summing to at most `total` fit packed words for `bins` bins, i.e.
/// (total + 1) << bin_bits does not overflow 64 bits.
[[nodiscard]] inline bool fits_packed(std::uint64_t total, rank_t bins) noexcept {
  const int bits = bin_bits(bins);
  return bits == 0 || total < (std::uint64_t{1} << (64 - bits)) - 1;
}

/// The shortest run of equal adds that `deal_least_loaded_packed` places in bulk over `bins`
/// bins: max(2 · bins, 64) (below it the bulk step's O(bins) setup costs more than the tree's
/// walks it saves); none for one bin.
[[nodiscard]] inline std::size_t min_equal_run(rank_t bins) noexcept {
  return bins < 2 ? std::numeric_limits<std::size_t>::max() : std::max<std::size_t>(2 * std::size_t{bins}, 64);
}

/// Never reports a run of equal adds: `deal_least_loaded_packed` then places item by item.
struct no_equal_runs {
  constexpr bool operator()(std::size_t, std::size_t) const noexcept { return false; }
};

/// Deals a run of items that all add the same integer `step` exactly as the item-by-item loop
/// of `deal_least_loaded_packed` would, in O(bins + run) instead of O(run · log bins).
///
/// Why it is exact: with one add, the loop's picks are the smallest keys of the chains
/// key_b, key_b + step', key_b + 2·step', ... (step' = step << bits) in increasing order (a
/// chain's next key enters the tree when its previous one leaves it). Writing a bin's load as
/// q·step + r (0 ≤ r < step), its chain's keys are (ℓ·step + r) << bits | b for the levels
/// ℓ ≥ q: every key of level ℓ lies below every key of level ℓ + 1, and within a level the
/// keys run by (r, b) — the same order at every level. So the run is dealt level by level to
/// the bins whose chains have reached it, kept in (r, b) order and merged at each level with
/// the bins whose q is that level (already in (r, b) order among themselves: their loads
/// differ only in r). Buffers are kept between runs.
class equal_run_dealer {
 public:
  /// Places items k .. k+m−1 (`place(k + i, bin)`) given every bin's packed key (`keys[b]` =
  /// load << bits | b), which it advances. O(bins · ⌈key bits / 11⌉ + m).
  template <class Place>
  void deal(std::vector<std::uint64_t>& keys, int bits, std::size_t k, std::size_t m, std::uint64_t step,
            Place& place) {
    const std::uint64_t bin_mask = (std::uint64_t{1} << bits) - 1;
    if (step == 0) {  // the least-loaded bin stays the least loaded
      const auto least = static_cast<rank_t>(*std::min_element(keys.begin(), keys.end()) & bin_mask);
      for (std::size_t i = 0; i < m; ++i) place(k + i, least);
      return;
    }
    sorted_ = keys;
    const std::uint64_t largest = *std::max_element(sorted_.begin(), sorted_.end());
    stable_radix_sort<11>(
        sorted_, spare_, [](std::uint64_t key) { return key; }, std::bit_width(largest));
    const auto level_of = [&](std::uint64_t key) { return (key >> bits) / step; };
    // (r << bits | b): the order of the bins within a level
    const auto within_level = [&](std::uint64_t key) { return ((key >> bits) % step) << bits | (key & bin_mask); };
    const std::uint64_t step_key = step << bits;
    active_.clear();
    std::size_t joined = 0, done = 0;
    for (std::uint64_t level = level_of(sorted_[0]); done < m; ++level) {
      const std::size_t first_new = joined;
      while (joined < sorted_.size() && level_of(sorted_[joined]) == level) ++joined;
      if (joined > first_new) {
        merged_.resize(active_.size() + (joined - first_new));
        std::size_t a = 0, out = 0;
        for (std::size_t j = first_new; j < joined; ++j) {
          const std::uint64_t x = within_level(sorted_[j]);
          while (a < active_.size() && active_[a] < x) merged_[out++] = active_[a++];
          merged_[out++] = x;
        }
        while (a < active_.size()) merged_[out++] = active_[a++];
        active_.swap(merged_);
      }
      const std::size_t take = std::min(active_.size(), m - done);
      for (std::size_t i = 0; i < take; ++i) {
        const auto b = static_cast<rank_t>(active_[i] & bin_mask);
        place(k + done++, b);
        keys[b] += step_key;
      }
    }
  }

 private:
  std::vector<std::uint64_t> sorted_, spare_, active_, merged_;
};

/// For k = 0 .. n−1: item k goes to the bin with the least load so far (ties: lowest bin
/// index), `place(k, bin)`, and that bin's load grows by the integer `add(k)`. Loads start at 0
/// and are exact: keys are single words (load << bin_bits | bin), so the tree compares plain
/// integers. Requires `fits_packed(Σ add, bins)` and bins ≥ 1. O(bins + n log bins).
///
/// `equal_through(k, e)` (k < e) may report that items k..e all add the same (it must be
/// monotone in e: true for e up to the run's last item, false beyond); runs of at least
/// `min_equal_run(bins)` items are then dealt by `equal_run_dealer` in O(bins + run), with the same
/// result. LPT's image phases are such runs: the 584,001 images of a 2,560-rank image-heavy
/// step have 120 distinct lengths, three of them 71 % of the items.
template <class Add, class Place, class EqualThrough = no_equal_runs>
void deal_least_loaded_packed(std::size_t n, rank_t bins, Add&& add, Place&& place, EqualThrough&& equal_through = {}) {
  const int bits = bin_bits(bins);
  const std::uint64_t bin_mask = (std::uint64_t{1} << bits) - 1;
  struct bin_of_word {
    std::uint64_t mask;
    rank_t operator()(std::uint64_t key) const noexcept { return static_cast<rank_t>(key & mask); }
  };
  constexpr std::uint64_t sentinel = ~std::uint64_t{0};
  using tree_type = loser_tree<std::uint64_t, bin_of_word>;
  tree_type tree(
      bins, sentinel, [](rank_t b) { return std::uint64_t{b}; }, bin_of_word{bin_mask});
  const std::size_t min_run = min_equal_run(bins);
  equal_run_dealer dealer;
  std::vector<std::uint64_t> keys;
  for (std::size_t k = 0; k < n;) {
    if (n - k >= min_run && equal_through(k, k + min_run - 1)) {
      std::size_t last = k + min_run - 1, beyond = n;  // equal_through(k, last); not beyond (or the end)
      while (beyond - last > 1) {
        const std::size_t mid = last + (beyond - last) / 2;
        (equal_through(k, mid) ? last : beyond) = mid;
      }
      keys.assign(bins, 0);
      tree.for_each_key([&](std::uint64_t key) {
        if (key != sentinel) keys[key & bin_mask] = key;
      });
      dealer.deal(keys, bits, k, last + 1 - k, static_cast<std::uint64_t>(add(k)), place);
      tree = tree_type(
          bins, sentinel, [&](rank_t b) { return keys[b]; }, bin_of_word{bin_mask});
      k = last + 1;
      continue;
    }
    const std::uint64_t top = tree.top();
    place(k, static_cast<rank_t>(top & bin_mask));
    tree.replace_top(top + (static_cast<std::uint64_t>(add(k)) << bits));
    ++k;
  }
}

/// `deal_least_loaded_packed` for loads that are not packable: a load is the `std::uint64_t`
/// of a `wide_key` and `grow(k, bits)` returns the bin's next load bits — `bits + add` for
/// integer loads, the bits of `wide_key::make(load + add)` for non-negative double loads.
/// O(bins + n log bins).
template <class Grow, class Place>
void deal_least_loaded_wide(std::size_t n, rank_t bins, Grow&& grow, Place&& place) {
  struct bin_of_wide {
    rank_t operator()(const wide_key& key) const noexcept { return key.bin; }
  };
  loser_tree<wide_key, bin_of_wide> tree(bins, wide_key::max(), [](rank_t b) { return wide_key{0, b}; });
  for (std::size_t k = 0; k < n; ++k) {
    const wide_key top = tree.top();
    place(k, top.bin);
    tree.replace_top(wide_key{grow(k, top.bits), top.bin});
  }
}

}  // namespace mmbal::detail
