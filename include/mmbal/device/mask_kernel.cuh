#pragma once
/// @file
/// CUDA materialization of one tile of the bitfield attention mask on the device, from the
/// per-token bits and document ids (Cornstarch's blockwise mask instantiation: the T × T mask
/// never exists, an attention kernel asks for the (q-block × k-block) tile it computes).
/// Needs nvcc and the CUDA runtime (no NCCL); lives in `device/`, the one place for device code
/// that is not part of a transport. The predicate is the host's
/// (`mask/predicate.hpp`, compiled for both sides); the host reference is `dense_tile`
/// (`mask/dense.hpp`), tested in tests/mask.
/// @see Cornstarch §4.3.1; docs/DESIGN.md §5.3, §5.6.

#include <mmbal/core/error.hpp>
#include <mmbal/device/cuda_check.hpp>
#include <mmbal/mask/bitfield.hpp>
#include <mmbal/mask/predicate.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mmbal::device {

/// A bitfield mask resident on the device: `tokens` entries of `bits` and `documents`.
struct device_mask_view {
  const std::uint64_t* bits = nullptr;
  const std::uint32_t* documents = nullptr;
  std::uint32_t tokens = 0;
};

/// Threads per block of the tile kernel (a 32 × 8 block: a warp spans 32 consecutive keys of
/// one row, so stores are coalesced).
struct mask_tile_config {
  unsigned threads_x = 32;
  unsigned threads_y = 8;
};

namespace detail {

/// out[i · cols + j] = 1 iff query q0 + i attends key k0 + j (0 past the sequence end).
/// Grid-stride in both dimensions, so any grid covers any tile.
__global__ void mask_tile_kernel(device_mask_view m, std::uint64_t q0, std::uint32_t rows, std::uint64_t k0,
                                 std::uint32_t cols, std::uint8_t* __restrict__ out) {
  for (std::uint32_t i = blockIdx.y * blockDim.y + threadIdx.y; i < rows; i += gridDim.y * blockDim.y) {
    const std::uint64_t q = q0 + i;
    const bool q_in = q < m.tokens;
    const std::uint64_t bq = q_in ? m.bits[q] : 0;
    const std::uint32_t dq = q_in ? m.documents[q] : 0;
    for (std::uint32_t j = blockIdx.x * blockDim.x + threadIdx.x; j < cols; j += gridDim.x * blockDim.x) {
      const std::uint64_t k = k0 + j;
      std::uint8_t v = 0;
      if (q_in && k < m.tokens) v = bitfield_attends(q, k, bq, m.bits[k], dq, m.documents[k]) ? 1 : 0;
      out[std::size_t{i} * cols + j] = v;
    }
  }
}

/// A device allocation freed on destruction.
template <class T>
class device_array {
 public:
  explicit device_array(std::size_t n) : n_(n) {
    if (n > 0) MMBAL_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T)));
  }
  ~device_array() {
    if (p_ != nullptr) cudaFree(p_);
  }
  device_array(const device_array&) = delete;
  device_array& operator=(const device_array&) = delete;
  [[nodiscard]] T* data() const noexcept { return p_; }
  [[nodiscard]] std::size_t size() const noexcept { return n_; }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

}  // namespace detail

/// Launches the tile kernel on `stream`: `out` (device, rows · cols bytes, row-major) gets
/// the tile of queries [q0, q0 + rows) × keys [k0, k0 + cols); entries past the sequence end
/// are 0. Asynchronous; O(rows · cols) work. Equals `dense_tile(mask, q0, rows, k0, cols)`.
/// @throws runtime_failure if the launch fails.
inline void launch_mask_tile(device_mask_view m, std::uint64_t q0, std::uint32_t rows, std::uint64_t k0,
                             std::uint32_t cols, std::uint8_t* out, cudaStream_t stream = nullptr,
                             mask_tile_config config = {}) {
  if (rows == 0 || cols == 0) return;
  const unsigned gx =
      static_cast<unsigned>(std::min<std::uint64_t>((cols + config.threads_x - 1) / config.threads_x, 65535));
  const unsigned gy =
      static_cast<unsigned>(std::min<std::uint64_t>((rows + config.threads_y - 1) / config.threads_y, 65535));
  detail::mask_tile_kernel<<<dim3(gx, gy), dim3(config.threads_x, config.threads_y), 0, stream>>>(m, q0, rows, k0, cols,
                                                                                                  out);
  MMBAL_CUDA_CHECK(cudaGetLastError());
}

/// Host convenience: uploads the mask, materializes the tile on the current device and
/// returns it (synchronous). For repeated tiles keep the mask on the device and call
/// `launch_mask_tile`.
/// @throws runtime_failure on any CUDA error.
[[nodiscard]] inline std::vector<std::uint8_t> mask_tile_on_device(const bitfield_mask& mask, std::uint64_t q0,
                                                                   std::uint32_t rows, std::uint64_t k0,
                                                                   std::uint32_t cols) {
  detail::device_array<std::uint64_t> bits(mask.size());
  detail::device_array<std::uint32_t> docs(mask.size());
  detail::device_array<std::uint8_t> out(std::size_t{rows} * cols);
  if (mask.size() > 0) {
    MMBAL_CUDA_CHECK(
        cudaMemcpy(bits.data(), mask.bits().data(), mask.size() * sizeof(std::uint64_t), cudaMemcpyHostToDevice));
    MMBAL_CUDA_CHECK(
        cudaMemcpy(docs.data(), mask.documents().data(), mask.size() * sizeof(std::uint32_t), cudaMemcpyHostToDevice));
  }
  launch_mask_tile({bits.data(), docs.data(), mask.size()}, q0, rows, k0, cols, out.data());
  std::vector<std::uint8_t> host(out.size());
  if (!host.empty()) MMBAL_CUDA_CHECK(cudaMemcpy(host.data(), out.data(), host.size(), cudaMemcpyDeviceToHost));
  MMBAL_CUDA_CHECK(cudaDeviceSynchronize());
  return host;
}

}  // namespace mmbal::device
