#pragma once
/// @file
/// One rank's share of a rearrangement's all-to-all (docs/DESIGN.md §5.5): send and receive counts
/// and displacements per peer from per-item sizes, the order in which local items are packed,
/// and where every received item lands; plus the plan fingerprint that transports compare
/// across ranks before exchanging anything.
/// @see OrchMLLM §5.2.1 (All-to-All Batch Communicator).

#include <mmbal/core/error.hpp>
#include <mmbal/core/rng.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/rearrange/rearrangement.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace mmbal {

/// What ONE rank sends and receives in the all-to-all that executes a rearrangement.
///
/// Units: every count, displacement, offset and size is in the unit of the `item_bytes`
/// given to `make_alltoall_plan` — bytes for `pack`/`unpack` over `std::byte`, or elements of
/// any trivially copyable type T for the typed overloads (then pass sizes in elements).
///
/// Buffers (all contiguous, no gaps):
/// - input: this rank's items before the exchange, in SOURCE slot order (slot 0 first);
/// - send buffer: the items to peer 0, then to peer 1, ...; to one peer in ascending
///   DESTINATION slot; `send_displs[p]` is where peer p's part starts;
/// - receive buffer: the items from peer 0, then from peer 1, ...; from one peer in ascending
///   destination slot (the order that peer packs them); `recv_displs[p]` is where it starts;
/// - output: this rank's items after the exchange, in DESTINATION slot order.
///
/// Items whose source and destination rank are both this rank are a self send: they go
/// through the send and receive buffers like every other item (peer = own rank), so one
/// uniform executor handles every case; a transport may copy that part directly.
///
/// Invariants (checked by the tests): counts sum to `send_bytes`/`recv_bytes`; displs are the
/// exclusive prefix sums of counts; `input_bytes == send_bytes`, `recv_bytes == output_bytes`;
/// summed over ranks, `send_counts[q]` of rank p equals `recv_counts[p]` of rank q.
struct alltoall_plan {
  rank_t rank = 0;   ///< the rank this plan is for
  rank_t ranks = 0;  ///< number of ranks (size of the per-peer vectors)

  std::vector<std::uint64_t> send_counts;  ///< size ranks: units sent to each peer
  std::vector<std::uint64_t> send_displs;  ///< size ranks: start of each peer's part in the send buffer
  std::vector<std::uint64_t> recv_counts;  ///< size ranks: units received from each peer
  std::vector<std::uint64_t> recv_displs;  ///< size ranks: start of each peer's part in the receive buffer

  std::vector<std::uint32_t> pack_slots;    ///< local SOURCE slot of each item in send-buffer order
  std::vector<std::uint64_t> pack_offsets;  ///< offset of that item in the input buffer
  std::vector<std::uint64_t> pack_sizes;    ///< its size (the send buffer is these sizes back to back)

  std::vector<std::uint32_t> unpack_slots;    ///< DESTINATION slot of each item in receive-buffer order
  std::vector<std::uint64_t> unpack_offsets;  ///< offset of that item in the output buffer
  std::vector<std::uint64_t> unpack_sizes;    ///< its size (the receive buffer is these back to back)

  std::uint64_t input_bytes = 0;   ///< size of the input buffer (Σ sizes of local source items)
  std::uint64_t send_bytes = 0;    ///< size of the send buffer (== input_bytes)
  std::uint64_t recv_bytes = 0;    ///< size of the receive buffer
  std::uint64_t output_bytes = 0;  ///< size of the output buffer (== recv_bytes)

  /// Units this rank sends to other ranks (excludes the self send).
  [[nodiscard]] std::uint64_t remote_send_bytes() const noexcept { return send_bytes - send_counts[rank]; }
  /// Units this rank receives from other ranks (excludes the self send).
  [[nodiscard]] std::uint64_t remote_recv_bytes() const noexcept { return recv_bytes - recv_counts[rank]; }

  friend bool operator==(const alltoall_plan&, const alltoall_plan&) = default;
};

