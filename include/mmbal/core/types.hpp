#pragma once
/// @file
/// Vocabulary types: lengths, ids, ranks, locations, partitions and assignments
/// (docs/DESIGN.md §3).

#include <mmbal/core/error.hpp>

#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <vector>

namespace mmbal {

/// A length in tokens (LLM tokens, encoder patches or frames). Sums use `std::uint64_t`.
using length_t = std::uint32_t;
/// An item's id: its position in the gathered global order (rank-major).
using item_id = std::uint32_t;
/// A rank (bin) index.
using rank_t = std::uint32_t;

/// Where an item sits: on `rank`, at position `slot` of that rank's mini-batch.
struct location {
  rank_t rank = 0;
  std::uint32_t slot = 0;
  // Written out: nvcc's front end warns that the implicitly defaulted == is never defined.
  friend constexpr bool operator==(const location& a, const location& b) noexcept {
    return a.rank == b.rank && a.slot == b.slot;
  }
  friend constexpr auto operator<=>(const location&, const location&) = default;
};

/// The most ranks (bins) a plan may have: 2^24 = 16,777,216, far above any data-parallel
/// world. Every planner keeps O(ranks) state (loads, heaps, split sizes: tens of bytes a rank),
/// so a mistyped count such as 2^31 would exhaust memory before any other check could name it.
inline constexpr rank_t max_ranks = rank_t{1} << 24;

/// Checks 1 ≤ `ranks` ≤ `max_ranks`; `what` names the count in the error (`invalid_input`).
inline rank_t checked_ranks(std::uint64_t ranks, std::string_view what) {
  if (ranks == 0) detail::throw_invalid(what, " = 0 (need at least one rank)");
  if (ranks > max_ranks)
    detail::throw_invalid(what, " = ", ranks, " exceeds ", max_ranks, ", the most ranks a plan may have");
  return static_cast<rank_t>(ranks);
}

/// Checks that a count fits the 32-bit id space; `what` names the count in the error.
inline std::uint32_t checked_count(std::size_t n, const char* what) {
  if (n > std::numeric_limits<std::uint32_t>::max()) detail::throw_invalid(what, " = ", n, " exceeds 2^32 - 1");
  return static_cast<std::uint32_t>(n);
}

/// A partition: the bin of every item. `bin_of.size()` is the item count.
struct partition {
  std::uint32_t bins = 0;
  std::vector<rank_t> bin_of;

  /// Number of items per bin. O(n + bins). Throws `invalid_input` naming the item when an
  /// item's bin is ≥ `bins`, or naming `bins` when it is above `max_ranks`.
  [[nodiscard]] std::vector<std::uint32_t> bin_sizes() const {
    if (bins > max_ranks) (void)checked_ranks(bins, "partition: bins");  // before O(bins) memory
    std::vector<std::uint32_t> sizes(bins, 0);
    for (item_id i = 0; i < bin_of.size(); ++i) {
      if (bin_of[i] >= bins) detail::throw_invalid("partition: item ", i, " is in bin ", bin_of[i], " >= bins ", bins);
      ++sizes[bin_of[i]];
    }
    return sizes;
  }

  /// Throws `invalid_input` unless every item's bin is < `bins` and the item count fits 32
  /// bits. O(n).
  void validate() const {
    checked_count(bin_of.size(), "partition: item count");
    for (item_id i = 0; i < bin_of.size(); ++i)
      if (bin_of[i] >= bins) detail::throw_invalid("partition: item ", i, " is in bin ", bin_of[i], " >= bins ", bins);
  }
};

/// An assignment: a partition that also fixes the slot order inside each bin.
/// `where[i]` is the location of item i; in every bin the slots are exactly 0..size-1.
struct assignment {
  std::uint32_t bins = 0;
  std::vector<location> where;

  [[nodiscard]] std::size_t size() const noexcept { return where.size(); }

  /// The underlying partition (drops slot order). O(n).
  [[nodiscard]] partition to_partition() const {
    partition p{bins, {}};
    p.bin_of.reserve(where.size());
    for (const location& l : where) p.bin_of.push_back(l.rank);
    return p;
  }

