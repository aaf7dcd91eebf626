#pragma once
/// @file
/// MPI transport (target `mmbal::mpi` = mmbal + MPI::MPI_CXX): metadata all-gather
/// (`MPI_Allgatherv`), the max all-reduce behind the plan fingerprint check, and plan
/// execution by three methods:
/// - `alltoallv`: pack (memcpy) → `MPI_Alltoallv` of bytes → unpack, items kept on the rank
///   copied input → output directly;
/// - `p2p` (default): one `MPI_Isend`/`MPI_Irecv` per item straight between the input and
///   output buffers (zero copy, contiguous messages), items below
///   `mpi_options::p2p_coalesce_below` packed into one message per peer, self items by memcpy;
/// - `alltoallw`: one `MPI_Alltoallw` whose per-peer derived datatypes
///   (`MPI_Type_create_hindexed` over the items' byte regions, from `send_regions` /
///   `recv_regions`) read the input buffer and write the output buffer in place: no pack
///   or unpack copy in user code (MPI may still copy internally).
///
/// 32-bit limits: MPI-3 counts and displacements are `int`. When any byte count or
/// displacement of ANY rank's plan exceeds `INT_MAX` (decided collectively by one `MPI_LAND`
/// all-reduce: ranks choosing by their own plan called different collectives and hung when
/// only some crossed the limit), `alltoallv` switches to `MPI_Alltoallw` over the
/// packed buffers with one hindexed region per peer (blocks of at most 2^30 bytes,
/// displacements `MPI_Aint`), so plans of any size work; the derived datatypes of
/// `alltoallw` are split the same way. Metadata gathers above `INT_MAX` words throw.
///
/// Errors: the transport duplicates the caller's communicator (its own context, so its
/// messages never match the caller's) and sets `MPI_ERRORS_RETURN` on the duplicate; every
/// MPI return code is checked and a failure throws `mmbal::runtime_failure` naming the call,
/// file, line and `MPI_Error_string`. Plan disagreement between ranks is caught before any
/// payload moves by `execute` / `check_agreement` (concepts.hpp), which throw on every rank.
/// Destroy the transport before `MPI_Finalize`.
/// @see OrchMLLM §6 (All-to-All Batch Communicator), docs/DESIGN.md §5.6

#include <mmbal/core/error.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/rearrange/alltoall_plan.hpp>
#include <mmbal/rearrange/pack.hpp>
#include <mmbal/transport/concepts.hpp>
#include <mmbal/transport/plan_copies.hpp>

// Only the C API is used: skip the deprecated MPI C++ bindings (they warn under -Wextra).
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace mmbal::transport::detail {

[[noreturn]] inline void throw_mpi(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  int error_class = code;
  static_cast<void>(MPI_Error_class(code, &error_class));
  mmbal::detail::throw_runtime(file, ":", line, ": ", call, " failed with MPI error ", code, " (class ", error_class,
                               "): ", std::string(text, static_cast<std::size_t>(length)));
}

}  // namespace mmbal::transport::detail

