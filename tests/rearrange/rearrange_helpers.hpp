#pragma once
// Test helpers for tests/rearrange: random layouts and rearrangements (uneven, with empty
// ranks), payload bytes that are a pure function of (item, byte index), and an independent
// reference for what every rank must hold after a rearrangement.

#include <mmbal/core/rng.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/rearrange/rearrangement.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace rearrange_test {

using mmbal::location;
using mmbal::rank_t;

/// n items over d ranks; each rank is empty with probability `idle` (at least one is used);
/// slots in a random order per rank.
inline std::vector<location> random_layout(mmbal::rng_engine& g, std::uint32_t n, rank_t d, double idle) {
  std::vector<rank_t> active;
  for (rank_t r = 0; r < d; ++r)
    if (mmbal::uniform01(g) >= idle) active.push_back(r);
  if (active.empty()) active.push_back(static_cast<rank_t>(mmbal::uniform_below(g, d)));
  std::vector<rank_t> rank_of(n);
  for (auto& r : rank_of) r = active[mmbal::uniform_below(g, active.size())];
  std::vector<std::uint32_t> order(n);
  for (std::uint32_t i = 0; i < n; ++i) order[i] = i;
  mmbal::shuffle(std::span<std::uint32_t>(order), g);
  std::vector<std::uint32_t> next(d, 0);
  std::vector<location> where(n);
  for (std::uint32_t i : order) where[i] = location{rank_of[i], next[rank_of[i]]++};
  return where;
}

inline mmbal::rearrangement random_rearrangement(mmbal::rng_engine& g, std::uint32_t n, rank_t d, double idle = 0.2) {
  return mmbal::rearrangement{d, random_layout(g, n, d, idle), random_layout(g, n, d, idle)};
}

/// ~15 % zero-size items, the rest lognormal around `median`.
inline std::vector<std::uint64_t> random_sizes(mmbal::rng_engine& g, std::uint32_t n, double median = 40.0) {
  std::vector<std::uint64_t> s(n);
  for (auto& x : s)
    x = mmbal::uniform01(g) < 0.15 ? 0 : static_cast<std::uint64_t>(mmbal::lognormal(g, median, 1.0)) + 1;
  return s;
}

/// Byte k of item i's payload.
inline std::byte payload(std::uint64_t item, std::uint64_t k) {
  return static_cast<std::byte>(mmbal::splitmix64(item * 1000003ULL + k) & 0xff);
}

/// Per rank: the items at `where` in slot order, their payloads back to back. Independent of
/// the plan code: it only reads the layout.
inline std::vector<std::vector<std::byte>> buffers_for(std::span<const location> where, rank_t d,
                                                       std::span<const std::uint64_t> sizes) {
  std::vector<std::vector<std::uint64_t>> at(d);
  for (std::size_t i = 0; i < where.size(); ++i) {
    auto& v = at[where[i].rank];
    if (v.size() <= where[i].slot) v.resize(where[i].slot + 1, ~0ULL);
    v[where[i].slot] = i;
  }
  std::vector<std::vector<std::byte>> out(d);
  for (rank_t r = 0; r < d; ++r)
    for (std::uint64_t i : at[r])
      for (std::uint64_t k = 0; k < sizes[i]; ++k) out[r].push_back(payload(i, k));
  return out;
}

}  // namespace rearrange_test
