#pragma once
/// @file
/// The library's one stable LSD radix sort (namespace mmbal::detail), used by LPT's item
/// order and `migrate`'s per-rank removal order (balance/), the CP block order (context/) and
/// the relabeling's volume matrix (rearrange/).

#include <mmbal/core/error.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <utility>
#include <vector>

namespace mmbal::detail {

/// The default `cutoff` of `stable_radix_sort`: below this many records it uses a comparison
/// sort (same order; the histograms would dominate).
inline constexpr std::size_t radix_sort_cutoff = 1024;

/// Sorts `items` stably by the low `key_bits` bits of `key(item)` (a `std::uint64_t`; higher
/// bits must be 0), `DigitBits` bits per pass, passes over all-zero digit ranges skipped.
/// Equal keys keep their input order, so the result is exactly std::stable_sort by key.
/// `spare` is scratch (resized to items.size(); its capacity is reused across calls).
/// All digit histograms are built in one read of the keys, then one scatter per pass.
/// O(n · ⌈key_bits / DigitBits⌉ + 2^DigitBits · passes). @throws invalid_input if
/// items.size() ≥ 2^32 (the histograms count in 32 bits).
/// DigitBits: 11 suits 8-byte records (3 passes cover 33 bits); 8 suits larger records,
/// whose scatter is bound by the number of write streams, and short lists (histograms of 256:
/// `migrate`'s per-rank sorts of a few dozen words).
/// `cutoff`: below this many records a comparison sort (default `radix_sort_cutoff`): an
/// insertion sort up to 32 records (no buffer to allocate, as std::stable_sort does; `migrate`
/// sorts thousands of such short lists), else std::stable_sort by key.
/// Histograms of up to 2,048 counters in all (8-bit digits, any key width) live on the stack,
/// larger ones on the heap.
template <int DigitBits = 11, class T, class Key>
void stable_radix_sort(std::vector<T>& items, std::vector<T>& spare, Key key, int key_bits,
                       std::size_t cutoff = radix_sort_cutoff) {
  static_assert(DigitBits >= 1 && DigitBits <= 16);
  const std::size_t n = items.size();
  if (n > std::numeric_limits<std::uint32_t>::max()) throw_invalid("radix sort of ", n, " records (max 2^32 - 1)");
  key_bits = std::clamp(key_bits, 0, 64);
  if (key_bits == 0 || n < 2) return;
  if (n < cutoff) {
    if (n > 32) {
      std::stable_sort(items.begin(), items.end(), [&](const T& a, const T& b) { return key(a) < key(b); });
      return;
    }
    for (std::size_t i = 1; i < n; ++i) {  // insertion sort: stable, and no buffer to allocate
      T x = std::move(items[i]);
      const std::uint64_t kx = key(x);
      std::size_t j = i;
      for (; j > 0 && kx < key(items[j - 1]); --j) items[j] = std::move(items[j - 1]);
      items[j] = std::move(x);
    }
    return;
  }
  constexpr std::size_t radix = std::size_t{1} << DigitBits;
  constexpr std::uint64_t mask = radix - 1;
  const int passes = (key_bits + DigitBits - 1) / DigitBits;
  const std::size_t counters = static_cast<std::size_t>(passes) * radix;
  constexpr std::size_t on_stack = 2048;
  std::array<std::uint32_t, on_stack> local;  // filled below before any read
  std::vector<std::uint32_t> heap;
  std::uint32_t* count = local.data();
  if (counters > on_stack) {
    heap.resize(counters);
    count = heap.data();
  }
  std::fill_n(count, counters, 0u);
  for (const T& x : items) {
    const std::uint64_t k = key(x);
    for (int p = 0; p < passes; ++p) ++count[static_cast<std::size_t>(p) * radix + ((k >> (p * DigitBits)) & mask)];
  }
  spare.resize(n);
  for (int p = 0; p < passes; ++p) {
    std::uint32_t* c = count + static_cast<std::size_t>(p) * radix;
    const int shift = p * DigitBits;
    // A digit that is the same for every record leaves the order unchanged: skip the pass
    // (that digit is the first record's).
    if (c[(key(items[0]) >> shift) & mask] == n) continue;
    std::uint32_t sum = 0;
    for (std::size_t r = 0; r < radix; ++r) sum += std::exchange(c[r], sum);
    const T* from = items.data();
    T* to = spare.data();
    for (std::size_t i = 0; i < n; ++i) to[c[(key(from[i]) >> shift) & mask]++] = from[i];
    items.swap(spare);
  }
}

/// `stable_radix_sort` with its own scratch.
template <int DigitBits = 11, class T, class Key>
void stable_radix_sort(std::vector<T>& items, Key key, int key_bits) {
  std::vector<T> spare;
  stable_radix_sort<DigitBits>(items, spare, key, key_bits);
}

}  // namespace mmbal::detail
