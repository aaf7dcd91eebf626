#pragma once
// Shared by tests/transport, tests/mpi and bench: random rearrangements with uneven item
// sizes, empty ranks and zero-byte items, and payload bytes that are a pure function of
// (seed, item, byte index), so any rank can verify what it receives without communication.

#include <mmbal/core/rng.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/rearrange/rearrangement.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace mmbal_test {

/// A slot layout of n items over d ranks: each item on a random rank among `active` ranks
/// (others stay empty), slots in a random order per rank.
inline std::vector<mmbal::location> random_layout(mmbal::rng_engine& g, std::uint32_t n, mmbal::rank_t d,
                                                  std::span<const mmbal::rank_t> active) {
  std::vector<mmbal::rank_t> rank_of(n);
  for (auto& r : rank_of) r = active[mmbal::uniform_below(g, active.size())];
  std::vector<std::uint32_t> order(n);
  for (std::uint32_t i = 0; i < n; ++i) order[i] = i;
  mmbal::shuffle(std::span<std::uint32_t>(order), g);
  std::vector<std::uint32_t> next(d, 0);
  std::vector<mmbal::location> where(n);
  for (std::uint32_t i : order) where[i] = mmbal::location{rank_of[i], next[rank_of[i]]++};
  return where;
}

/// Random active subset of ranks (never empty); each rank is idle with probability `idle`.
inline std::vector<mmbal::rank_t> random_active(mmbal::rng_engine& g, mmbal::rank_t d, double idle) {
  std::vector<mmbal::rank_t> a;
  for (mmbal::rank_t r = 0; r < d; ++r)
    if (mmbal::uniform01(g) >= idle) a.push_back(r);
  if (a.empty()) a.push_back(static_cast<mmbal::rank_t>(mmbal::uniform_below(g, d)));
  return a;
}

/// A random rearrangement of n items over d ranks; ranks may be empty on either side.
inline mmbal::rearrangement random_rearrangement(mmbal::rng_engine& g, std::uint32_t n, mmbal::rank_t d,
                                                 double idle = 0.25) {
  const auto src_active = random_active(g, d, idle);
  const auto dst_active = random_active(g, d, idle);
  mmbal::rearrangement r;
  r.ranks = d;
  r.source = random_layout(g, n, d, src_active);
  r.destination = random_layout(g, n, d, dst_active);
  return r;
}

/// Uneven item sizes: ~15 % zero bytes, else lognormal around `median` bytes.
inline std::vector<std::uint64_t> random_sizes(mmbal::rng_engine& g, std::uint32_t n, double median = 40.0) {
  std::vector<std::uint64_t> s(n);
  for (auto& x : s)
    x = mmbal::uniform01(g) < 0.15 ? 0 : static_cast<std::uint64_t>(mmbal::lognormal(g, median, 1.0)) + 1;
  return s;
}

/// The payload byte k of item i: a pure function of (seed, item, k).
inline std::byte payload_byte(std::uint64_t seed, std::uint64_t item, std::uint64_t k) {
  return static_cast<std::byte>(mmbal::splitmix64(seed ^ (item * 0x9E3779B97F4A7C15ULL) ^ (k << 40) ^ k) >> 56);
}

/// The buffer of `rank` for a layout: its items in slot order, each item's bytes generated.
inline std::vector<std::byte> layout_buffer(std::span<const mmbal::location> where,
                                            std::span<const std::uint64_t> sizes, mmbal::rank_t rank,
                                            std::uint64_t seed) {
  std::vector<std::uint32_t> by_slot;
  for (std::uint32_t i = 0; i < where.size(); ++i)
    if (where[i].rank == rank) by_slot.push_back(i);
  std::vector<std::uint32_t> ordered(by_slot.size());
  for (std::uint32_t i : by_slot) ordered[where[i].slot] = i;
  std::vector<std::byte> out;
  for (std::uint32_t i : ordered)
    for (std::uint64_t k = 0; k < sizes[i]; ++k) out.push_back(payload_byte(seed, i, k));
  return out;
}

}  // namespace mmbal_test
