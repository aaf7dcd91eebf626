#pragma once
/// @file
/// Greedy least-loaded placement (Graham's list scheduling), the core of every unconstrained
/// LPT in the library: balance::lpt's hot path and context::lpt_distributor (namespace
/// mmbal::detail). The caller fixes the order; this places.

#include <mmbal/core/detail/loser_tree.hpp>
#include <mmbal/core/types.hpp>

#include <bit>
#include <cstddef>
#include <cstdint>

namespace mmbal::detail {

/// Bits of a bin index in a packed (load << bits | bin) word: bit_width(bins − 1).
[[nodiscard]] inline int bin_bits(rank_t bins) noexcept { return std::bit_width(bins - 1); }

/// Whether integer loads summing to at most `total` fit packed words for `bins` bins, i.e.
/// (total + 1) << bin_bits does not overflow 64 bits.
[[nodiscard]] inline bool fits_packed(std::uint64_t total, rank_t bins) noexcept {
  const int bits = bin_bits(bins);
  return bits == 0 || total < (std::uint64_t{1} << (64 - bits)) - 1;
}

/// For k = 0 .. n−1: item k goes to the bin with the least load so far (ties: lowest bin
/// index), `place(k, bin)`, and that bin's load grows by the integer `add(k)`. Loads start at 0
/// and are exact: keys are single words (load << bin_bits | bin), so the tree compares plain
/// integers. Requires `fits_packed(Σ add, bins)` and bins ≥ 1. O(bins + n log bins).
template <class Add, class Place>
void deal_least_loaded_packed(std::size_t n, rank_t bins, Add&& add, Place&& place) {
  const int bits = bin_bits(bins);
  const std::uint64_t bin_mask = (std::uint64_t{1} << bits) - 1;
  struct bin_of_word {
    std::uint64_t mask;
    rank_t operator()(std::uint64_t key) const noexcept { return static_cast<rank_t>(key & mask); }
  };
  loser_tree<std::uint64_t, bin_of_word> tree(
      bins, ~std::uint64_t{0}, [](rank_t b) { return std::uint64_t{b}; }, bin_of_word{bin_mask});
  for (std::size_t k = 0; k < n; ++k) {
    const std::uint64_t top = tree.top();
    place(k, static_cast<rank_t>(top & bin_mask));
    tree.replace_top(top + (static_cast<std::uint64_t>(add(k)) << bits));
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
