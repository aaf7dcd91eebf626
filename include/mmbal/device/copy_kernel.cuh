#pragma once
/// @file
/// The CUDA kernel that copies variable-size items between device buffers by a copy list
/// (source offset, destination offset, size per item): the pack and unpack steps of the
/// device all-to-all (transport/nccl_pack.cuh). Needs nvcc.
/// @see OrchMLLM §6, docs/DESIGN.md §5.6

#include <mmbal/device/cuda_check.hpp>

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace mmbal::device {

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

}  // namespace detail

/// Launches the copy kernel over `count` items (device arrays `src_off`, `dst_off`, `sizes`)
/// on `stream`. No synchronization.
inline void launch_copy_items(const std::byte* src, std::byte* dst, const std::uint64_t* src_off,
                              const std::uint64_t* dst_off, const std::uint64_t* sizes, std::uint64_t count,
                              cudaStream_t stream, copy_kernel_config config = {}) {
  if (count == 0) return;
  const unsigned blocks = static_cast<unsigned>(count < config.max_blocks ? count : std::uint64_t{config.max_blocks});
  detail::copy_items_kernel<<<blocks, config.threads, 0, stream>>>(src, dst, src_off, dst_off, sizes, count);
  MMBAL_CUDA_CHECK(cudaGetLastError());
}

}  // namespace mmbal::device
