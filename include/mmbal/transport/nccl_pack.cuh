#pragma once
/// @file
/// Packing and unpacking variable-size items by an `alltoall_plan` on the device, and the
/// device all-to-all built from them and `nccl_transport` (pack kernel → grouped
/// ncclSend/ncclRecv → unpack kernel, all on one stream). Needs nvcc: the copy kernel itself
/// is device code and lives in device/copy_kernel.cuh. The copy lists (source offset, destination offset, size per
/// item) come from `transport/plan_copies.hpp`, the host code shared with the loopback and MPI transports and tested
/// there.
/// @see OrchMLLM §6, docs/DESIGN.md §5.6

#include <mmbal/device/copy_kernel.cuh>
#include <mmbal/transport/nccl.hpp>
#include <mmbal/transport/plan_copies.hpp>

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mmbal::transport {

/// Tuning of the copy kernel (device/copy_kernel.cuh).
using copy_kernel_config = device::copy_kernel_config;

namespace detail {

/// The copy list on the device (three u64 arrays), uploaded on the stream.
struct device_copy_list {
  device_bytes storage;
  std::uint64_t count = 0;

  void upload(const copy_list& copies, cudaStream_t stream) {
    count = copies.count();
    const std::size_t bytes = sizeof(std::uint64_t) * count;
    storage.reserve(3 * bytes);
    if (count == 0) return;
    MMBAL_CUDA_CHECK(cudaMemcpyAsync(storage.data(), copies.src.data(), bytes, cudaMemcpyHostToDevice, stream));
    MMBAL_CUDA_CHECK(cudaMemcpyAsync(storage.data() + bytes, copies.dst.data(), bytes, cudaMemcpyHostToDevice, stream));
    MMBAL_CUDA_CHECK(
        cudaMemcpyAsync(storage.data() + 2 * bytes, copies.size.data(), bytes, cudaMemcpyHostToDevice, stream));
  }
  [[nodiscard]] const std::uint64_t* src() const { return reinterpret_cast<const std::uint64_t*>(storage.data()); }
  [[nodiscard]] const std::uint64_t* dst() const { return src() + count; }
  [[nodiscard]] const std::uint64_t* sizes() const { return src() + 2 * count; }
};

}  // namespace detail

/// Launches the copy kernel for a device copy list on `stream`. No synchronization.
inline void launch_copy_items(const std::byte* src, std::byte* dst, const detail::device_copy_list& copies,
                              cudaStream_t stream, copy_kernel_config config = {}) {
  device::launch_copy_items(src, dst, copies.src(), copies.dst(), copies.sizes(), copies.count, stream, config);
}

/// Device-side executor of plans over an `nccl_transport`: packs `send` (this rank's items
/// in slot order, `plan.input_bytes`, device memory) into a staging buffer with the copy
/// kernel, runs the grouped exchange, and unpacks into `recv` (`plan.output_bytes`, device
/// memory). Everything is enqueued on the transport's stream; nothing synchronizes, so the
/// caller can overlap. Staging buffers are kept and grown between calls. Memory per rank:
/// local payload + received payload + O(plan) (docs/DESIGN.md §7).
class nccl_device_executor {
 public:
  explicit nccl_device_executor(nccl_transport& t, copy_kernel_config config = {}) : t_(&t), config_(config) {}

  void all_to_all_device(const alltoall_plan& plan, const std::byte* send, std::byte* recv) {
    pack_list_.upload(pack_copies(plan), t_->stream());
    unpack_list_.upload(unpack_copies(plan), t_->stream());
    send_.reserve(plan.send_bytes);
    recv_.reserve(plan.recv_bytes);
    launch_copy_items(send, send_.data(), pack_list_, t_->stream(), config_);
    t_->exchange_device(plan, send_.data(), recv_.data());
    launch_copy_items(recv_.data(), recv, unpack_list_, t_->stream(), config_);
  }

 private:
  nccl_transport* t_;
  copy_kernel_config config_;
  detail::device_copy_list pack_list_, unpack_list_;
  device_bytes send_, recv_;
};

}  // namespace mmbal::transport
