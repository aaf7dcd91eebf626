#pragma once
/// @file
/// The one model of a per-bin item-count limit (`count_cap`) inside balance/: the static
/// bounds [lo, hi] a finished bin must meet (refine, migrate, checks) and the incremental
/// limiter the greedy placements consult while bins fill (namespace mmbal::balance::detail).

#include <mmbal/balance/constraints.hpp>
#include <mmbal/core/types.hpp>

#include <cstdint>
#include <limits>

namespace mmbal::balance::detail {

/// Count bounds of a bin under a `count_cap` for n items in `bins` bins: [lo, hi].
/// none: [0, ∞); fixed: [0, cap]; equal: [⌊n/d⌋, ⌈n/d⌉].
struct count_bounds {
  std::uint64_t lo = 0;
  std::uint64_t hi = std::numeric_limits<std::uint64_t>::max();
  [[nodiscard]] bool admits(std::uint64_t count) const noexcept { return count >= lo && count <= hi; }
};

/// The bounds of `c` for n items in `bins` (≥ 1) bins.
[[nodiscard]] inline count_bounds make_count_bounds(const count_cap& c, std::uint64_t n, rank_t bins) {
  count_bounds b;
  if (c.kind == count_cap::mode::fixed) b.hi = c.cap;
  if (c.kind == count_cap::mode::equal) {
    b.lo = n / bins;
    b.hi = b.lo + (n % bins != 0 ? 1 : 0);
  }
  return b;
}

/// `count_bounds` as the greedy placement loops use them while bins fill: a bin may always
/// grow to `soft` items (hi, or ⌊n/d⌋ under `equal`) and past it, up to hi, only while fewer
/// than n mod d bins have done so — so with `equal` every bin ends with ⌊n/d⌋ or ⌈n/d⌉ items.
class count_limiter {
 public:
  count_limiter(const count_cap& c, std::uint32_t n, rank_t bins)
      : active_(c.kind != count_cap::mode::none),
        bounds_(make_count_bounds(c, n, bins)),
        soft_(c.kind == count_cap::mode::equal ? bounds_.lo : bounds_.hi),
        above_soft_left_(c.kind == count_cap::mode::equal ? n % bins : 0) {}
  [[nodiscard]] bool active() const noexcept { return active_; }
  /// Whether a bin holding `count` items can take `k` more.
  [[nodiscard]] bool admits(std::uint32_t count, std::uint32_t k) const noexcept {
    const std::uint64_t after = std::uint64_t{count} + k;
    return after <= soft_ || (after <= bounds_.hi && above_soft_left_ > 0);
  }
  /// Records that a bin holding `count` items took `k` more (after `admits` said yes).
  void take(std::uint32_t count, std::uint32_t k) noexcept {
    if (std::uint64_t{count} + k > soft_) --above_soft_left_;
  }

 private:
  bool active_;
  count_bounds bounds_;
  std::uint64_t soft_;
  std::uint32_t above_soft_left_;
};

}  // namespace mmbal::balance::detail
