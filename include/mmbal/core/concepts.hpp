#pragma once
/// @file
/// The concepts that policies are checked against (docs/DESIGN.md §4). Transport concepts live in
/// `transport/concepts.hpp`, next to the transports.

#include <mmbal/core/types.hpp>

#include <concepts>
#include <cstdint>
#include <span>
#include <vector>

namespace mmbal {

/// A batch-length function (OrchMLLM eq. (1)–(2)): what one batch of items costs.
/// `C::state` is what a batch accumulates; `c.empty()` is the state of an empty batch,
/// `c.add(s, len)` the state after adding one item of length `len`, `c.value(s)` the cost.
/// Requirements on values (not checkable by the compiler, tested for every cost):
/// `value(empty()) == 0`, and `value` is monotone non-decreasing as items are added.
template <class C>
concept batch_cost = std::copy_constructible<C> && requires(const C& c, const typename C::state& s, length_t len) {
  typename C::state;
  requires std::regular<typename C::state>;
  { c.empty() } -> std::same_as<typename C::state>;
  { c.add(s, len) } -> std::same_as<typename C::state>;
  { c.value(s) } -> std::same_as<double>;
};

/// A cost that is a sum of per-item costs: `value(s) == Σ c.item(l)` over the batch.
/// Algorithms use it for a fast path (a bin's load is one number).
template <class C>
concept additive_cost = batch_cost<C> && requires(const C& c, length_t len) {
  { c.item(len) } -> std::same_as<double>;
};

/// A cost that depends only on the item count and the longest item (padding):
/// `value(s) == c.padded_value(count, max_length)`, non-decreasing in `max_length` at a fixed
/// count (a batch padded to a longer item costs no less; `refine` skips partners by it).
template <class C>
concept padded_cost = batch_cost<C> && requires(const C& c, std::uint64_t count, length_t max_length) {
  { c.padded_value(count, max_length) } -> std::same_as<double>;
};

/// Cost of a whole batch of lengths, folded from `empty()` in the given order. O(size).
template <batch_cost C>
[[nodiscard]] double batch_value(const C& cost, std::span<const length_t> lengths) {
  typename C::state s = cost.empty();
  for (length_t l : lengths) s = cost.add(s, l);
  return cost.value(s);
}

/// A token distributor for context parallelism (docs/DESIGN.md §5.4): given per-block workloads
/// and a rank count, the rank of every block.
template <class D>
concept token_distributor = requires(const D& d, std::span<const std::uint64_t> block_workloads, rank_t ranks) {
  { d(block_workloads, ranks) } -> std::convertible_to<std::vector<rank_t>>;
};

}  // namespace mmbal
