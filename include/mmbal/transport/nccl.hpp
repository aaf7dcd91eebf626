#pragma once
/// @file
/// NCCL transport (target `mmbal::nccl`: CUDA::cudart + NCCL::NCCL): an all-to-all-v on
/// device buffers made of grouped `ncclSend`/`ncclRecv` (one pair per peer inside
/// `ncclGroupStart`/`ncclGroupEnd`), variable-size all-gather of metadata, a max all-reduce
/// for the plan fingerprint check, and host-buffer convenience paths that stage through the
/// device. Every CUDA and NCCL call is checked; failures throw `mmbal::runtime_failure`
/// whose message names the call, the file and the line (`MMBAL_CUDA_CHECK` from
/// `device/cuda_check.hpp`, `MMBAL_NCCL_CHECK` here).
///
/// This header is host C++ (compiles with g++ against the CUDA runtime headers). The CUDA
/// kernels that pack and unpack variable-size items on the device are in
/// `transport/nccl_pack.cuh` (needs nvcc). The plan arithmetic (per-peer byte counts and
/// displacements, per-item copy lists) is the same host code the loopback and MPI
/// transports use (`transport/plan_copies.hpp`), which is where it is tested.
/// @see OrchMLLM §6 (All-to-All Batch Communicator), docs/DESIGN.md §5.6

#include <mmbal/core/error.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/device/cuda_check.hpp>
#include <mmbal/rearrange/alltoall_plan.hpp>
#include <mmbal/rearrange/pack.hpp>
#include <mmbal/transport/concepts.hpp>
#include <mmbal/transport/plan_copies.hpp>

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace mmbal::transport {
namespace detail {

[[noreturn]] inline void throw_nccl(ncclResult_t e, const char* call, const char* file, int line) {
  mmbal::detail::throw_runtime(file, ":", line, ": ", call, " failed: ", ncclGetErrorString(e), " (", int{e}, ")");
}

}  // namespace detail
}  // namespace mmbal::transport

