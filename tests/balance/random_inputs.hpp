#pragma once
/// @file
/// Random inputs shared by the balance tests.

#include <mmbal/core/rng.hpp>
#include <mmbal/core/types.hpp>

#include <cstddef>
#include <vector>

namespace mmbal::test {

/// `n` weights drawn uniformly from [0, hi] (zeros included).
inline std::vector<length_t> random_weights(rng_engine& g, std::size_t n, length_t hi) {
  std::vector<length_t> w(n);
  for (auto& x : w) x = static_cast<length_t>(uniform_below(g, hi + 1));
  return w;
}

}  // namespace mmbal::test