/// Checks an MPI call; throws `mmbal::runtime_failure` naming the call, file, line and the
/// MPI error string. Effective only on communicators with `MPI_ERRORS_RETURN`.
#define MMBAL_MPI_CHECK(call)                                                              \
  do {                                                                                     \
    const int mmbal_mpi_status_ = (call);                                                  \
    if (mmbal_mpi_status_ != MPI_SUCCESS)                                                  \
      ::mmbal::transport::detail::throw_mpi(mmbal_mpi_status_, #call, __FILE__, __LINE__); \
  } while (0)

namespace mmbal::transport {

/// How `mpi_transport::all_to_all` moves the payload.
enum class mpi_method : std::uint8_t {
  alltoallv,  ///< pack, MPI_Alltoallv of bytes, unpack (kept items copied straight)
  alltoallw,  ///< MPI_Alltoallw with hindexed datatypes on the unpacked buffers (no pack copy)
  p2p,        ///< one MPI_Isend/MPI_Irecv per large item, small items coalesced per peer (default)
};

/// Options of `mpi_transport`.
///
/// - `method`: default `p2p`, the fastest measured (bench/RESULTS.md "Transport benchmarks":
///   on one node with CMA single copy, 1.0–1.3 × raw `MPI_Alltoallv` at ~100 KiB items, where
///   `alltoallv`'s pack and unpack copies make it 1.3–1.5 ×);
/// - `p2p_coalesce_below`: in `p2p`, items smaller than this many bytes travel packed in one
///   message per peer (one pack and one unpack copy, like `alltoallv`), larger items as their
///   own zero-copy messages; 0 = every item its own message. Default 32 KiB: below it a
///   message's overhead costs more than copying the item. Both ends decide per item from its
///   size and their threshold, so the threshold, like the method, must be the same on every
///   rank: `execute` checks both (`settings_fingerprint`).
struct mpi_options {
  mpi_method method = mpi_method::p2p;
  std::uint64_t p2p_coalesce_below = std::uint64_t{32} << 10;
};

namespace detail {

/// Largest block of one hindexed datatype entry; well below INT_MAX so sums stay safe.
inline constexpr std::uint64_t mpi_max_block = std::uint64_t{1} << 30;

/// Committed derived datatypes, freed on destruction.
class mpi_type_set {
 public:
  mpi_type_set() = default;
  mpi_type_set(const mpi_type_set&) = delete;
  mpi_type_set& operator=(const mpi_type_set&) = delete;
  ~mpi_type_set() {
    for (MPI_Datatype& t : owned_) static_cast<void>(MPI_Type_free(&t));  // no throw from a destructor
  }

  /// A datatype covering `regions` (byte offsets from the buffer base), in order; MPI_BYTE
  /// with count 0 when there are none. Returns (type, count).
  std::pair<MPI_Datatype, int> make(std::span<const std::uint64_t> offsets, std::span<const std::uint64_t> sizes) {
    if (sizes.empty()) return {MPI_BYTE, 0};
    lengths_.clear();
    displs_.clear();
    for (std::size_t k = 0; k < sizes.size(); ++k)
      for (std::uint64_t done = 0; done < sizes[k];) {
        const std::uint64_t n = sizes[k] - done < mpi_max_block ? sizes[k] - done : mpi_max_block;
        lengths_.push_back(static_cast<int>(n));
        displs_.push_back(static_cast<MPI_Aint>(offsets[k] + done));
        done += n;
      }
    if (lengths_.size() > static_cast<std::size_t>(INT_MAX))
      mmbal::detail::throw_invalid("MPI transport: ", lengths_.size(), " regions for one peer exceed INT_MAX");
    MPI_Datatype t = MPI_DATATYPE_NULL;
    MMBAL_MPI_CHECK(
        MPI_Type_create_hindexed(static_cast<int>(lengths_.size()), lengths_.data(), displs_.data(), MPI_BYTE, &t));
    owned_.push_back(t);
    MMBAL_MPI_CHECK(MPI_Type_commit(&owned_.back()));
    return {owned_.back(), 1};
  }

 private:
  std::vector<MPI_Datatype> owned_;
  std::vector<int> lengths_;
  std::vector<MPI_Aint> displs_;
};

/// Whether every count and end offset fits MPI's `int`.
inline bool fits_int(std::span<const std::uint64_t> counts, std::span<const std::uint64_t> displs) {
  for (std::size_t p = 0; p < counts.size(); ++p)
    if (displs[p] > static_cast<std::uint64_t>(INT_MAX) || counts[p] > static_cast<std::uint64_t>(INT_MAX) - displs[p])
      return false;
  return true;
}

/// A non-null address for empty buffers (some MPI checks reject null even with count 0).
inline std::byte* non_null(std::byte* p) noexcept {
  static std::byte dummy{};
  return p != nullptr ? p : &dummy;
}

}  // namespace detail

/// The MPI transport of one rank; models `reducing_transport` (see the file doc).
/// Move-only; owns a duplicate of the communicator it was given.
class mpi_transport {
 public:
  /// Duplicates `comm` (collective over `comm`) and sets `MPI_ERRORS_RETURN` on the
  /// duplicate. MPI must be initialized.
  explicit mpi_transport(MPI_Comm comm = MPI_COMM_WORLD, mpi_options options = {}) : options_(options) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) mmbal::detail::throw_runtime("mpi_transport: MPI is not initialized");
    if (comm == MPI_COMM_NULL) mmbal::detail::throw_invalid("mpi_transport: the communicator is MPI_COMM_NULL");
    const int dup = MPI_Comm_dup(comm, &comm_);
    if (dup != MPI_SUCCESS) detail::throw_mpi(dup, "MPI_Comm_dup(comm, &comm_)", __FILE__, __LINE__);
    const int set = MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    if (set != MPI_SUCCESS) {
      free_comm();
      detail::throw_mpi(set, "MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN)", __FILE__, __LINE__);
    }
    int r = 0;
    int n = 0;
    MMBAL_MPI_CHECK(MPI_Comm_rank(comm_, &r));
    MMBAL_MPI_CHECK(MPI_Comm_size(comm_, &n));
    rank_ = static_cast<rank_t>(r);
    size_ = static_cast<rank_t>(n);
  }
  mpi_transport(mpi_transport&& o) noexcept
      : comm_(std::exchange(o.comm_, MPI_COMM_NULL)), options_(o.options_), rank_(o.rank_), size_(o.size_) {}
  mpi_transport& operator=(mpi_transport&& o) noexcept {
    if (this != &o) {
      free_comm();
      comm_ = std::exchange(o.comm_, MPI_COMM_NULL);
      options_ = o.options_;
      rank_ = o.rank_;
      size_ = o.size_;
    }
    return *this;
  }
  mpi_transport(const mpi_transport&) = delete;
  mpi_transport& operator=(const mpi_transport&) = delete;
  ~mpi_transport() { free_comm(); }

  [[nodiscard]] rank_t rank() const noexcept { return rank_; }
  [[nodiscard]] rank_t size() const noexcept { return size_; }
  /// The transport's own communicator (errors return; do not free it).
  [[nodiscard]] MPI_Comm comm() const noexcept { return comm_; }
  [[nodiscard]] const mpi_options& options() const noexcept { return options_; }
  void set_method(mpi_method m) noexcept { options_.method = m; }
  /// Sets `mpi_options::p2p_coalesce_below` (0 = every item its own message).
  void set_p2p_coalesce_below(std::uint64_t bytes) noexcept { options_.p2p_coalesce_below = bytes; }

  /// A hash of the settings that decide what `all_to_all` sends (the method, and with `p2p`
  /// the coalescing threshold); `execute` folds it into the plan fingerprint it checks.
  [[nodiscard]] std::uint64_t settings_fingerprint() const noexcept {
    const std::uint64_t threshold = options_.method == mpi_method::p2p ? options_.p2p_coalesce_below : 0;
    return (threshold * 0xBF58476D1CE4E5B9ull) ^ (std::uint64_t{1} + static_cast<unsigned>(options_.method));
  }
  /// `MPI_Barrier` on the transport's communicator.
  void barrier() {
    require_comm();
    MMBAL_MPI_CHECK(MPI_Barrier(comm_));
  }

  /// Variable-size all-gather: `MPI_Allgather` of the word counts, then `MPI_Allgatherv`.
  /// Collective. Throws (on every rank alike) when the total exceeds INT_MAX words.
  [[nodiscard]] gathered_words all_gather(std::span<const std::uint32_t> local) {
    require_comm();
    const std::uint64_t mine = local.size();
    std::vector<std::uint64_t> counts(size_);
    MMBAL_MPI_CHECK(MPI_Allgather(&mine, 1, MPI_UINT64_T, counts.data(), 1, MPI_UINT64_T, comm_));
    gathered_words out;
    out.offsets.assign(std::size_t{size_} + 1, 0);
    for (rank_t r = 0; r < size_; ++r) out.offsets[r + 1] = out.offsets[r] + counts[r];
    if (out.offsets.back() > static_cast<std::uint64_t>(INT_MAX))
      mmbal::detail::throw_invalid("mpi_transport::all_gather: ", out.offsets.back(),
                                   " words in total exceed MPI's int counts (INT_MAX)");
    std::vector<int> recv_counts(size_), displs(size_);
    for (rank_t r = 0; r < size_; ++r) {
      recv_counts[r] = static_cast<int>(counts[r]);
      displs[r] = static_cast<int>(out.offsets[r]);
    }
    out.words.resize(out.offsets.back());
    std::uint32_t dummy = 0;
    MMBAL_MPI_CHECK(MPI_Allgatherv(local.empty() ? &dummy : local.data(), static_cast<int>(local.size()), MPI_UINT32_T,
                                   out.words.empty() ? &dummy : out.words.data(), recv_counts.data(), displs.data(),
                                   MPI_UINT32_T, comm_));
    return out;
  }

  /// Element-wise max of 64-bit words over all ranks, in place (`MPI_Allreduce`). Collective.
  void all_reduce_max(std::span<std::uint64_t> values) {
    require_comm();
    if (values.size() > static_cast<std::size_t>(INT_MAX))
      mmbal::detail::throw_invalid("mpi_transport::all_reduce_max: ", values.size(), " values exceed INT_MAX");
    MMBAL_MPI_CHECK(
        MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_UINT64_T, MPI_MAX, comm_));
  }

  /// Executes this rank's plan with the configured method (see `mpi_options`). Collective.
  /// Throws `invalid_input` if the plan is inconsistent or the buffers have the wrong size or
  /// overlap: `alltoallv` (and `exchange_packed`) report that into their collective, so every
  /// rank throws; `p2p` and `alltoallw` throw locally, which leaves the other ranks waiting —
  /// call through `execute`, which checks collectively first.
  void all_to_all(const alltoall_plan& plan, std::span<const std::byte> send, std::span<std::byte> recv) {
    switch (options_.method) {
      case mpi_method::alltoallw:
        all_to_all_w(plan, send, recv);
        return;
      case mpi_method::p2p:
        all_to_all_p2p(plan, send, recv);
        return;
      case mpi_method::alltoallv:
        break;
    }
    all_to_all_v(plan, send, recv);
  }

  /// Pack → `MPI_Alltoallv` → unpack, for the items that change rank; the items this rank
  /// keeps are copied input → output directly (one copy instead of pack, self-exchange and
  /// unpack). Staging buffers are kept between calls. Plans above `INT_MAX` bytes go through
  /// `exchange_packed` whole (see the file doc). Memory: local payload + received payload (the
  /// staging copies) + O(plan).
  void all_to_all_v(const alltoall_plan& plan, std::span<const std::byte> send, std::span<std::byte> recv) {
    const rank_t me = rank_;
    const bool narrow = agree_on_exchange(plan, [&] {
      check_plan(plan, send, recv);
      if (plan.recv_counts[me] != plan.send_counts[me])
        mmbal::detail::throw_invalid("mpi_transport::all_to_all_v: rank ", me, " keeps ", plan.send_counts[me],
                                     " bytes on the send side but ", plan.recv_counts[me], " on the receive side");
    });
    send_.resize(plan.send_bytes);
    recv_.resize(plan.recv_bytes);
    if (!narrow) {
      mmbal::pack(plan, send, std::span<std::byte>(send_));
      exchange_packed_w(plan, send_, recv_);
      mmbal::unpack(plan, std::span<const std::byte>(recv_), recv);
      return;
    }
    const std::uint64_t self_send = plan.send_displs[me], self_recv = plan.recv_displs[me];
    const std::uint64_t self_bytes = plan.send_counts[me];
    // Whether an item at packed position `at` lies in the self part [begin, begin + n); a
    // zero-size item carries nothing and counts as kept (it is never copied).
    const auto is_self = [](std::uint64_t at, std::uint64_t size, std::uint64_t begin, std::uint64_t n) {
      return size == 0 || (at >= begin && at - begin < n);
    };
    // Pack the remote items (the self part of send_ stays unused).
    std::uint64_t at = 0;
    for (std::size_t i = 0; i < plan.pack_sizes.size(); at += plan.pack_sizes[i], ++i)
      if (!is_self(at, plan.pack_sizes[i], self_send, self_bytes))
        std::memcpy(send_.data() + at, send.data() + plan.pack_offsets[i], plan.pack_sizes[i]);
    const int* c = alltoallv_ints(plan, me);
    MMBAL_MPI_CHECK(MPI_Alltoallv(detail::non_null(send_.data()), c, c + size_, MPI_BYTE,
                                  detail::non_null(recv_.data()), c + 2 * size_, c + 3 * size_, MPI_BYTE, comm_));
    // Unpack the remote items. The self part of the packed send buffer maps byte for byte onto
    // that of the receive buffer, so the k-th kept (nonzero) item in unpack order is the k-th
    // in pack order: it is copied straight from `send`.
    std::size_t a = 0;       // next pack item to consider
    std::uint64_t a_at = 0;  // its packed position
    at = 0;
    for (std::size_t i = 0; i < plan.unpack_sizes.size(); at += plan.unpack_sizes[i], ++i) {
      const std::uint64_t n = plan.unpack_sizes[i];
      if (n == 0) continue;
      if (!is_self(at, n, self_recv, self_bytes)) {
        std::memcpy(recv.data() + plan.unpack_offsets[i], recv_.data() + at, n);
        continue;
      }
      while (a < plan.pack_sizes.size() &&
             (plan.pack_sizes[a] == 0 || !is_self(a_at, plan.pack_sizes[a], self_send, self_bytes)))
        a_at += plan.pack_sizes[a++];
      if (a == plan.pack_sizes.size() || plan.pack_sizes[a] != n || a_at - self_send != at - self_recv)
        mmbal::detail::throw_invalid("mpi_transport::all_to_all_v: rank ", me,
                                     "'s plan keeps different items on the send and receive side");
      std::memcpy(recv.data() + plan.unpack_offsets[i], send.data() + plan.pack_offsets[a], n);
      a_at += plan.pack_sizes[a++];
    }
  }

  /// One `MPI_Alltoallw`: peer p's send datatype is the hindexed list of this rank's input
  /// regions bound for p (`send_regions`), its receive datatype the output regions filled
  /// from p (`recv_regions`); adjacent items are merged into one block. No user-level copy.
  /// Datatypes are built and freed per call: O(items) MPI type calls.
  void all_to_all_w(const alltoall_plan& plan, std::span<const std::byte> send, std::span<std::byte> recv) {
    check_plan(plan, send, recv);
    const peer_regions out = send_regions(plan);
    const peer_regions in = recv_regions(plan);
    detail::mpi_type_set types;
    std::vector<MPI_Datatype> send_types(size_), recv_types(size_);
    std::vector<int> send_counts(size_), recv_counts(size_), zero(size_, 0);
    for (rank_t p = 0; p < size_; ++p) {
      const auto so = std::span<const std::uint64_t>(out.offset).subspan(out.first[p], out.regions(p));
      const auto ss = std::span<const std::uint64_t>(out.size).subspan(out.first[p], out.regions(p));
      std::tie(send_types[p], send_counts[p]) = types.make(so, ss);
      const auto ro = std::span<const std::uint64_t>(in.offset).subspan(in.first[p], in.regions(p));
      const auto rs = std::span<const std::uint64_t>(in.size).subspan(in.first[p], in.regions(p));
      std::tie(recv_types[p], recv_counts[p]) = types.make(ro, rs);
    }
    MMBAL_MPI_CHECK(MPI_Alltoallw(detail::non_null(const_cast<std::byte*>(send.data())), send_counts.data(),
                                  zero.data(), send_types.data(), detail::non_null(recv.data()), recv_counts.data(),
                                  zero.data(), recv_types.data(), comm_));
  }

  /// Point-to-point execution: every nonzero item of at least `p2p_coalesce_below` bytes
  /// received from another rank gets its own `MPI_Irecv` straight into its place in `recv`,
  /// every such item sent to another rank its own `MPI_Isend` straight from its place in
  /// `send` (zero copy); the smaller items of each peer travel packed back to back in one
  /// message per direction and peer (staging buffers kept between calls); items this rank
  /// keeps are copied input → output with memcpy; then one `MPI_Waitall`. Matching relies on
  /// MPI's non-overtaking rule (same source, tag and communicator): sender and receiver list
  /// the items of a pair in the same order, ascending destination slot (`item_peers`), and
  /// decide small or large from the item's size, which both know; per pair the packed message
  /// goes first, then the large items in order. Items above 2^30 bytes travel as several
  /// messages. Each message is contiguous, so shared-memory transports can use their
  /// single-copy path (Linux CMA in OpenMPI) where `alltoallw`'s non-contiguous datatypes
  /// cannot. Memory: the small items' staging. Collective (every rank calls it).
  void all_to_all_p2p(const alltoall_plan& plan, std::span<const std::byte> send, std::span<std::byte> recv) {
    check_plan(plan, send, recv);
    const std::vector<rank_t> to = item_peers(plan.send_counts, plan.pack_sizes);
    const std::vector<rank_t> from = item_peers(plan.recv_counts, plan.unpack_sizes);
    const std::uint64_t small = options_.p2p_coalesce_below;
    const auto remote_small = [&](rank_t peer, std::uint64_t n) { return peer != rank_ && n > 0 && n < small; };
    requests_.clear();
    const auto post = [&](bool is_recv, std::byte* base, std::uint64_t offset, std::uint64_t size, rank_t peer) {
      for (std::uint64_t done = 0; done < size;) {
        const std::uint64_t n = size - done < detail::mpi_max_block ? size - done : detail::mpi_max_block;
        MPI_Request req = MPI_REQUEST_NULL;
        if (is_recv)
          MMBAL_MPI_CHECK(MPI_Irecv(base + offset + done, static_cast<int>(n), MPI_BYTE, static_cast<int>(peer),
                                    p2p_tag, comm_, &req));
        else
          MMBAL_MPI_CHECK(MPI_Isend(base + offset + done, static_cast<int>(n), MPI_BYTE, static_cast<int>(peer),
                                    p2p_tag, comm_, &req));
        requests_.push_back(req);
        done += n;
      }
    };
    // Small items: packed per peer at the start of the peer's part of the staging buffers
    // (a peer's small items never exceed its part).
    fill_.assign(2 * std::size_t{size_}, 0);
    std::uint64_t* send_fill = fill_.data();
    std::uint64_t* recv_fill = send_fill + size_;
    for (std::size_t k = 0; k < from.size(); ++k)
      if (remote_small(from[k], plan.unpack_sizes[k])) recv_fill[from[k]] += plan.unpack_sizes[k];
    bool any_small = false;
    for (std::size_t k = 0; k < to.size(); ++k)
      if (remote_small(to[k], plan.pack_sizes[k])) {
        any_small = true;
        break;
      }
    for (rank_t p = 0; p < size_ && !any_small; ++p) any_small = recv_fill[p] > 0;
    if (any_small) {
      send_.resize(plan.send_bytes);
      recv_.resize(plan.recv_bytes);
      for (std::size_t k = 0; k < to.size(); ++k)
        if (remote_small(to[k], plan.pack_sizes[k])) {
          std::memcpy(send_.data() + plan.send_displs[to[k]] + send_fill[to[k]], send.data() + plan.pack_offsets[k],
                      plan.pack_sizes[k]);
          send_fill[to[k]] += plan.pack_sizes[k];
        }
    }
    // Receives first, so that large (rendezvous) sends find them posted.
    for (rank_t p = 0; p < size_; ++p)
      if (recv_fill[p] > 0) post(true, recv_.data(), plan.recv_displs[p], recv_fill[p], p);
    for (std::size_t k = 0; k < from.size(); ++k)
      if (from[k] != rank_ && plan.unpack_sizes[k] >= small && plan.unpack_sizes[k] > 0)
        post(true, recv.data(), plan.unpack_offsets[k], plan.unpack_sizes[k], from[k]);
    for (rank_t p = 0; p < size_; ++p)
      if (send_fill[p] > 0) post(false, send_.data(), plan.send_displs[p], send_fill[p], p);
    for (std::size_t k = 0; k < to.size(); ++k)
      if (to[k] != rank_ && plan.pack_sizes[k] >= small && plan.pack_sizes[k] > 0)
        post(false, const_cast<std::byte*>(send.data()), plan.pack_offsets[k], plan.pack_sizes[k], to[k]);
    // Self part while the messages fly: the k-th kept item in pack order is the k-th in unpack order.
    bool self_ok = true;
    std::size_t b = 0;
    for (std::size_t a = 0; a < to.size(); ++a) {
      if (to[a] != rank_ || plan.pack_sizes[a] == 0) continue;
      while (b < from.size() && (from[b] != rank_ || plan.unpack_sizes[b] == 0)) ++b;
      if (b == from.size() || plan.unpack_sizes[b] != plan.pack_sizes[a]) {
        self_ok = false;
        break;
      }
      std::memcpy(recv.data() + plan.unpack_offsets[b], send.data() + plan.pack_offsets[a], plan.pack_sizes[a]);
      ++b;
    }
    if (requests_.size() > static_cast<std::size_t>(INT_MAX))
      mmbal::detail::throw_invalid("mpi_transport::all_to_all_p2p: ", requests_.size(), " messages exceed INT_MAX");
    MMBAL_MPI_CHECK(MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE));
    if (!self_ok)
      mmbal::detail::throw_invalid("mpi_transport::all_to_all_p2p: rank ", rank_,
                                   "'s plan keeps different items on the send and receive side");
    // Unpack the small items, peer by peer in item order (the order they were packed in).
    std::fill(recv_fill, recv_fill + size_, 0);
    for (std::size_t k = 0; k < from.size(); ++k)
      if (remote_small(from[k], plan.unpack_sizes[k])) {
        std::memcpy(recv.data() + plan.unpack_offsets[k], recv_.data() + plan.recv_displs[from[k]] + recv_fill[from[k]],
                    plan.unpack_sizes[k]);
        recv_fill[from[k]] += plan.unpack_sizes[k];
      }
  }

  /// The raw exchange of already packed buffers (`plan.send_bytes` / `plan.recv_bytes`):
  /// `MPI_Alltoallv` of bytes when every rank's counts and displacements fit `int`, else
  /// `exchange_packed_w` (see the file doc). Collective; a rank's bad plan or buffers throw
  /// on every rank (see `agree_on_exchange`).
  void exchange_packed(const alltoall_plan& plan, std::span<const std::byte> packed_send,
                       std::span<std::byte> packed_recv) {
    if (!agree_on_exchange(plan, [&] { check_packed(plan, packed_send, packed_recv); })) {
      exchange_packed_w(plan, packed_send, packed_recv);
      return;
    }
    const int* c = alltoallv_ints(plan, size_);
    MMBAL_MPI_CHECK(MPI_Alltoallv(detail::non_null(const_cast<std::byte*>(packed_send.data())), c, c + size_, MPI_BYTE,
                                  detail::non_null(packed_recv.data()), c + 2 * size_, c + 3 * size_, MPI_BYTE, comm_));
  }

  /// The exchange of packed buffers by `MPI_Alltoallw` with one hindexed region per peer
  /// (blocks of at most 2^30 bytes at `MPI_Aint` displacements): no `int` limit on sizes.
  /// `exchange_packed` uses it when a plan exceeds `INT_MAX` bytes. Collective.
  void exchange_packed_w(const alltoall_plan& plan, std::span<const std::byte> packed_send,
                         std::span<std::byte> packed_recv) {
    check_packed(plan, packed_send, packed_recv);
    detail::mpi_type_set types;
    std::vector<MPI_Datatype> send_types(size_), recv_types(size_);
    std::vector<int> send_counts(size_), recv_counts(size_), zero(size_, 0);
    for (rank_t p = 0; p < size_; ++p) {
      const std::uint64_t s_off = plan.send_displs[p], s_len = plan.send_counts[p];
      const std::uint64_t r_off = plan.recv_displs[p], r_len = plan.recv_counts[p];
      std::tie(send_types[p], send_counts[p]) =
          s_len == 0 ? std::pair<MPI_Datatype, int>{MPI_BYTE, 0} : types.make({&s_off, 1}, {&s_len, 1});
      std::tie(recv_types[p], recv_counts[p]) =
          r_len == 0 ? std::pair<MPI_Datatype, int>{MPI_BYTE, 0} : types.make({&r_off, 1}, {&r_len, 1});
    }
    MMBAL_MPI_CHECK(MPI_Alltoallw(detail::non_null(const_cast<std::byte*>(packed_send.data())), send_counts.data(),
                                  zero.data(), send_types.data(), detail::non_null(packed_recv.data()),
                                  recv_counts.data(), zero.data(), recv_types.data(), comm_));
  }

 private:
  // MPI_Alltoallv's four int arrays in `ints_`, each `size_` long: send counts, send
  // displacements, receive counts, receive displacements (the caller checked they fit `int`).
  // The counts of rank `local` are 0 (its bytes are copied without MPI); `local = size_`: none.
  const int* alltoallv_ints(const alltoall_plan& plan, rank_t local) {
    ints_.resize(4 * std::size_t{size_});
    int* sc = ints_.data();
    int* sd = sc + size_;
    int* rc = sd + size_;
    int* rd = rc + size_;
    for (rank_t p = 0; p < size_; ++p) {
      sc[p] = p == local ? 0 : static_cast<int>(plan.send_counts[p]);
      sd[p] = static_cast<int>(plan.send_displs[p]);
      rc[p] = p == local ? 0 : static_cast<int>(plan.recv_counts[p]);
      rd[p] = static_cast<int>(plan.recv_displs[p]);
    }
    return ints_.data();
  }

  void check_packed(const alltoall_plan& plan, std::span<const std::byte> send, std::span<const std::byte> recv) const {
    require_comm();
    check_disjoint(send, recv);
    const std::size_t send_size = send.size(), recv_size = recv.size();
    if (plan.rank != rank_ || plan.ranks != size_)
      mmbal::detail::throw_invalid("mpi_transport: plan is for rank ", plan.rank, " of ", plan.ranks,
                                   " but this communicator is rank ", rank_, " of ", size_);
    validate_peer_layout(plan);
    if (send_size < plan.send_bytes || recv_size < plan.recv_bytes)
      mmbal::detail::throw_invalid("mpi_transport: packed buffers of ", send_size, " and ", recv_size,
                                   " bytes, the plan needs ", plan.send_bytes, " and ", plan.recv_bytes);
  }

  /// Runs this rank's `checks`, then one `MPI_MIN` all-reduce of {checks passed, counts and
  /// displacements fit `int`}: a rank whose checks threw rethrows its error after it and the
  /// others throw `runtime_failure` (nobody waits in the exchange for it), and all ranks pick
  /// the same collective (ranks choosing by their own plan called different ones and hung
  /// when only some crossed `INT_MAX`). Returns whether every rank's plan fits `int`.
  template <class Checks>
  bool agree_on_exchange(const alltoall_plan& plan, Checks&& checks) {
    require_comm();
    std::exception_ptr error;
    int v[2] = {1, 0};
    try {
      checks();
      v[1] =
          detail::fits_int(plan.send_counts, plan.send_displs) && detail::fits_int(plan.recv_counts, plan.recv_displs)
              ? 1
              : 0;
    } catch (...) {
      error = std::current_exception();
      v[0] = 0;
    }
    MMBAL_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_INT, MPI_MIN, comm_));
    if (error) std::rethrow_exception(error);
    if (v[0] == 0)
      mmbal::detail::throw_runtime(
          "mpi_transport on rank ", rank_, " of ", size_,
          ": another rank's plan or buffers are invalid (that rank throws invalid_input naming why)");
    return v[1] != 0;
  }

  /// A moved-from transport has no communicator; MPI would abort the job on its use.
  void require_comm() const {
    if (comm_ == MPI_COMM_NULL) mmbal::detail::throw_invalid("mpi_transport: used after it was moved from");
  }

  void check_plan(const alltoall_plan& plan, std::span<const std::byte> send, std::span<const std::byte> recv) const {
    require_comm();
    if (plan.rank != rank_ || plan.ranks != size_)
      mmbal::detail::throw_invalid("mpi_transport: plan is for rank ", plan.rank, " of ", plan.ranks,
                                   " but this communicator is rank ", rank_, " of ", size_);
    validate_peer_layout(plan);
    check_buffers(plan, send.size(), recv.size());
    check_disjoint(send, recv);
  }

  void free_comm() noexcept {
    if (comm_ == MPI_COMM_NULL) return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) static_cast<void>(MPI_Comm_free(&comm_));
    comm_ = MPI_COMM_NULL;
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  mpi_options options_;
  rank_t rank_ = 0;
  rank_t size_ = 0;
  std::vector<std::byte> send_, recv_;
  std::vector<int> ints_;
  std::vector<std::uint64_t> fill_;  // p2p: bytes of small items per peer (send, then receive)
  std::vector<MPI_Request> requests_;
  static constexpr int p2p_tag = 7;  // the communicator is private: any fixed tag is safe
};

static_assert(reducing_transport<mpi_transport>);

}  // namespace mmbal::transport