/// Checks an NCCL call; throws `mmbal::runtime_failure` naming the call, file and line.
#define MMBAL_NCCL_CHECK(call)                                                               \
  do {                                                                                       \
    const ncclResult_t mmbal_nccl_status_ = (call);                                          \
    if (mmbal_nccl_status_ != ncclSuccess)                                                   \
      ::mmbal::transport::detail::throw_nccl(mmbal_nccl_status_, #call, __FILE__, __LINE__); \
  } while (0)

namespace mmbal::transport {

/// A device allocation owned by RAII (`cudaMalloc`/`cudaFree`). Move-only.
class device_bytes {
 public:
  device_bytes() = default;
  explicit device_bytes(std::size_t n) : size_(n) {
    if (n > 0) MMBAL_CUDA_CHECK(cudaMalloc(&data_, n));
  }
  device_bytes(device_bytes&& o) noexcept : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  device_bytes& operator=(device_bytes&& o) noexcept {
    if (this != &o) {
      reset();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  device_bytes(const device_bytes&) = delete;
  device_bytes& operator=(const device_bytes&) = delete;
  ~device_bytes() { reset(); }

  /// Grows (never shrinks) to at least `n` bytes; contents are not preserved.
  void reserve(std::size_t n) {
    if (n <= size_) return;
    reset();
    MMBAL_CUDA_CHECK(cudaMalloc(&data_, n));
    size_ = n;
  }
  [[nodiscard]] std::byte* data() const noexcept { return static_cast<std::byte*>(data_); }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }

 private:
  void reset() noexcept {
    if (data_ != nullptr) static_cast<void>(cudaFree(data_));  // no throw from a destructor
    data_ = nullptr;
    size_ = 0;
  }
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

/// The NCCL transport of one rank. It borrows a communicator and a stream (the caller owns
/// both, as trainers already have them) and keeps staging buffers between calls.
///
/// Device path (`exchange_device`): packed send buffer → grouped `ncclSend`/`ncclRecv` per
/// peer with that peer's byte count (`ncclUint8`, `size_t` counts: no 2^31 limit) → packed
/// receive buffer. With `transport/nccl_pack.cuh`, `all_to_all_device` packs and unpacks on
/// the device around it. Host path (`all_to_all`): host pack → copy to device → exchange →
/// copy back → host unpack; for tests and small control data, not for activations.
/// All calls are enqueued on the stream and the host ones synchronize it before returning.
class nccl_transport {
 public:
  /// `comm` must be an initialized communicator; `stream` the stream to enqueue on.
  nccl_transport(ncclComm_t comm, cudaStream_t stream) : comm_(comm), stream_(stream) {
    int r = 0;
    int n = 0;
    MMBAL_NCCL_CHECK(ncclCommUserRank(comm_, &r));
    MMBAL_NCCL_CHECK(ncclCommCount(comm_, &n));
    rank_ = static_cast<rank_t>(r);
    size_ = static_cast<rank_t>(n);
  }

  [[nodiscard]] rank_t rank() const noexcept { return rank_; }
  [[nodiscard]] rank_t size() const noexcept { return size_; }
  [[nodiscard]] ncclComm_t comm() const noexcept { return comm_; }
  [[nodiscard]] cudaStream_t stream() const noexcept { return stream_; }

  /// Grouped send/receive of already packed device buffers: `counts`/`displs` in bytes per
  /// peer, as in `alltoall_plan`. Enqueued on the stream; does not synchronize. O(size).
  void exchange_device(const alltoall_plan& plan, const std::byte* send, std::byte* recv) {
    check_plan(plan);
    MMBAL_NCCL_CHECK(ncclGroupStart());
    for (rank_t p = 0; p < size_; ++p) {
      if (plan.send_counts[p] > 0)
        MMBAL_NCCL_CHECK(
            ncclSend(send + plan.send_displs[p], plan.send_counts[p], ncclUint8, static_cast<int>(p), comm_, stream_));
      if (plan.recv_counts[p] > 0)
        MMBAL_NCCL_CHECK(
            ncclRecv(recv + plan.recv_displs[p], plan.recv_counts[p], ncclUint8, static_cast<int>(p), comm_, stream_));
    }
    MMBAL_NCCL_CHECK(ncclGroupEnd());
  }

  /// Variable-size all-gather of host words (metadata): the counts first (one
  /// `ncclAllGather` of a u64 each), then every block padded to the largest. Synchronizes.
  [[nodiscard]] gathered_words all_gather(std::span<const std::uint32_t> local) {
    device_bytes counts(sizeof(std::uint64_t) * size_);
    const std::uint64_t mine = local.size();
    MMBAL_CUDA_CHECK(cudaMemcpyAsync(counts.data() + sizeof(std::uint64_t) * rank_, &mine, sizeof mine,
                                     cudaMemcpyHostToDevice, stream_));
    MMBAL_NCCL_CHECK(
        ncclAllGather(counts.data() + sizeof(std::uint64_t) * rank_, counts.data(), 1, ncclUint64, comm_, stream_));
    std::vector<std::uint64_t> sizes(size_);
    MMBAL_CUDA_CHECK(
        cudaMemcpyAsync(sizes.data(), counts.data(), sizeof(std::uint64_t) * size_, cudaMemcpyDeviceToHost, stream_));
    MMBAL_CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::uint64_t widest = 0;
    for (std::uint64_t s : sizes) widest = s > widest ? s : widest;
    gathered_words out;
    out.offsets.assign(std::size_t{size_} + 1, 0);
    for (rank_t r = 0; r < size_; ++r) out.offsets[r + 1] = out.offsets[r] + sizes[r];
    if (widest == 0) return out;
    const std::size_t block = sizeof(std::uint32_t) * widest;
    device_bytes all(block * size_);
    MMBAL_CUDA_CHECK(cudaMemsetAsync(all.data() + block * rank_, 0, block, stream_));
    if (!local.empty())
      MMBAL_CUDA_CHECK(cudaMemcpyAsync(all.data() + block * rank_, local.data(), local.size_bytes(),
                                       cudaMemcpyHostToDevice, stream_));
    MMBAL_NCCL_CHECK(ncclAllGather(all.data() + block * rank_, all.data(), block, ncclUint8, comm_, stream_));
    out.words.resize(out.offsets.back());
    for (rank_t r = 0; r < size_; ++r)
      if (sizes[r] > 0)
        MMBAL_CUDA_CHECK(cudaMemcpyAsync(out.words.data() + out.offsets[r], all.data() + block * r,
                                         sizeof(std::uint32_t) * sizes[r], cudaMemcpyDeviceToHost, stream_));
    MMBAL_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return out;
  }

  /// Element-wise maximum over all ranks, in place (`ncclAllReduce`, `ncclMax`). Synchronizes.
  void all_reduce_max(std::span<std::uint64_t> values) {
    if (values.empty()) return;
    device_bytes buf(values.size_bytes());
    MMBAL_CUDA_CHECK(cudaMemcpyAsync(buf.data(), values.data(), values.size_bytes(), cudaMemcpyHostToDevice, stream_));
    MMBAL_NCCL_CHECK(ncclAllReduce(buf.data(), buf.data(), values.size(), ncclUint64, ncclMax, comm_, stream_));
    MMBAL_CUDA_CHECK(cudaMemcpyAsync(values.data(), buf.data(), values.size_bytes(), cudaMemcpyDeviceToHost, stream_));
    MMBAL_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  /// Executes `plan` on host buffers (`send`: this rank's items in slot order,
  /// `plan.input_bytes`; `recv`: `plan.output_bytes`) by staging through the device.
  /// Synchronizes. Throws `invalid_input` on wrong buffer sizes.
  void all_to_all(const alltoall_plan& plan, std::span<const std::byte> send, std::span<std::byte> recv) {
    check_buffers(plan, send.size(), recv.size());
    host_send_.resize(plan.send_bytes);
    host_recv_.resize(plan.recv_bytes);
    mmbal::pack(plan, send, std::span<std::byte>(host_send_));
    dev_send_.reserve(plan.send_bytes);
    dev_recv_.reserve(plan.recv_bytes);
    if (plan.send_bytes > 0)
      MMBAL_CUDA_CHECK(
          cudaMemcpyAsync(dev_send_.data(), host_send_.data(), plan.send_bytes, cudaMemcpyHostToDevice, stream_));
    exchange_device(plan, dev_send_.data(), dev_recv_.data());
    if (plan.recv_bytes > 0)
      MMBAL_CUDA_CHECK(
          cudaMemcpyAsync(host_recv_.data(), dev_recv_.data(), plan.recv_bytes, cudaMemcpyDeviceToHost, stream_));
    MMBAL_CUDA_CHECK(cudaStreamSynchronize(stream_));
    mmbal::unpack(plan, std::span<const std::byte>(host_recv_), recv);
  }

 private:
  void check_plan(const alltoall_plan& plan) const {
    if (plan.ranks != size_ || plan.rank != rank_)
      mmbal::detail::throw_invalid("nccl_transport: plan is for rank ", plan.rank, " of ", plan.ranks,
                                   " but this communicator is rank ", rank_, " of ", size_);
    validate_peer_layout(plan);
  }

  ncclComm_t comm_;
  cudaStream_t stream_;
  rank_t rank_ = 0;
  rank_t size_ = 0;
  std::vector<std::byte> host_send_, host_recv_;
  device_bytes dev_send_, dev_recv_;
};

static_assert(reducing_transport<nccl_transport>);

}  // namespace mmbal::transport
