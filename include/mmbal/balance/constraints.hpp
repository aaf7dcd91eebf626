#pragma once
/// @file
/// Constraints a partitioner may be asked to honour (docs/DESIGN.md §5.1), and the `partitioner`
/// concept. A partitioner that cannot honour a requested constraint rejects it with
/// `invalid_input` naming the constraint; none ignores one.

#include <mmbal/core/concepts.hpp>
#include <mmbal/core/types.hpp>

#include <concepts>
#include <cstdint>
#include <optional>
#include <span>

namespace mmbal::balance {

/// Per-bin item-count limit.
struct count_cap {
  enum class mode : std::uint8_t {
    none,   ///< no limit (default)
    equal,  ///< every bin holds ⌊n/d⌋ or ⌈n/d⌉ items
    fixed,  ///< every bin holds at most `cap` items (infeasible when cap · d < n → error)
  };
  mode kind = mode::none;
  std::uint32_t cap = 0;  ///< used with mode::fixed
};

/// Constraints on a partition. Defaults: none.
struct constraints {
  count_cap counts{};                       ///< per-bin item counts
  std::optional<double> capacity{};         ///< hard per-bin cost cap (in cost units)
  std::span<const std::uint64_t> groups{};  ///< group id per item (empty = no groups); equal ids share a bin

  [[nodiscard]] bool any() const noexcept {
    return counts.kind != count_cap::mode::none || capacity.has_value() || !groups.empty();
  }
};

/// A partitioner: `p(weights, bins, cost, constraints)` places every item on one of `bins`
/// bins and fixes the slot order within each bin. Determinism is part of the contract: the
/// same arguments give the same assignment on every rank.
template <class P, class C>
concept partitioner = batch_cost<C> &&
    requires(const P& p, std::span<const length_t> weights, rank_t bins, const C& cost, const constraints& limits) {
  { p(weights, bins, cost, limits) } -> std::same_as<assignment>;
};

}  // namespace mmbal::balance
