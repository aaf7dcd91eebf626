#pragma once
/// @file
/// Deterministic random numbers. The standard distributions (`std::uniform_real_distribution`,
/// `std::normal_distribution`, `std::shuffle`) are implementation-defined, so two standard
/// libraries may draw different values from the same engine; every draw here is written out,
/// so a seed gives the same stream on every rank, compiler and platform. The engine is
/// `std::mt19937_64`, whose output sequence the standard fixes. Never `std::random_device`.

#include <mmbal/core/error.hpp>

#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>
#include <span>
#include <utility>

namespace mmbal {

/// The engine used throughout mmbal (its sequence is fixed by the C++ standard).
using rng_engine = std::mt19937_64;

/// SplitMix64 finalizer: a counter-based mixer, used to derive independent seeds from
/// (seed, rank, index) without any shared state.
[[nodiscard]] constexpr std::uint64_t splitmix64(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// An engine seeded from a seed and up to two stream numbers (e.g. rank and step).
[[nodiscard]] inline rng_engine make_rng(std::uint64_t seed, std::uint64_t stream = 0, std::uint64_t substream = 0) {
  return rng_engine{splitmix64(splitmix64(splitmix64(seed) ^ stream) ^ substream)};
}

/// Uniform double in [0, 1) with 53 random bits.
[[nodiscard]] inline double uniform01(rng_engine& g) { return static_cast<double>(g() >> 11) * 0x1.0p-53; }

/// Uniform double in [lo, hi).
[[nodiscard]] inline double uniform_real(rng_engine& g, double lo, double hi) { return lo + (hi - lo) * uniform01(g); }

/// Uniform integer in [0, n) without modulo bias (Lemire's multiply-and-reject). n > 0.
[[nodiscard]] inline std::uint64_t uniform_below(rng_engine& g, std::uint64_t n) {
  if (n == 0) detail::throw_invalid("uniform_below: n = 0");
  // 128-bit multiply through two 64-bit halves keeps this portable and -Wpedantic clean.
  for (;;) {
    const std::uint64_t x = g();
    const std::uint64_t lo = (x & 0xffffffffULL) * (n & 0xffffffffULL);
    const std::uint64_t mid1 = (x >> 32) * (n & 0xffffffffULL);
    const std::uint64_t mid2 = (x & 0xffffffffULL) * (n >> 32);
    const std::uint64_t hi = (x >> 32) * (n >> 32);
    const std::uint64_t carry = ((lo >> 32) + (mid1 & 0xffffffffULL) + (mid2 & 0xffffffffULL)) >> 32;
    const std::uint64_t low = x * n;
    const std::uint64_t high = hi + (mid1 >> 32) + (mid2 >> 32) + carry;
    // Reject only in the rare biased zone; the modulo is computed only when low < n.
    if (low < n && low < (0 - n) % n) continue;
    return high;
  }
}

/// Uniform integer in [lo, hi] (inclusive). lo <= hi.
[[nodiscard]] inline std::int64_t uniform_int(rng_engine& g, std::int64_t lo, std::int64_t hi) {
  if (hi < lo) detail::throw_invalid("uniform_int: empty range [", lo, ", ", hi, "]");
  const auto span = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo) + 1;
  if (span == 0) return static_cast<std::int64_t>(g());  // the whole 64-bit range
  return lo + static_cast<std::int64_t>(uniform_below(g, span));
}

/// Standard normal by the Box–Muller transform (one value per call, deterministic).
[[nodiscard]] inline double standard_normal(rng_engine& g) {
  const double u1 = 1.0 - uniform01(g);  // (0, 1]
  const double u2 = uniform01(g);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

/// Lognormal with the given median (exp of the log-mean) and log standard deviation.
[[nodiscard]] inline double lognormal(rng_engine& g, double median, double sigma) {
  return median * std::exp(sigma * standard_normal(g));
}

/// Index drawn with probability proportional to `weights[i]` (non-negative, not all zero).
/// O(size) per draw; for many draws from one table, build the cumulative sums once and use
/// `choose_cumulative`.
[[nodiscard]] inline std::size_t choose_weighted(rng_engine& g, std::span<const double> weights) {
  double total = 0;
  for (double w : weights) total += w;
  if (!(total > 0)) detail::throw_invalid("choose_weighted: weights sum to ", total);
  const double x = uniform01(g) * total;
  double acc = 0;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    acc += weights[i];
    if (x < acc) return i;
  }
  return weights.size() - 1;
}

/// Index i with cumulative[i-1] <= u·total < cumulative[i], for ascending cumulative sums.
/// O(log size) per draw.
[[nodiscard]] inline std::size_t choose_cumulative(rng_engine& g, std::span<const double> cumulative) {
  if (cumulative.empty() || !(cumulative.back() > 0)) detail::throw_invalid("choose_cumulative: empty table");
  const double x = uniform01(g) * cumulative.back();
  std::size_t lo = 0, hi = cumulative.size() - 1;
  while (lo < hi) {
    const std::size_t mid = (lo + hi) / 2;
    if (x < cumulative[mid])
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

/// Fisher–Yates shuffle with `uniform_below` (portable, unlike `std::shuffle`).
template <class T>
void shuffle(std::span<T> values, rng_engine& g) {
  for (std::size_t i = values.size(); i > 1; --i) {
    const auto j = static_cast<std::size_t>(uniform_below(g, i));
    using std::swap;
    swap(values[i - 1], values[j]);
  }
}

}  // namespace mmbal
