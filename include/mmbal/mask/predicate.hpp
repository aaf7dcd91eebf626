#pragma once
/// @file
/// The Bitfield Attention Mask (BAM) bit layout and its attention predicate, shared by the
/// host code and the CUDA mask kernel (`device/mask_kernel.cuh`). This header includes
/// nothing but `<cstdint>`, so nvcc can compile the predicate for the device.
/// @see Cornstarch §4.3.1 (Bitfield Attention Mask); docs/DESIGN.md §5.3.

#include <cstdint>

#ifndef MMBAL_HOST_DEVICE
#if defined(__CUDACC__)
#define MMBAL_HOST_DEVICE __host__ __device__
#else
#define MMBAL_HOST_DEVICE
#endif
#endif

namespace mmbal {

/// Bit 0: the token is a text token (an LLM query that attends causally).
inline constexpr std::uint64_t text_bit = 1ULL;
/// Bit 62: the causal flag; every text token carries it (Cornstarch's control bit).
inline constexpr std::uint64_t causal_bit = 1ULL << 62;
/// Bit 63: reserved; a mask that sets it is rejected.
inline constexpr std::uint64_t reserved_bit = 1ULL << 63;
/// The control bits, ignored when a text query's bits are intersected with a key's.
inline constexpr std::uint64_t control_bits = causal_bit | reserved_bit;
/// Bits 1..61: one per modality encoder or per modality span.
inline constexpr std::uint64_t modality_bits_mask = ~(text_bit | control_bits);
/// The number of modality bits (1..61).
inline constexpr unsigned max_modality_bits = 61;

/// The bit of modality slot `i` (0-based, i < 61): bit i + 1.
[[nodiscard]] MMBAL_HOST_DEVICE constexpr std::uint64_t modality_bit(unsigned i) noexcept { return 1ULL << (i + 1); }

/// The bitfield attention rule for query q and key k (positions in the packed sequence),
/// given their bit patterns and document ids. Different documents never attend. A text query
/// (bit 0 set) attends iff k <= q and its bits share a non-control bit with the key's; a
/// modality query attends iff the key has exactly its bits (bidirectional within its span or
/// modality). O(1).
/// @see Cornstarch §4.3.1; docs/DESIGN.md §5.3.
[[nodiscard]] MMBAL_HOST_DEVICE constexpr bool bitfield_attends(std::uint64_t q, std::uint64_t k, std::uint64_t bits_q,
                                                                std::uint64_t bits_k, std::uint32_t doc_q,
                                                                std::uint32_t doc_k) noexcept {
  if (doc_q != doc_k) return false;
  if ((bits_q & text_bit) != 0) return k <= q && (bits_q & bits_k & ~control_bits) != 0;
  return bits_k == bits_q;
}

}  // namespace mmbal
