#pragma once
/// @file
/// Argument and constraint checks every partitioner shares (namespace mmbal::balance::detail).

#include <mmbal/balance/constraints.hpp>
#include <mmbal/balance/detail/units.hpp>
#include <mmbal/core/concepts.hpp>
#include <mmbal/core/error.hpp>
#include <mmbal/core/types.hpp>

#include <cmath>
#include <cstdint>
#include <span>

namespace mmbal::balance::detail {

/// Checks the arguments every partitioner shares; `algorithm` names the caller in errors.
/// Throws `invalid_input` on bins = 0 or above `max_ranks`, more than 2^32 − 1 items, a group
/// list of the wrong size, a negative/NaN/infinite capacity, or a fixed count cap with
/// cap · bins < n.
inline void check_problem(const char* algorithm, std::span<const length_t> weights, rank_t bins,
                          const constraints& limits) {
  if (bins == 0 || bins > max_ranks) (void)checked_ranks(bins, mmbal::detail::concat(algorithm, ": bins"));
  const std::uint32_t n = checked_count(weights.size(), "item count");
  if (!limits.groups.empty() && limits.groups.size() != weights.size())
    mmbal::detail::throw_invalid(algorithm, ": groups has ", limits.groups.size(), " entries but there are ", n,
                                 " items");
  if (limits.capacity && (!std::isfinite(*limits.capacity) || *limits.capacity < 0))
    mmbal::detail::throw_invalid(algorithm, ": capacity = ", *limits.capacity, " must be finite and >= 0");
  if (limits.counts.kind == count_cap::mode::fixed &&
      static_cast<std::uint64_t>(limits.counts.cap) * bins < static_cast<std::uint64_t>(n))
    mmbal::detail::throw_invalid(algorithm, ": count cap ", limits.counts.cap, " x ", bins,
                                 " bins = ", static_cast<std::uint64_t>(limits.counts.cap) * bins, " < ", n,
                                 " items (infeasible)");
  if (limits.counts.kind != count_cap::mode::none && limits.counts.kind != count_cap::mode::equal &&
      limits.counts.kind != count_cap::mode::fixed)
    mmbal::detail::throw_invalid(algorithm, ": unknown count_cap mode ", static_cast<int>(limits.counts.kind));
}

/// Throws `invalid_input` naming `constraint` as unsupported by `algorithm`.
[[noreturn]] inline void reject_constraint(const char* algorithm, const char* constraint, const char* why = "") {
  mmbal::detail::throw_invalid(algorithm, ": constraint '", constraint, "' is not supported", why);
}

/// Throws `invalid_input` naming the first item (or group) whose cost alone exceeds the
/// capacity: no placement can honour the cap then.
template <batch_cost C>
void check_solo_capacity(const char* algorithm, const units& u, std::span<const length_t> weights, const C& cost,
                         const constraints& limits) {
  if (!limits.capacity) return;
  const double cap = *limits.capacity;
  for (std::uint32_t k = 0; k < u.count; ++k) {
    const double solo = cost.value(unit_state(u, k, weights, cost, cost.empty()));
    if (solo > cap) {
      if (u.trivial)
        mmbal::detail::throw_invalid(algorithm, ": item ", k, " (weight ", weights[k], ") costs ", solo,
                                     " alone, above the capacity ", cap);
      mmbal::detail::throw_invalid(algorithm, ": group of item ", u.members[u.offsets[k]], " (", u.size(k),
                                   " items) costs ", solo, " alone, above the capacity ", cap);
    }
  }
}

}  // namespace mmbal::balance::detail
