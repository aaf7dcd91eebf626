#pragma once
/// @file
/// Rearrangements (docs/DESIGN.md §5.5): for every item of one phase, the location it comes from
/// and the location it goes to. A rearrangement is a bijection between two sets of locations
/// (each a valid slot layout over `ranks` ranks); it carries no payload and no sizes.
/// @see OrchMLLM §5.2.1 (the rearrangement Π executed by one all-to-all), §6 (composition).

#include <mmbal/core/error.hpp>
#include <mmbal/core/types.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace mmbal {

namespace detail {

/// Throws unless `where` is a valid slot layout over `ranks` ranks: every rank < ranks and on
/// each rank the slots are exactly 0..k-1, each used once, and ranks ≤ `max_ranks`. `what`
/// names the side in errors.
/// Returns the number of items per rank. O(n + ranks).
inline std::vector<std::uint32_t> validate_layout(std::span<const location> where, rank_t ranks, const char* what) {
  if (ranks > max_ranks) (void)checked_ranks(ranks, "rearrangement: ranks");  // before O(ranks) memory
  std::vector<std::uint32_t> sizes(ranks, 0);
  for (std::size_t i = 0; i < where.size(); ++i) {
    if (where[i].rank >= ranks)
      throw_invalid("rearrangement: ", what, " of item ", i, " is rank ", where[i].rank, " >= ranks ", ranks);
    ++sizes[where[i].rank];
  }
  std::vector<std::size_t> first(ranks + std::size_t{1}, 0);
  for (rank_t r = 0; r < ranks; ++r) first[r + 1] = first[r] + sizes[r];
  std::vector<bool> seen(where.size(), false);
  for (std::size_t i = 0; i < where.size(); ++i) {
    const location l = where[i];
    if (l.slot >= sizes[l.rank] || seen[first[l.rank] + l.slot])
      throw_invalid("rearrangement: ", what, " of item ", i, " is slot ", l.slot, " on rank ", l.rank,
                    ", which is out of range or taken (the rank holds ", sizes[l.rank], " items)");
    seen[first[l.rank] + l.slot] = true;
  }
  return sizes;
}

/// For a valid layout: the item at every (rank, slot), flattened rank-major; `first[r]` is the
/// index of rank r's slot 0. O(n + ranks).
struct layout_index {
  std::vector<std::size_t> first;  ///< size ranks + 1
  std::vector<item_id> item;       ///< item at first[rank] + slot

  layout_index(std::span<const location> where, rank_t ranks) : first(ranks + std::size_t{1}, 0), item(where.size()) {
    for (const location& l : where) ++first[l.rank + std::size_t{1}];
    for (rank_t r = 0; r < ranks; ++r) first[r + 1] += first[r];
    for (std::size_t i = 0; i < where.size(); ++i) item[first[where[i].rank] + where[i].slot] = static_cast<item_id>(i);
  }
  [[nodiscard]] item_id at(location l) const { return item[first[l.rank] + l.slot]; }
  [[nodiscard]] std::uint32_t count(rank_t r) const { return static_cast<std::uint32_t>(first[r + 1] - first[r]); }
};

}  // namespace detail

/// One phase's rearrangement Π: item i moves from `source[i]` to `destination[i]`.
///
/// Both sides are slot layouts over the same `ranks` ranks (on every rank, slots 0..k-1 each
/// used once; the per-rank counts of the two sides may differ — balancing changes them).
/// Item ids index both vectors; for data-parallel phases they are the ids of the gathered
/// global order (docs/DESIGN.md §3). An item whose source and destination rank agree still takes
/// part in the all-to-all plan as a self send (see `alltoall_plan`).
/// @see OrchMLLM §5.2.1, Figure 5.
struct rearrangement {
  rank_t ranks = 0;                   ///< number of ranks of both sides
  std::vector<location> source;       ///< where item i is before the exchange
  std::vector<location> destination;  ///< where item i is after the exchange

  /// Number of items.
  [[nodiscard]] std::size_t size() const noexcept { return source.size(); }