/// Builds `rank`'s all-to-all plan for rearrangement `r` with `item_bytes[i]` units for item i
/// (bytes or elements; zero-size items are allowed and still listed).
///
/// Validates `r` and throws `invalid_input` when `item_bytes.size() != r.size()` or
/// `rank >= r.ranks`. Deterministic: every rank derives consistent send/receive orders from
/// the same `r` without communication. O(n + ranks + k log k) for k local items; each real rank
/// builds only its own plan (no O(n · ranks) work anywhere).
/// @see OrchMLLM §5.2.1.
[[nodiscard]] inline alltoall_plan make_alltoall_plan(const rearrangement& r, std::span<const std::uint64_t> item_bytes,
                                                      rank_t rank) {
  r.validate();
  if (item_bytes.size() != r.size())
    detail::throw_invalid("make_alltoall_plan: ", item_bytes.size(), " item_bytes for ", r.size(), " items");
  if (rank >= r.ranks) detail::throw_invalid("make_alltoall_plan: rank ", rank, " >= ranks ", r.ranks);

  alltoall_plan p;
  p.rank = rank;
  p.ranks = r.ranks;
  p.send_counts.assign(r.ranks, 0);
  p.send_displs.assign(r.ranks, 0);
  p.recv_counts.assign(r.ranks, 0);
  p.recv_displs.assign(r.ranks, 0);

  // Local items by source slot (input layout) and by destination slot (output layout).
  std::vector<item_id> by_source, by_dest;
  for (std::size_t i = 0; i < r.size(); ++i) {
    if (r.source[i].rank == rank) by_source.push_back(static_cast<item_id>(i));
    if (r.destination[i].rank == rank) by_dest.push_back(static_cast<item_id>(i));
  }
  std::vector<item_id> input_order(by_source.size()), output_order(by_dest.size());
  for (item_id i : by_source) input_order[r.source[i].slot] = i;
  for (item_id i : by_dest) output_order[r.destination[i].slot] = i;

  // Offsets in the input and output buffers, indexed by slot.
  std::vector<std::uint64_t> input_offset(input_order.size()), output_offset(output_order.size());
  for (std::size_t s = 0; s < input_order.size(); ++s) {
    input_offset[s] = p.input_bytes;
    p.input_bytes = detail::checked_add(p.input_bytes, item_bytes[input_order[s]], "alltoall_plan: total size");
  }
  for (std::size_t s = 0; s < output_order.size(); ++s) {
    output_offset[s] = p.output_bytes;
    p.output_bytes = detail::checked_add(p.output_bytes, item_bytes[output_order[s]], "alltoall_plan: total size");
  }

  // Send order: by destination location (rank, slot), unique per item.
  std::sort(by_source.begin(), by_source.end(),
            [&](item_id a, item_id b) { return r.destination[a] < r.destination[b]; });
  p.pack_slots.reserve(by_source.size());
  p.pack_offsets.reserve(by_source.size());
  p.pack_sizes.reserve(by_source.size());
  for (item_id i : by_source) {
    p.pack_slots.push_back(r.source[i].slot);
    p.pack_offsets.push_back(input_offset[r.source[i].slot]);
    p.pack_sizes.push_back(item_bytes[i]);
    p.send_counts[r.destination[i].rank] += item_bytes[i];
  }
  // Receive order: by source rank, then by destination slot (the order each sender packs).
  std::sort(by_dest.begin(), by_dest.end(), [&](item_id a, item_id b) {
    if (r.source[a].rank != r.source[b].rank) return r.source[a].rank < r.source[b].rank;
    return r.destination[a].slot < r.destination[b].slot;
  });
  p.unpack_slots.reserve(by_dest.size());
  p.unpack_offsets.reserve(by_dest.size());
  p.unpack_sizes.reserve(by_dest.size());
  for (item_id i : by_dest) {
    p.unpack_slots.push_back(r.destination[i].slot);
    p.unpack_offsets.push_back(output_offset[r.destination[i].slot]);
    p.unpack_sizes.push_back(item_bytes[i]);
    p.recv_counts[r.source[i].rank] += item_bytes[i];
  }
  for (rank_t q = 0; q < r.ranks; ++q) {
    p.send_displs[q] = p.send_bytes;
    p.send_bytes += p.send_counts[q];
    p.recv_displs[q] = p.recv_bytes;
    p.recv_bytes += p.recv_counts[q];
  }
  return p;
}

