#pragma once
/// @file
/// The transport concepts (docs/DESIGN.md §4, §5.6) and the generic operations written once on
/// top of them: gathering every rank's sample metadata into one global workload, the
/// collective plan-fingerprint check, and executing a rearrangement. The loopback, MPI and
/// NCCL transports model these concepts; the generic code is the same for all of them.
/// @see OrchMLLM §6 (All-to-All Batch Communicator, MLLM Global Orchestrator)

#include <mmbal/core/error.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/rearrange/alltoall_plan.hpp>
#include <mmbal/rearrange/rearrangement.hpp>
#include <mmbal/transport/metadata.hpp>
#include <mmbal/transport/plan_copies.hpp>
#include <mmbal/workload/sample.hpp>

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <span>
#include <vector>

namespace mmbal::transport {

/// The result of a variable-size all-gather: rank r's words are
/// `words[offsets[r] .. offsets[r+1])`; `offsets.size()` is ranks + 1.
struct gathered_words {
  std::vector<std::uint32_t> words;
  std::vector<std::uint64_t> offsets;

  /// Rank r's block.
  [[nodiscard]] std::span<const std::uint32_t> of(rank_t r) const {
    return std::span<const std::uint32_t>(words).subspan(offsets[r], offsets[r + 1] - offsets[r]);
  }
  friend bool operator==(const gathered_words&, const gathered_words&) = default;
};

/// A transport: one rank's endpoint of a group of `size()` ranks.
/// - `t.rank()`, `t.size()` (`rank_t`, const);
/// - `t.all_gather(words)`: collective; every rank gets every rank's words (sizes may differ);
/// - `t.all_to_all(plan, send, recv)`: collective; executes this rank's `alltoall_plan`:
///   `send` holds this rank's items in source slot order (`plan.input_bytes`), `recv`
///   receives its items in destination slot order (`plan.output_bytes`). Pack, exchange
///   and unpack are the transport's business (it may skip the pack copy).
/// Every rank must make the same sequence of collective calls.
template <class T>
concept transport = requires(T& t, const T& ct, std::span<const std::uint32_t> words, const alltoall_plan& plan,
                             std::span<const std::byte> send, std::span<std::byte> recv) {
  { ct.rank() } -> std::same_as<rank_t>;
  { ct.size() } -> std::same_as<rank_t>;
  { t.all_gather(words) } -> std::same_as<gathered_words>;
  { t.all_to_all(plan, send, recv) } -> std::same_as<void>;
};

/// Capability: an element-wise maximum all-reduce of 64-bit words, in place
/// (`t.all_reduce_max(values)`). Enables the collective plan check of `check_agreement`
/// (min is the max of the complements, so one call gives both).
template <class T>
concept reducing_transport = transport<T> && requires(T& t, std::span<std::uint64_t> values) {
  { t.all_reduce_max(values) } -> std::same_as<void>;
};

/// Capability: exchanges already packed DEVICE buffers by a plan's per-peer counts
/// (`t.exchange_device(plan, send, recv)` with device pointers), e.g. NCCL.
template <class T>
concept device_transport = transport<T> &&
    requires(T& t, const alltoall_plan& plan, const std::byte* send, std::byte* recv) {
  { t.exchange_device(plan, send, recv) } -> std::same_as<void>;
};

/// Gathers every rank's samples (metadata only: lengths, modalities, ids, groups — never
/// payload) into the global workload, identical on every rank: samples in rank-major order
/// with `rank` set to the rank that sent them. Collective. O(total segments).
/// A rank whose `local` cannot be serialized (`invalid_input`) still takes part, with a
/// one-word failure block, and throws its own error; every other rank throws
/// `runtime_failure` naming it — nobody waits in the collective for it.
/// @see OrchMLLM §6: every rank computes the same plan from the same gathered metadata.
template <transport T>
[[nodiscard]] workload gather_workload(T& t, const workload& local) {
  std::vector<std::uint32_t> mine;
  std::exception_ptr error;
  try {
    mine = serialize_samples(local);
  } catch (...) {  // invalid_input, or bad_alloc: either way take part, then throw
    error = std::current_exception();
    mine.assign(1, metadata_failed);
  }
  const gathered_words all = t.all_gather(mine);
  if (error) std::rethrow_exception(error);
  for (rank_t r = 0; r < t.size(); ++r)
    if (const auto block = all.of(r); block.size() == 1 && block[0] == metadata_failed)
      mmbal::detail::throw_runtime("gather_workload on rank ", t.rank(), ": rank ", r,
                                   " could not serialize its samples (it throws invalid_input naming why)");
  return deserialize_samples(all.words, all.offsets);
}

/// The outcome of a collective agreement check, identical on every rank.
struct agreement {
  std::uint64_t min_fingerprint = 0;
  std::uint64_t max_fingerprint = 0;
  bool all_ok = true;  ///< every rank reported `local_ok`
  [[nodiscard]] bool agreed() const noexcept { return all_ok && min_fingerprint == max_fingerprint; }
};

/// Collective: every rank contributes its plan fingerprint and whether its local
/// preconditions hold (e.g. buffer sizes); one max all-reduce of {fp, ~fp, !ok} gives
/// everyone the same min, max and status. Returns that outcome; never throws on its own.
template <reducing_transport T>
[[nodiscard]] agreement reduce_agreement(T& t, std::uint64_t fingerprint, bool local_ok = true) {
  std::array<std::uint64_t, 3> v{fingerprint, ~fingerprint, local_ok ? 0u : 1u};
  t.all_reduce_max(v);
  return agreement{~v[1], v[0], v[2] == 0};
}

namespace detail {
/// Throws `runtime_failure` unless `a` says every rank was ok and agreed (the message gives
/// this rank's fingerprint and the global min and max).
template <transport T>
void throw_unless_agreed(const T& t, const agreement& a, std::uint64_t fingerprint, bool local_ok) {
  if (!a.all_ok)
    mmbal::detail::throw_runtime("plan check on rank ", t.rank(), " of ", t.size(), ": ",
                                 local_ok ? "another rank's" : "this rank's",
                                 " plan or buffers are invalid (that rank throws invalid_input naming why)");
  if (a.min_fingerprint != a.max_fingerprint)
    mmbal::detail::throw_runtime("plan check on rank ", t.rank(), " of ", t.size(),
                                 ": ranks disagree on the plan (fingerprint here ", fingerprint, ", min ",
                                 a.min_fingerprint, ", max ", a.max_fingerprint,
                                 "); the gathered metadata, the planner or the transport's settings (method, "
                                 "coalescing threshold) differ between ranks");
}
}  // namespace detail

/// Collective check that every rank holds the same plan: throws `runtime_failure` on EVERY
/// rank (none hangs, none proceeds) if the fingerprints differ or some rank's `local_ok` is
/// false; the message gives this rank's fingerprint and the global min and max.
/// Cost: one all-reduce of three words. @see docs/DESIGN.md §5.5 (plan fingerprint)
template <reducing_transport T>
void check_agreement(T& t, std::uint64_t fingerprint, bool local_ok = true) {
  detail::throw_unless_agreed(t, reduce_agreement(t, fingerprint, local_ok), fingerprint, local_ok);
}

/// Options of `execute`.
struct execute_options {
  /// All-reduce the fingerprint first (reducing transports only); default on. Must be the
  /// same on every rank: a rank that skips the check skips its collective.
  bool check = true;
};

/// Capability: settings that change what `all_to_all` does on the wire and so must be equal
/// on every rank (`t.settings_fingerprint()`: MPI's method and coalescing threshold).
/// `execute` folds them into the plan fingerprint it checks.
template <class T>
concept settings_transport = requires(const T& t) {
  { t.settings_fingerprint() } -> std::same_as<std::uint64_t>;
};

/// Throws `invalid_input` when `send` and `recv` overlap: the exchange reads one while
/// writing the other (delivered bytes were wrong without an error).
inline void check_disjoint(std::span<const std::byte> send, std::span<const std::byte> recv) {
  if (send.empty() || recv.empty()) return;
  const auto s = reinterpret_cast<std::uintptr_t>(send.data()), r = reinterpret_cast<std::uintptr_t>(recv.data());
  if (s < r + recv.size() && r < s + send.size())
    mmbal::detail::throw_invalid("all_to_all: the send buffer (", send.size(), " bytes) and the receive buffer (",
                                 recv.size(), " bytes) overlap");
}

/// Executes rearrangement `r` (items of `item_bytes[i]` bytes) on this rank: builds this
/// rank's plan, checks collectively (when `t` is reducing and `options.check`) that every
/// rank has the same `fingerprint(r, item_bytes)` (with the transport's
/// `settings_fingerprint` where it has one) and a valid plan with correctly sized, disjoint
/// buffers, then calls `t.all_to_all`. `send`: this rank's items in source slot order;
/// `recv`: its items in destination slot order. Returns the plan (reuse it for the backward
/// pass with `r.inverse()`). Errors: a rank whose own input is wrong (a malformed `r`, other
/// ranks, wrong buffer sizes, overlapping buffers) throws `invalid_input` naming it, after
/// the check, and every other rank throws `runtime_failure`; differing fingerprints throw
/// `runtime_failure` on every rank — none hangs, none corrupts data. Without the check a
/// local error is thrown before any communication and the other ranks wait.
/// O(n + ranks + local items · log) planning plus the exchange.
template <transport T>
alltoall_plan execute(T& t, const rearrangement& r, std::span<const std::uint64_t> item_bytes,
                      std::span<const std::byte> send, std::span<std::byte> recv, execute_options options = {}) {
  alltoall_plan plan;
  std::uint64_t print = 0;
  std::exception_ptr local_error;
  try {
    plan = make_alltoall_plan(r, item_bytes, t.rank());
    if (plan.ranks != t.size())
      mmbal::detail::throw_invalid("execute: rearrangement over ", plan.ranks, " ranks on a transport of ", t.size());
    check_buffers(plan, send.size(), recv.size());
    check_disjoint(send, recv);
    print = fingerprint(r, item_bytes);
    if constexpr (settings_transport<T>) print ^= t.settings_fingerprint() * 0x9E3779B97F4A7C15ull;
  } catch (...) {  // invalid_input, or bad_alloc while planning: report it into the check
    local_error = std::current_exception();
  }
  if constexpr (reducing_transport<T>) {
    if (options.check) {
      const agreement a = reduce_agreement(t, print, local_error == nullptr);
      if (local_error) std::rethrow_exception(local_error);
      detail::throw_unless_agreed(t, a, print, true);
    }
  }
  if (local_error) std::rethrow_exception(local_error);
  t.all_to_all(plan, send, recv);
  return plan;
}

}  // namespace mmbal::transport
