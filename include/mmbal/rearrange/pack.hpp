#pragma once
/// @file
/// The pure reference executors of an `alltoall_plan` (docs/DESIGN.md §5.5): `pack` gathers the
/// local items from the input buffer into the send buffer, `unpack` scatters the receive
/// buffer into the output buffer. The exchange between them (send buffer of rank p, part q →
/// receive buffer of rank q, part p) is the transport's job; `exchange_in_process` does it for
/// d simulated ranks in one process (tests, the loopback transport).

#include <mmbal/core/error.hpp>
#include <mmbal/rearrange/alltoall_plan.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

namespace mmbal {

namespace detail {

template <class T>
void copy_units(T* to, const T* from, std::uint64_t n) noexcept {
  if (n != 0) std::memcpy(to, from, static_cast<std::size_t>(n) * sizeof(T));  // memcpy(_, _, 0) may get null
}

/// A run of `len` units read at `from` of a `source` units buffer and written at `to` of a
/// `target` units one must lie inside both: a plan whose item offsets are corrupt is an error,
/// never an out-of-bounds copy (one comparison per run, not per item).
inline void check_run(const char* what, std::uint64_t from, std::uint64_t len, std::uint64_t source, std::uint64_t to,
                      std::uint64_t target) {
  if (from > source || len > source - from || to > target || len > target - to)
    throw_invalid(what, ": a run of ", len, " units at ", from, " -> ", to, " leaves its buffers (", source, ", ",
                  target, " units)");
}

}  // namespace detail

/// Gathers this rank's items from `input` (items in source slot order, `plan.input_bytes`
/// units) into `send` (`plan.send_bytes` units, grouped by peer as the plan says). Items that
/// are adjacent in both buffers are copied with one `memcpy` (runs), so the copy runs at
/// close to `memcpy` bandwidth for realistic item sizes. Units are elements of T (pass the
/// plan sizes in elements of T; `std::byte` for bytes). Buffers may be larger than needed;
/// shorter ones throw `invalid_input`. The buffers must not overlap. O(k) memcpy calls.
template <class T>
requires std::is_trivially_copyable_v<T>
void pack(const alltoall_plan& plan, std::span<const T> input, std::span<T> send) {
  if (input.size() < plan.input_bytes)
    detail::throw_invalid("pack: input has ", input.size(), " units, the plan needs ", plan.input_bytes);
  if (send.size() < plan.send_bytes)
    detail::throw_invalid("pack: send buffer has ", send.size(), " units, the plan needs ", plan.send_bytes);
  const std::size_t k = plan.pack_sizes.size();
  std::uint64_t out = 0;
  std::size_t i = 0;
  while (i < k) {
    const std::uint64_t from = plan.pack_offsets[i];
    std::uint64_t len = plan.pack_sizes[i];
    for (++i; i < k && plan.pack_offsets[i] == from + len; ++i) len += plan.pack_sizes[i];
    detail::check_run("pack", from, len, input.size(), out, send.size());
    detail::copy_units(send.data() + out, input.data() + from, len);
    out += len;
  }
}

/// Scatters `recv` (items in receive order, `plan.recv_bytes` units) into `output` (items in
/// destination slot order, `plan.output_bytes` units). Same units, run merging and checks as
/// `pack`. O(k) memcpy calls.
template <class T>
requires std::is_trivially_copyable_v<T>
void unpack(const alltoall_plan& plan, std::span<const T> recv, std::span<T> output) {
  if (recv.size() < plan.recv_bytes)
    detail::throw_invalid("unpack: receive buffer has ", recv.size(), " units, the plan needs ", plan.recv_bytes);
  if (output.size() < plan.output_bytes)
    detail::throw_invalid("unpack: output has ", output.size(), " units, the plan needs ", plan.output_bytes);
  const std::size_t k = plan.unpack_sizes.size();
  std::uint64_t in = 0;
  std::size_t i = 0;
  while (i < k) {
    const std::uint64_t to = plan.unpack_offsets[i];
    std::uint64_t len = plan.unpack_sizes[i];
    for (++i; i < k && plan.unpack_offsets[i] == to + len; ++i) len += plan.unpack_sizes[i];
    detail::check_run("unpack", in, len, recv.size(), to, output.size());
    detail::copy_units(output.data() + to, recv.data() + in, len);
    in += len;
  }
}

/// Byte-buffer conveniences (`std::vector<std::byte>` etc. convert implicitly).
inline void pack(const alltoall_plan& plan, std::span<const std::byte> input, std::span<std::byte> send) {
  pack<std::byte>(plan, input, send);
}
/// @copydoc unpack(const alltoall_plan&, std::span<const std::byte>, std::span<std::byte>)
inline void unpack(const alltoall_plan& plan, std::span<const std::byte> recv, std::span<std::byte> output) {
  unpack<std::byte>(plan, recv, output);
}

/// Executes one all-to-all among `plans.size()` simulated ranks in one process: for every
/// rank p, packs `inputs[p]`, delivers part q of its send buffer to rank q's receive buffer at
/// `recv_displs[p]`, then unpacks into the returned outputs (one per rank, `output_bytes` units
/// each). Checks that the plans agree pairwise (rank p's send count to q equals rank q's
/// receive count from p) and throws `invalid_input` otherwise. Memory: every rank's send and
/// receive buffer at once — for tests and simulation, not for production payloads.
template <class T>
requires std::is_trivially_copyable_v<T>
[[nodiscard]] std::vector<std::vector<T>> exchange_in_process(std::span<const alltoall_plan> plans,
                                                              std::span<const std::vector<T>> inputs) {
  const std::size_t d = plans.size();
  if (inputs.size() != d) detail::throw_invalid("exchange_in_process: ", inputs.size(), " inputs for ", d, " plans");
  for (std::size_t p = 0; p < d; ++p) {
    if (plans[p].rank != p || plans[p].ranks != d)
      detail::throw_invalid("exchange_in_process: plan ", p, " is for rank ", plans[p].rank, " of ", plans[p].ranks);
    validate_peer_layout(plans[p]);
  }
  for (std::size_t p = 0; p < d; ++p)
    for (std::size_t q = 0; q < d; ++q)
      if (plans[p].send_counts[q] != plans[q].recv_counts[p])
        detail::throw_invalid("exchange_in_process: rank ", p, " sends ", plans[p].send_counts[q], " units to rank ", q,
                              " which expects ", plans[q].recv_counts[p]);
  std::vector<std::vector<T>> send(d), recv(d), out(d);
  for (std::size_t p = 0; p < d; ++p) {
    send[p].resize(plans[p].send_bytes);
    pack<T>(plans[p], inputs[p], send[p]);
    recv[p].resize(plans[p].recv_bytes);
  }
  for (std::size_t p = 0; p < d; ++p)
    for (std::size_t q = 0; q < d; ++q)
      detail::copy_units(recv[q].data() + plans[q].recv_displs[p], send[p].data() + plans[p].send_displs[q],
                         plans[p].send_counts[q]);
  for (std::size_t p = 0; p < d; ++p) {
    out[p].resize(plans[p].output_bytes);
    unpack<T>(plans[p], recv[p], out[p]);
  }
  return out;
}

}  // namespace mmbal