/// Builds the plan of every rank (for in-process simulation and tests). O(ranks · n).
[[nodiscard]] inline std::vector<alltoall_plan> make_alltoall_plans(const rearrangement& r,
                                                                    std::span<const std::uint64_t> item_bytes) {
  std::vector<alltoall_plan> plans;
  plans.reserve(r.ranks);
  for (rank_t q = 0; q < r.ranks; ++q) plans.push_back(make_alltoall_plan(r, item_bytes, q));
  return plans;
}

namespace detail {

/// Order-dependent 64-bit hash state: each step h ← splitmix64(h ⊕ w) is a bijection of h for
/// a fixed w, so changing any ONE word of a fixed-length sequence always changes the result
/// (not just with high probability); unrelated sequences collide with probability ~2^-64.
struct fingerprint_state {
  std::uint64_t h = 0x6d6d62616c2d7032ULL;  // "mmbal-p2": versions the hashed layout
  void add(std::uint64_t w) noexcept { h = splitmix64(h ^ w); }
};

/// The odd factors that combine an item's source and destination words (`fingerprint`):
/// splitmix64's golden-ratio increment and its second multiplier.
inline constexpr std::uint64_t fingerprint_source_factor = 0x9e3779b97f4a7c15ULL;
inline constexpr std::uint64_t fingerprint_destination_factor = 0x94d049bb133111ebULL;

[[nodiscard]] constexpr std::uint64_t pack_location(location l) noexcept {
  return (std::uint64_t{l.rank} << 32) | l.slot;
}

/// `fingerprint` of `r` with sizes `item_bytes`, fed one item at a time in item order: a pass
/// that reads the items for something else (the orchestrator's traffic passes) can call it as
/// its per-item hook and fingerprint them in the same pass instead of reading them again. The
/// caller checks the sizes; `r` and `item_bytes` must outlive it.
class fingerprint_lanes {
 public:
  fingerprint_lanes(const rearrangement& r, std::span<const std::uint64_t> item_bytes) noexcept
      : r_(&r), item_bytes_(item_bytes) {
    for (std::size_t k = 0; k < lane_.size(); ++k) lane_[k].add(k);
  }
  /// Adds item i (items must come in order 0, 1, …).
  void operator()(std::size_t i) noexcept {
    lane_[i % lane_.size()].add(pack_location(r_->source[i]) * fingerprint_source_factor +
                                pack_location(r_->destination[i]) * fingerprint_destination_factor + item_bytes_[i]);
  }
  /// The fingerprint, once every item was added.
  [[nodiscard]] std::uint64_t value() const noexcept {
    fingerprint_state s;
    s.add(r_->ranks);
    s.add(r_->size());
    for (const fingerprint_state& l : lane_) s.add(l.h);
    return s.h;
  }

 private:
  const rearrangement* r_;
  std::span<const std::uint64_t> item_bytes_;
  std::array<fingerprint_state, 4> lane_;
};

}  // namespace detail

/// A 64-bit fingerprint of a rearrangement together with its item sizes: item i's source
/// location, destination location and size are combined into one word, src · K₁ + dst · K₂ +
/// size (mod 2⁶⁴, K₁ and K₂ odd), hashed into lane i mod 4 (four independent
/// `detail::fingerprint_state`s, started from their lane index, so the hash chains overlap in
/// the CPU); `ranks`, the item count and the four lanes are then folded in order. Identical on
/// every rank, compiler and platform for identical inputs (no unordered containers, no
/// pointers, fixed-width arithmetic); changing any single location or size always changes it
/// (multiplying by an odd constant and adding are bijections, and so is every step of a lane
/// and of the fold). One mix per item instead of one per word: 2.1 → 1.0 ms for the 584,001
/// items of the image-heavy 2,560-rank plan (bench/RESULTS.md "Session 33"). Transports
/// all-reduce it (min and max) before the exchange and throw on every rank when ranks
/// disagree. Does not validate `r`. Throws when the sizes do not match the items. O(n).
[[nodiscard]] inline std::uint64_t fingerprint(const rearrangement& r, std::span<const std::uint64_t> item_bytes) {
  if (item_bytes.size() != r.size() || r.destination.size() != r.source.size())
    detail::throw_invalid("fingerprint: ", r.source.size(), " sources, ", r.destination.size(), " destinations, ",
                          item_bytes.size(), " item_bytes");
  detail::fingerprint_lanes lanes(r, item_bytes);
  for (std::size_t i = 0; i < r.size(); ++i) lanes(i);
  return lanes.value();
}

