#pragma once
/// @file
/// Index orders by weight, ties by ascending index (namespace mmbal::detail): LPT's item and
/// unit orders (balance/), the CP block order (context/). All are `stable_radix_sort`s.

#include <mmbal/core/detail/radix_sort.hpp>
#include <mmbal/core/types.hpp>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

namespace mmbal::detail {

/// Sorts (key << 32 | id) words by key, stably (ids in the low half are never compared, so
/// words whose ids ascend in input order come out as a full sort of the words). `max_key`
/// bounds the keys (only its significant bits are sorted on); `DigitBits` and `cutoff` as in
/// `stable_radix_sort` (defaults for long lists; `migrate` sorts a rank's few dozen words
/// with 8-bit digits and a cutoff of 32).
template <int DigitBits = 11>
void sort_packed(std::vector<std::uint64_t>& words, std::vector<std::uint64_t>& spare, std::uint64_t max_key,
                 std::size_t cutoff = radix_sort_cutoff) {
  stable_radix_sort<DigitBits>(
      words, spare, [](std::uint64_t w) { return w >> 32; }, std::bit_width(max_key), cutoff);
}

/// The ids in the low halves of sorted packed words.
[[nodiscard]] inline std::vector<std::uint32_t> packed_ids(const std::vector<std::uint64_t>& words) {
  std::vector<std::uint32_t> out(words.size());
  for (std::size_t i = 0; i < words.size(); ++i) out[i] = static_cast<std::uint32_t>(words[i] & 0xffffffffu);
  return out;
}

/// Item ids sorted by weight descending, ties by ascending id: a radix sort of
/// ((max w − w) << 32 | id). O(n · ⌈bits(max w) / 11⌉).
[[nodiscard]] inline std::vector<std::uint32_t> descending_order(std::span<const length_t> weights) {
  const std::size_t n = weights.size();
  length_t max_w = 0;
  for (length_t w : weights) max_w = std::max(max_w, w);
  std::vector<std::uint64_t> words(n), spare;
  for (std::size_t i = 0; i < n; ++i)
    words[i] = (std::uint64_t{static_cast<length_t>(max_w - weights[i])} << 32) | static_cast<std::uint64_t>(i);
  sort_packed(words, spare, max_w);
  return packed_ids(words);
}

/// Item ids sorted by weight ascending, ties by ascending id. O(n · ⌈bits(max w) / 11⌉).
[[nodiscard]] inline std::vector<std::uint32_t> ascending_order(std::span<const length_t> weights) {
  const std::size_t n = weights.size();
  length_t max_w = 0;
  for (length_t w : weights) max_w = std::max(max_w, w);
  std::vector<std::uint64_t> words(n), spare;
  for (std::size_t i = 0; i < n; ++i) words[i] = (std::uint64_t{weights[i]} << 32) | static_cast<std::uint64_t>(i);
  sort_packed(words, spare, max_w);
  return packed_ids(words);
}

/// Indices sorted by u64 key ascending, ties by ascending index (keys up to 64 bits).
/// O(n · ⌈bits(max key) / 11⌉).
[[nodiscard]] inline std::vector<std::uint32_t> order_by_key(std::span<const std::uint64_t> key) {
  std::vector<std::uint32_t> order(key.size()), spare;
  std::iota(order.begin(), order.end(), 0u);
  std::uint64_t spread = 0;
  for (const std::uint64_t k : key) spread |= k;
  stable_radix_sort(
      order, spare, [&](std::uint32_t i) { return key[i]; }, std::bit_width(spread));
  return order;
}

/// Indices sorted by u64 weight ascending, ties by ascending index.
[[nodiscard]] inline std::vector<std::uint32_t> ascending_order(std::span<const std::uint64_t> weights) {
  return order_by_key(weights);
}

/// Indices sorted by u64 weight descending, ties by ascending index (a radix sort of max − w).
[[nodiscard]] inline std::vector<std::uint32_t> descending_order(std::span<const std::uint64_t> weights) {
  const std::uint64_t top = weights.empty() ? 0 : *std::max_element(weights.begin(), weights.end());
  std::vector<std::uint64_t> key(weights.size());
  for (std::size_t i = 0; i < key.size(); ++i) key[i] = top - weights[i];
  return order_by_key(key);
}

}  // namespace mmbal::detail
