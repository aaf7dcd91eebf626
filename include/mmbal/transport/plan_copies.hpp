#pragma once
/// @file
/// The host-side plan arithmetic every transport shares (loopback, MPI, NCCL): checking that
/// a plan's per-peer layout is consistent, the per-item copy lists that pack and unpack
/// (what the CUDA kernel of `nccl_pack.cuh` executes), and the per-peer regions of the
/// unpacked input and output buffers (what the MPI derived datatypes describe, so
/// `MPI_Alltoallw` can skip the pack copy). Pure C++: tested without MPI or a GPU.
/// @see docs/DESIGN.md §5.5–5.6

#include <mmbal/core/error.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/rearrange/alltoall_plan.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <vector>

namespace mmbal::transport {

/// `mmbal::validate_peer_layout` (rearrange/alltoall_plan.hpp), where the plan is defined.
using mmbal::validate_peer_layout;

/// Throws `invalid_input` unless the caller's buffers have exactly the sizes `plan` needs.
/// Transports that can call it collectively do so (see `execute`).
inline void check_buffers(const alltoall_plan& plan, std::size_t send_size, std::size_t recv_size) {
  if (send_size != plan.input_bytes || recv_size != plan.output_bytes)
    mmbal::detail::throw_invalid("all_to_all on rank ", plan.rank, ": buffers of ", send_size, " and ", recv_size,
                                 " bytes, the plan needs ", plan.input_bytes, " and ", plan.output_bytes);
}

/// A list of byte copies (structure of arrays, as the CUDA kernel reads it): copy k moves
/// `size[k]` bytes from `src[k]` in one buffer to `dst[k]` in another.
struct copy_list {
  std::vector<std::uint64_t> src, dst, size;

  [[nodiscard]] std::size_t count() const noexcept { return size.size(); }
  [[nodiscard]] std::uint64_t bytes() const noexcept {
    std::uint64_t b = 0;
    for (std::uint64_t s : size) b += s;
    return b;
  }
  void push(std::uint64_t s, std::uint64_t d, std::uint64_t n) {
    src.push_back(s);
    dst.push_back(d);
    size.push_back(n);
  }
};

namespace detail {

/// Copy list between a scattered side (per-item offsets) and a packed side (items back to
/// back). Items adjacent on both sides merge into one copy; zero-size items vanish; copies
/// longer than `max_chunk` are split (a GPU block per copy then gets bounded work).
inline copy_list make_copies(std::span<const std::uint64_t> offsets, std::span<const std::uint64_t> sizes,
                             bool scattered_is_source, std::uint64_t max_chunk) {
  if (max_chunk == 0) mmbal::detail::throw_invalid("copy list: max_chunk must be positive");
  copy_list out;
  std::uint64_t packed = 0;
  std::size_t i = 0;
  const std::size_t k = sizes.size();
  while (i < k) {
    const std::uint64_t from = offsets[i];
    std::uint64_t len = sizes[i];
    for (++i; i < k && offsets[i] == from + len; ++i) len += sizes[i];
    for (std::uint64_t done = 0; done < len;) {
      const std::uint64_t n = len - done < max_chunk ? len - done : max_chunk;
      if (scattered_is_source)
        out.push(from + done, packed + done, n);
      else
        out.push(packed + done, from + done, n);
      done += n;
    }
    packed += len;
  }
  return out;
}

}  // namespace detail

/// Copies that pack: input buffer (items in source slot order) → send buffer. Executing them
/// equals `mmbal::pack`. Adjacent items merge; copies are at most `max_chunk` bytes
/// (default: unlimited). O(items).
[[nodiscard]] inline copy_list pack_copies(const alltoall_plan& plan,
                                           std::uint64_t max_chunk = std::numeric_limits<std::uint64_t>::max()) {
  return detail::make_copies(plan.pack_offsets, plan.pack_sizes, true, max_chunk);
}

/// Copies that unpack: receive buffer → output buffer (items in destination slot order).
/// Executing them equals `mmbal::unpack`. O(items).
[[nodiscard]] inline copy_list unpack_copies(const alltoall_plan& plan,
                                             std::uint64_t max_chunk = std::numeric_limits<std::uint64_t>::max()) {
  return detail::make_copies(plan.unpack_offsets, plan.unpack_sizes, false, max_chunk);
}

/// Executes a copy list on host memory (the reference the CUDA kernel must match). Throws
/// `invalid_input` if a copy leaves either buffer. O(bytes).
inline void apply_copies(const copy_list& copies, std::span<const std::byte> from, std::span<std::byte> to) {
  for (std::size_t k = 0; k < copies.count(); ++k) {
    const std::uint64_t n = copies.size[k];
    if (copies.src[k] > from.size() || n > from.size() - copies.src[k] || copies.dst[k] > to.size() ||
        n > to.size() - copies.dst[k])
      mmbal::detail::throw_invalid("apply_copies: copy ", k, " of ", n, " bytes (", copies.src[k], " -> ",
                                   copies.dst[k], ") leaves a buffer");
    if (n != 0) std::memcpy(to.data() + copies.dst[k], from.data() + copies.src[k], n);
  }
}

/// Per-peer byte regions of an UNPACKED buffer, in the order they travel: peer p's regions
/// are `offset/size[first[p] .. first[p+1])`, adjacent items merged, empty items dropped.
/// Concatenating peer p's regions gives exactly the bytes of peer p's part of the packed
/// buffer. This is what a derived datatype (MPI hindexed) or a scatter-gather list needs.
struct peer_regions {
  std::vector<std::size_t> first;  ///< size ranks + 1
  std::vector<std::uint64_t> offset, size;