  /// Throws `invalid_input` unless both sides have one location per item and each side is a
  /// valid slot layout over `ranks` ranks (every item exactly once, slots 0..k-1 per rank).
  /// O(n + ranks).
  void validate() const {
    if (source.size() != destination.size())
      detail::throw_invalid("rearrangement: ", source.size(), " source locations but ", destination.size(),
                            " destination locations");
    checked_count(source.size(), "rearrangement items");
    detail::validate_layout(source, ranks, "source");
    detail::validate_layout(destination, ranks, "destination");
  }

  /// The backward rearrangement: every item goes from its destination back to its source
  /// (same item ids). `inverse().inverse() == *this`. O(n).
  [[nodiscard]] rearrangement inverse() const { return rearrangement{ranks, destination, source}; }

  /// Whether every item stays where it is.
  [[nodiscard]] bool is_identity() const noexcept { return source == destination; }

  /// The rearrangement that moves the items of `from` (their current layout) to the layout
  /// of `to`. Throws when the item counts or rank counts differ or a layout is invalid.
  [[nodiscard]] static rearrangement between(const assignment& from, const assignment& to) {
    if (from.bins != to.bins)
      detail::throw_invalid("rearrangement::between: ", from.bins, " source ranks but ", to.bins, " destination ranks");
    rearrangement r{from.bins, from.where, to.where};
    r.validate();
    return r;
  }

  /// The rearrangement from the items' origin ranks (slots in ascending item id on every rank,
  /// which is the rank-major gathered order of docs/DESIGN.md §3) to `to`. O(n + ranks).
  [[nodiscard]] static rearrangement from_origin(std::span<const rank_t> origin, const assignment& to) {
    if (origin.size() != to.where.size())
      detail::throw_invalid("rearrangement::from_origin: ", origin.size(), " origins but ", to.where.size(),
                            " destinations");
    for (std::size_t i = 0; i < origin.size(); ++i)
      if (origin[i] >= to.bins)
        detail::throw_invalid("rearrangement::from_origin: origin of item ", i, " is rank ", origin[i], " >= ranks ",
                              to.bins);
    const partition p{to.bins, std::vector<rank_t>(origin.begin(), origin.end())};
    return between(assignment::from_partition(p), to);
  }

  friend bool operator==(const rearrangement&, const rearrangement&) = default;
};

/// Composition "first, then second": the items of `first` go from `first.source` straight to
/// where `second` takes whatever sits at their intermediate location. Locations, not ids,
/// connect the two: item i of the result (an id of `first`) ends at `second.destination[j]`
/// where `second.source[j] == first.destination[i]`. In OrchMLLM's notation the result is
/// second ∘ first. Requires the same `ranks` and that `second.source` is exactly the set of
/// locations `first.destination` (same count per rank); both are validated.
/// Guarantees: `compose(p, p.inverse())` is the identity on `p.source`;
/// `compose(a, compose(b, c)) == compose(compose(a, b), c)`. O(n + ranks).
/// @see OrchMLLM §6 (Rearrangement composition).
[[nodiscard]] inline rearrangement compose(const rearrangement& first, const rearrangement& second) {
  first.validate();
  second.validate();
  if (first.ranks != second.ranks)
    detail::throw_invalid("compose: first has ", first.ranks, " ranks, second has ", second.ranks);
  if (first.size() != second.size())
    detail::throw_invalid("compose: first moves ", first.size(), " items, second ", second.size());
  const detail::layout_index at_second(second.source, second.ranks);
  const detail::layout_index at_first(first.destination, first.ranks);
  for (rank_t r = 0; r < first.ranks; ++r)
    if (at_first.count(r) != at_second.count(r))
      detail::throw_invalid("compose: first leaves ", at_first.count(r), " items on rank ", r, " but second takes ",
                            at_second.count(r), " from it");
  rearrangement out{first.ranks, first.source, std::vector<location>(first.size())};
  for (std::size_t i = 0; i < first.size(); ++i)
    out.destination[i] = second.destination[at_second.at(first.destination[i])];
  return out;
}

}  // namespace mmbal
