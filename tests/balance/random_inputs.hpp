#pragma once
/// @file
/// Random inputs shared by the balance tests.

#include <mmbal/balance/constraints.hpp>
#include <mmbal/core/rng.hpp>
#include <mmbal/core/types.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mmbal::test {

/// `n` weights drawn uniformly from [0, hi] (zeros included).
inline std::vector<length_t> random_weights(rng_engine& g, std::size_t n, length_t hi) {
  std::vector<length_t> w(n);
  for (auto& x : w) x = static_cast<length_t>(uniform_below(g, hi + 1));
  return w;
}

/// One kind of constraint, chosen by `kind % 6`: 0 none, 1 equal counts, 2 a fixed count cap
/// of ceil(n / bins) plus 0-2, 3 random groups (drawn into `groups`, which the result views),
/// 4 the capacity `capacity()` (called only here, so a caller computes it only when needed),
/// 5 random groups with a count cap of n and a capacity of 1e12 (all three checked, none binds).
template <class Capacity>
balance::constraints random_limits(rng_engine& g, std::size_t kind, std::size_t n, rank_t bins,
                                   std::vector<std::uint64_t>& groups, Capacity capacity) {
  balance::constraints limits;
  const auto draw_groups = [&] {
    groups.resize(n);
    for (auto& x : groups) x = uniform_below(g, std::max<std::size_t>(1, n / 2));
    limits.groups = groups;
  };
  switch (kind % 6) {
    case 1:
      limits.counts.kind = balance::count_cap::mode::equal;
      break;
    case 2:
      limits.counts.kind = balance::count_cap::mode::fixed;
      limits.counts.cap = static_cast<std::uint32_t>((n + bins - 1) / bins + uniform_below(g, 3));
      break;
    case 3:
      draw_groups();
      break;
    case 4:
      limits.capacity = capacity();
      break;
    case 5:
      draw_groups();
      limits.counts.kind = balance::count_cap::mode::fixed;
      limits.counts.cap = static_cast<std::uint32_t>(n);
      limits.capacity = 1e12;
      break;
    default:
      break;
  }
  return limits;
}

}  // namespace mmbal::test
