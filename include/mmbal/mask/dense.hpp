#pragma once
/// @file
/// Dense materialization of a bitfield mask: the whole T × T matrix (tests, small T) or one
/// tile of it (the host reference of the CUDA tile kernel in `device/mask_kernel.cuh`).
/// @see Cornstarch §4.3.1 (blockwise instantiation of the mask).

#include <mmbal/core/error.hpp>
#include <mmbal/mask/bitfield.hpp>

#include <cstdint>
#include <vector>

namespace mmbal {

/// The largest T that `dense_mask` accepts (T² bytes: 1 GiB at the limit).
inline constexpr std::uint32_t dense_mask_max_tokens = 32768;

/// One tile of the mask, row-major: entry (i, j) is 1 iff query q0 + i attends key k0 + j,
/// for i < rows, j < cols; positions at or past T read 0. O(rows · cols).
/// @throws invalid_input if rows · cols exceeds 2^32.
[[nodiscard]] inline std::vector<std::uint8_t> dense_tile(const bitfield_mask& mask, std::uint64_t q0,
                                                          std::uint32_t rows, std::uint64_t k0, std::uint32_t cols) {
  if (std::uint64_t{rows} * cols > (std::uint64_t{1} << 32))
    detail::throw_invalid("dense_tile: ", rows, " x ", cols, " tile is too large");
  std::vector<std::uint8_t> out(std::size_t{rows} * cols, 0);
  const std::uint64_t t = mask.size();
  for (std::uint64_t i = 0; i < rows && q0 + i < t; ++i)
    for (std::uint64_t j = 0; j < cols && k0 + j < t; ++j)
      out[i * cols + j] = mask.attends(static_cast<std::uint32_t>(q0 + i), static_cast<std::uint32_t>(k0 + j)) ? 1 : 0;
  return out;
}

/// The whole mask, row-major T × T (row = query, column = key). O(T²) time and memory.
/// @throws invalid_input if T exceeds `dense_mask_max_tokens` (32,768), naming T.
[[nodiscard]] inline std::vector<std::uint8_t> dense_mask(const bitfield_mask& mask) {
  if (mask.size() > dense_mask_max_tokens)
    detail::throw_invalid("dense_mask: T = ", mask.size(), " exceeds ", dense_mask_max_tokens,
                          " (use block_mask or dense_tile)");
  return dense_tile(mask, 0, mask.size(), 0, mask.size());
}

}  // namespace mmbal
