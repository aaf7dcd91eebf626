#pragma once
/// @file
/// The state every built-in cost accumulates: count, Σl, Σl² and max l of a batch.

#include <mmbal/core/types.hpp>

#include <algorithm>
#include <cstdint>

namespace mmbal {

/// Running statistics of a batch. Σl² is a double: it exceeds 2^64 for long batches of
/// long items, and a fixed fold order keeps it bit-identical on every rank.
struct batch_stats {
  std::uint64_t count = 0;
  std::uint64_t sum = 0;
  double sum_sq = 0;
  length_t max = 0;

  [[nodiscard]] constexpr batch_stats plus(length_t l) const noexcept {
    const double dl = l;
    return {count + 1, sum + l, sum_sq + dl * dl, std::max(max, l)};
  }
  friend constexpr bool operator==(const batch_stats&, const batch_stats&) = default;
};

}  // namespace mmbal
