#pragma once
/// @file
/// Groups merged into units ("super-items") (namespace mmbal::balance::detail).

#include <mmbal/core/concepts.hpp>
#include <mmbal/core/types.hpp>

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace mmbal::balance::detail {

/// Items merged by group into units. Unit u holds items `members[offsets[u] .. offsets[u+1])`
/// in ascending id; units are ordered by their smallest member id, so without groups unit u is
/// item u (and `members`/`offsets` stay empty: `trivial`).
struct units {
  bool trivial = true;
  std::uint32_t count = 0;
  std::vector<item_id> members;
  std::vector<std::uint32_t> offsets;

  [[nodiscard]] std::uint32_t size(std::uint32_t u) const noexcept {
    return trivial ? 1u : offsets[u + 1] - offsets[u];
  }
  /// Calls `f(item)` for every member of unit u in ascending id.
  template <class F>
  void for_each(std::uint32_t u, F&& f) const {
    if (trivial) {
      f(static_cast<item_id>(u));
      return;
    }
    for (std::uint32_t k = offsets[u]; k < offsets[u + 1]; ++k) f(members[k]);
  }
};

/// Builds the units of `groups` (empty = every item its own unit). O(n log n) with groups.
[[nodiscard]] inline units make_units(std::size_t n, std::span<const std::uint64_t> groups) {
  units u;
  u.count = static_cast<std::uint32_t>(n);
  if (groups.empty()) return u;
  u.trivial = false;
  std::vector<item_id> by_group(n);
  for (item_id i = 0; i < n; ++i) by_group[i] = i;
  std::sort(by_group.begin(), by_group.end(),
            [&](item_id a, item_id b) { return groups[a] != groups[b] ? groups[a] < groups[b] : a < b; });
  // Runs of equal group ids, then ordered by their first (smallest) member.
  std::vector<std::pair<item_id, std::uint32_t>> runs;  // (first member, start in by_group)
  for (std::uint32_t k = 0; k < n; ++k)
    if (k == 0 || groups[by_group[k]] != groups[by_group[k - 1]]) runs.emplace_back(by_group[k], k);
  std::sort(runs.begin(), runs.end());
  u.count = static_cast<std::uint32_t>(runs.size());
  u.members.reserve(n);
  u.offsets.reserve(runs.size() + 1);
  for (const auto& [first, start] : runs) {
    u.offsets.push_back(static_cast<std::uint32_t>(u.members.size()));
    const std::uint64_t g = groups[by_group[start]];
    for (std::uint32_t k = start; k < n && groups[by_group[k]] == g; ++k) u.members.push_back(by_group[k]);
  }
  u.offsets.push_back(static_cast<std::uint32_t>(u.members.size()));
  return u;
}

/// Σ weights of every unit (u64: a group's total can exceed 2^32).
[[nodiscard]] inline std::vector<std::uint64_t> unit_weights(const units& u, std::span<const length_t> weights) {
  std::vector<std::uint64_t> out(u.count, 0);
  for (std::uint32_t k = 0; k < u.count; ++k) u.for_each(k, [&](item_id i) { out[k] += weights[i]; });
  return out;
}

/// Cost state of a unit alone, folded in ascending member id.
template <batch_cost C>
[[nodiscard]] typename C::state unit_state(const units& u, std::uint32_t k, std::span<const length_t> weights,
                                           const C& cost, typename C::state s) {
  u.for_each(k, [&](item_id i) { s = cost.add(s, weights[i]); });
  return s;
}

/// Cost state of the units `list` folded in their order, skipping unit `skip` (pass
/// `~0u` to skip none): a bin's state with or without one of its units.
template <batch_cost C>
[[nodiscard]] typename C::state fold_units(const units& u, std::span<const std::uint32_t> list, std::uint32_t skip,
                                           std::span<const length_t> weights, const C& cost) {
  typename C::state s = cost.empty();
  for (const std::uint32_t k : list)
    if (k != skip) s = unit_state(u, k, weights, cost, s);
  return s;
}

}  // namespace mmbal::balance::detail
