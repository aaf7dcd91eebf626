#pragma once
/// @file
/// CUDA gather/scatter kernels that pack and unpack variable-size items by an
/// `alltoall_plan`, and the device all-to-all built from them and `nccl_transport`
/// (pack kernel → grouped ncclSend/ncclRecv → unpack kernel, all on one stream).
/// Needs nvcc. The copy lists (source offset, destination offset, size per item) come from
/// `transport/plan_copies.hpp`, the host code shared with the loopback and MPI transports
/// and tested there.
/// @see OrchMLLM §6, docs/DESIGN.md §5.6

#include <mmbal/transport/nccl.hpp>
#include <mmbal/transport/plan_copies.hpp>

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mmbal::transport {

/// Tuning of the copy kernel. Defaults: 256 threads per block, at most 65,535 blocks (the
/// kernel strides over items when there are more).
struct copy_kernel_config {
  unsigned threads = 256;
  unsigned max_blocks = 65535;
};

namespace detail {

/// One block per item (grid-stride over items): the block's threads copy the item's bytes.
/// When source, destination and size allow it, 16-byte vector loads/stores carry the bulk
/// and single bytes the rest, so unaligned items are still correct.
__global__ void copy_items_kernel(const std::byte* __restrict__ src, std::byte* __restrict__ dst,
                                  const std::uint64_t* __restrict__ src_off, const std::uint64_t* __restrict__ dst_off,
                                  const std::uint64_t* __restrict__ sizes, std::uint64_t items) {
  for (std::uint64_t i = blockIdx.x; i < items; i += gridDim.x) {
    const std::byte* s = src + src_off[i];
    std::byte* d = dst + dst_off[i];
    const std::uint64_t n = sizes[i];
    std::uint64_t head = 0;
    if (((reinterpret_cast<std::uintptr_t>(s) | reinterpret_cast<std::uintptr_t>(d)) & 15u) == 0) {
      const std::uint64_t vectors = n / 16;
      const auto* s4 = reinterpret_cast<const uint4*>(s);
      auto* d4 = reinterpret_cast<uint4*>(d);
      for (std::uint64_t k = threadIdx.x; k < vectors; k += blockDim.x) d4[k] = s4[k];
      head = vectors * 16;
    }
    for (std::uint64_t k = head + threadIdx.x; k < n; k += blockDim.x) d[k] = s[k];
  }
}

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
  if (copies.count == 0) return;
  const unsigned blocks =
      static_cast<unsigned>(copies.count < config.max_blocks ? copies.count : std::uint64_t{config.max_blocks});
  detail::copy_items_kernel<<<blocks, config.threads, 0, stream>>>(src, dst, copies.src(), copies.dst(), copies.sizes(),
                                                                   copies.count);
  MMBAL_CUDA_CHECK(cudaGetLastError());
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