  /// Items of every bin in slot order. O(n + bins). Validates first (see `validate`): a rank
  /// ≥ bins, a slot out of range or taken twice throws `invalid_input` instead of leaving a
  /// hole or overwriting an entry.
  [[nodiscard]] std::vector<std::vector<item_id>> items_by_bin() const {
    validate();
    std::vector<std::vector<item_id>> out(bins);
    for (const location& l : where) out[l.rank].emplace_back();  // sizes first (slots are 0..k-1)
    for (item_id i = 0; i < where.size(); ++i) out[where[i].rank][where[i].slot] = i;
    return out;
  }

  /// Builds an assignment from a partition and the order in which items were placed:
  /// within each bin, slots follow `placement_order`. O(n + bins).
  /// Throws `invalid_input` when `placement_order` does not hold every item id of `p` exactly
  /// once (wrong size, an id ≥ n, a duplicate — the message names it and a missing id) or an
  /// item's bin is ≥ `p.bins`.
  [[nodiscard]] static assignment from_placement(const partition& p, std::span<const item_id> placement_order) {
    const std::size_t n = p.bin_of.size();
    checked_count(n, "assignment: item count");
    if (placement_order.size() != n)
      detail::throw_invalid("assignment: placement order has ", placement_order.size(), " items, partition has ", n);
    assignment a{p.bins, std::vector<location>(n)};
    std::vector<std::uint32_t> next(p.bins, 0);
    std::vector<bool> placed(n, false);
    for (std::size_t k = 0; k < n; ++k) {
      const item_id i = placement_order[k];
      if (i >= n)
        detail::throw_invalid("assignment: placement order entry ", k, " names item ", i, " but there are only ", n,
                              " items");
      if (placed[i]) {
        // n entries with one repeated: some id in [0, n) appears nowhere in the whole order.
        std::vector<bool> named(n, false);
        for (item_id j : placement_order)
          if (j < n) named[j] = true;
        item_id missing = 0;
        while (missing < n && named[missing]) ++missing;
        detail::throw_invalid("assignment: placement order names item ", i, " twice (entry ", k, "); item ", missing,
                              " is missing");
      }
      placed[i] = true;
      const rank_t b = p.bin_of[i];
      if (b >= p.bins) detail::throw_invalid("assignment: item ", i, " is in bin ", b, " >= bins ", p.bins);
      a.where[i] = location{b, next[b]++};
    }
    return a;
  }

  /// Builds an assignment whose slot order within each bin is ascending item id. O(n + bins).
  [[nodiscard]] static assignment from_partition(const partition& p) {
    std::vector<item_id> order(p.bin_of.size());
    for (item_id i = 0; i < order.size(); ++i) order[i] = i;
    return from_placement(p, order);
  }

  /// Throws `invalid_input` unless every rank is < bins and each bin's slots are 0..k-1
  /// with no duplicate (every item placed exactly once), or when bins > `max_ranks`. O(n + bins).
  void validate() const {
    if (bins > max_ranks) (void)checked_ranks(bins, "assignment: bins");  // before O(bins) memory
    std::vector<std::uint32_t> sizes(bins, 0);
    for (item_id i = 0; i < where.size(); ++i) {
      if (where[i].rank >= bins)
        detail::throw_invalid("assignment: item ", i, " on rank ", where[i].rank, " >= bins ", bins);
      ++sizes[where[i].rank];
    }
    std::vector<std::vector<bool>> seen(bins);
    for (rank_t b = 0; b < bins; ++b) seen[b].assign(sizes[b], false);
    for (item_id i = 0; i < where.size(); ++i) {
      const location l = where[i];
      if (l.slot >= sizes[l.rank] || seen[l.rank][l.slot])
        detail::throw_invalid("assignment: item ", i, " has slot ", l.slot, " on rank ", l.rank,
                              " which is out of range or taken (rank holds ", sizes[l.rank], " items)");
      seen[l.rank][l.slot] = true;
    }
  }

  friend bool operator==(const assignment&, const assignment&) = default;
};

}  // namespace mmbal