/// Folds several fingerprints (e.g. every phase of one training step) into one, order-dependent.
[[nodiscard]] inline std::uint64_t combine_fingerprints(std::span<const std::uint64_t> parts) {
  detail::fingerprint_state s;
  s.add(parts.size());
  for (std::uint64_t f : parts) s.add(f);
  return s.h;
}

/// Throws `invalid_input` unless `plan` is internally consistent: per-peer vectors of size
/// `ranks`, `rank < ranks`, displacements the exclusive prefix sums of the counts, totals
/// matching, item lists of equal length whose sizes add up to the send/receive totals, and
/// every item inside its buffer. Transports and `exchange_in_process` call it before touching
/// memory, so a corrupt plan is an error and never an out-of-bounds copy. O(ranks + items).
inline void validate_peer_layout(const alltoall_plan& plan) {
  const std::size_t d = plan.ranks;
  if (plan.rank >= d) mmbal::detail::throw_invalid("alltoall_plan: rank ", plan.rank, " >= ranks ", d);
  if (plan.send_counts.size() != d || plan.send_displs.size() != d || plan.recv_counts.size() != d ||
      plan.recv_displs.size() != d)
    mmbal::detail::throw_invalid("alltoall_plan: per-peer vectors must have ", d, " entries (send_counts has ",
                                 plan.send_counts.size(), ", recv_counts ", plan.recv_counts.size(), ")");
  const auto check_side = [d](std::span<const std::uint64_t> counts, std::span<const std::uint64_t> displs,
                              std::uint64_t total, const char* side) {
    std::uint64_t at = 0;
    for (std::size_t p = 0; p < d; ++p) {
      if (displs[p] != at)
        mmbal::detail::throw_invalid("alltoall_plan: ", side, " displacement of peer ", p, " is ", displs[p],
                                     ", expected ", at);
      if (counts[p] > std::numeric_limits<std::uint64_t>::max() - at)
        mmbal::detail::throw_invalid("alltoall_plan: ", side, " counts overflow 64 bits");
      at += counts[p];
    }
    if (at != total)
      mmbal::detail::throw_invalid("alltoall_plan: ", side, " counts sum to ", at, " but the total is ", total);
  };
  check_side(plan.send_counts, plan.send_displs, plan.send_bytes, "send");
  check_side(plan.recv_counts, plan.recv_displs, plan.recv_bytes, "receive");
  const auto check_items = [](std::span<const std::uint64_t> offsets, std::span<const std::uint64_t> sizes,
                              std::size_t slots, std::uint64_t packed_total, std::uint64_t buffer, const char* side) {
    if (offsets.size() != sizes.size() || slots != sizes.size())
      mmbal::detail::throw_invalid("alltoall_plan: ", side, " item lists differ in length (", offsets.size(), ", ",
                                   sizes.size(), ", ", slots, ")");
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      if (offsets[i] > buffer || sizes[i] > buffer - offsets[i])
        mmbal::detail::throw_invalid("alltoall_plan: ", side, " item ", i, " at offset ", offsets[i], " with size ",
                                     sizes[i], " leaves its buffer of ", buffer);
      sum += sizes[i];
    }
    if (sum != packed_total)
      mmbal::detail::throw_invalid("alltoall_plan: ", side, " item sizes sum to ", sum, " but the total is ",
                                   packed_total);
  };
  check_items(plan.pack_offsets, plan.pack_sizes, plan.pack_slots.size(), plan.send_bytes, plan.input_bytes, "pack");
  check_items(plan.unpack_offsets, plan.unpack_sizes, plan.unpack_slots.size(), plan.recv_bytes, plan.output_bytes,
              "unpack");
}

}  // namespace mmbal