  [[nodiscard]] std::size_t regions(rank_t p) const { return first[p + 1] - first[p]; }
};

namespace detail {

inline peer_regions make_regions(std::span<const std::uint64_t> counts, std::span<const std::uint64_t> offsets,
                                 std::span<const std::uint64_t> sizes) {
  peer_regions out;
  out.first.assign(counts.size() + 1, 0);
  std::size_t i = 0;
  const std::size_t k = sizes.size();
  for (std::size_t p = 0; p < counts.size(); ++p) {
    out.first[p] = out.offset.size();
    std::uint64_t left = counts[p];
    while (left > 0) {
      while (i < k && sizes[i] == 0) ++i;  // empty items carry no bytes and never start a region
      if (i == k) mmbal::detail::throw_invalid("peer regions: items end before peer ", p, "'s ", counts[p], " bytes");
      const std::uint64_t from = offsets[i];
      std::uint64_t len = 0;
      // Merge items that are adjacent in the unpacked buffer and go to the same peer.
      while (i < k && offsets[i] == from + len && sizes[i] <= left - len) len += sizes[i++];
      if (len == 0) mmbal::detail::throw_invalid("peer regions: item ", i, " straddles the part of peer ", p);
      out.offset.push_back(from);
      out.size.push_back(len);
      left -= len;
    }
  }
  out.first[counts.size()] = out.offset.size();
  return out;
}

}  // namespace detail

/// The peer of every item on one side of a plan: item i (in pack or unpack order) belongs to
/// the peer whose byte range [displ, displ + count) of the packed buffer holds the item's
/// first byte; a zero-size item takes the first peer whose range is not exhausted at its
/// position (it carries no bytes, so any consistent choice is correct). Both ends of a point-to-point exchange see
/// the nonzero items of a pair (p, q) in the same order — ascending destination slot — so
/// they can be matched message by message. Throws `invalid_input` if an item straddles two
/// peers' ranges. O(items + ranks).
[[nodiscard]] inline std::vector<rank_t> item_peers(std::span<const std::uint64_t> counts,
                                                    std::span<const std::uint64_t> sizes) {
  std::vector<rank_t> out(sizes.size());
  std::size_t p = 0;
  std::uint64_t at = 0;   // packed position of the current item
  std::uint64_t end = 0;  // end of peer p's range
  if (!counts.empty()) end = counts[0];
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    while (p + 1 < counts.size() && at >= end) end += counts[++p];  // skip exhausted (and empty) peers
    if (sizes[i] > 0 && (at >= end || sizes[i] > end - at))
      mmbal::detail::throw_invalid("item_peers: item ", i, " of ", sizes[i], " bytes at ", at,
                                   " does not fit the range of peer ", p);
    out[i] = static_cast<rank_t>(p);
    at += sizes[i];
  }
  return out;
}

/// Regions of the INPUT buffer per destination peer (send side of `MPI_Alltoallw`). O(items).
[[nodiscard]] inline peer_regions send_regions(const alltoall_plan& plan) {
  return detail::make_regions(plan.send_counts, plan.pack_offsets, plan.pack_sizes);
}

/// Regions of the OUTPUT buffer per source peer (receive side of `MPI_Alltoallw`). O(items).
[[nodiscard]] inline peer_regions recv_regions(const alltoall_plan& plan) {
  return detail::make_regions(plan.recv_counts, plan.unpack_offsets, plan.unpack_sizes);
}

}  // namespace mmbal::transport
