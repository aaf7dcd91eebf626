#pragma once
/// @file
/// A block-sparse view of a bitfield mask in FlexAttention's `BlockMask` layout: per query
/// block, the key blocks that need the mask applied (partial) and those computed without it
/// (full); empty block pairs are skipped by the kernel.
/// @see Cornstarch §4.3.1 (blockwise mask instantiation); PyTorch FlexAttention `BlockMask`.

#include <mmbal/core/error.hpp>
#include <mmbal/mask/bitfield.hpp>
#include <mmbal/mask/workloads.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace mmbal {

/// How a (query block, key block) pair of the mask looks.
enum class block_kind : std::uint8_t {
  empty,    ///< no attended pair: skipped
  partial,  ///< some pairs attended: the kernel applies the mask
  full,     ///< every pair attended: the kernel skips the mask
};

/// A block mask in FlexAttention's layout (for one batch element and head). Query blocks have
/// `q_block_size` rows, key blocks `kv_block_size` columns; the last of each may be shorter
/// (T need not be a multiple) and "full" means every pair inside the clipped block attends.
/// `kv_indices` and `full_kv_indices` are `num_q_blocks × num_kv_blocks` row-major: row i
/// lists, ascending, the `kv_num_blocks[i]` partial (resp. `full_kv_num_blocks[i]` full) key
/// blocks of query block i, padded with 0. Memory: 16 · num_q_blocks · num_kv_blocks bytes.
struct block_mask {
  std::uint32_t q_block_size = 128;
  std::uint32_t kv_block_size = 128;
  std::uint32_t num_q_blocks = 0;
  std::uint32_t num_kv_blocks = 0;
  std::vector<std::uint32_t> kv_num_blocks;
  std::vector<std::uint32_t> kv_indices;
  std::vector<std::uint32_t> full_kv_num_blocks;
  std::vector<std::uint32_t> full_kv_indices;
  /// The transpose, as FlexAttention keeps it for the backward pass: `q_indices` and
  /// `full_q_indices` are `num_kv_blocks × num_q_blocks` row-major; row j lists, ascending,
  /// the `q_num_blocks[j]` query blocks for which key block j is partial (resp. full).
  std::vector<std::uint32_t> q_num_blocks;
  std::vector<std::uint32_t> q_indices;
  std::vector<std::uint32_t> full_q_num_blocks;
  std::vector<std::uint32_t> full_q_indices;

  /// The kind of the pair (query block qb, key block kb). O(num_kv_blocks).
  [[nodiscard]] block_kind kind(std::uint32_t qb, std::uint32_t kb) const {
    if (qb >= full_kv_num_blocks.size() || qb >= kv_num_blocks.size())
      detail::throw_invalid("block_mask: query block ", qb, " >= ", kv_num_blocks.size(), " query blocks");
    const std::size_t row = std::size_t{qb} * num_kv_blocks;
    for (std::uint32_t i = 0; i < full_kv_num_blocks[qb]; ++i)
      if (full_kv_indices[row + i] == kb) return block_kind::full;
    for (std::uint32_t i = 0; i < kv_num_blocks[qb]; ++i)
      if (kv_indices[row + i] == kb) return block_kind::partial;
    return block_kind::empty;
  }
};

namespace detail {

/// Σ_{u=u0}^{u1} clamp(u, 0, w), for w >= 0.
[[nodiscard]] inline std::int64_t clamped_sum(std::int64_t u0, std::int64_t u1, std::int64_t w) {
  std::int64_t s = 0;
  const std::int64_t lo = std::max<std::int64_t>(u0, 1), hi = std::min(u1, w);
  if (lo <= hi) s += (lo + hi) * (hi - lo + 1) / 2;
  const std::int64_t over = u1 - std::max(u0, w + 1) + 1;
  if (over > 0) s += over * w;
  return s;
}

}  // namespace detail

/// The most (query block, key block) cells a block mask may have: 2^28, i.e. 4 GiB in its four
/// padded index arrays (16 bytes a cell). FlexAttention's default 128 × 128 blocks reach it at
/// T = 2 M tokens; smaller blocks on long sequences ask for more memory than the mask is worth
/// (1-token blocks at T = 46 K would take 32 GiB).
inline constexpr std::uint64_t max_block_mask_cells = std::uint64_t{1} << 28;

/// Builds the FlexAttention block mask of `mask` with query blocks of `q_block` and key
/// blocks of `kv_block` tokens (defaults 128, FlexAttention's). Per query block it counts the
/// attended pairs of every key block from the runs (no dense mask): a pair is empty at 0,
/// full at rows · cols, partial otherwise.
/// O(num_q_blocks · (num_kv_blocks + R · runs per document)), R = runs meeting a block.
/// Guarantee: `kind(qb, kb)` equals the classification of the dense mask's block.
/// @throws invalid_input if a block size is 0 or num_q_blocks · num_kv_blocks exceeds
/// `max_block_mask_cells`.
[[nodiscard]] inline block_mask make_block_mask(const bitfield_mask& mask, std::uint32_t q_block = 128,
                                                std::uint32_t kv_block = 128) {
  if (q_block == 0 || kv_block == 0)
    detail::throw_invalid("make_block_mask: block sizes ", q_block, " x ", kv_block, " (must be at least 1)");
  block_mask out;
  out.q_block_size = q_block;
  out.kv_block_size = kv_block;
  out.num_q_blocks = block_count(mask.size(), q_block);
  out.num_kv_blocks = block_count(mask.size(), kv_block);
  const std::uint64_t cells = std::uint64_t{out.num_q_blocks} * out.num_kv_blocks;
  if (cells > max_block_mask_cells)
    detail::throw_invalid("make_block_mask: ", out.num_q_blocks, " x ", out.num_kv_blocks, " blocks of ", q_block,
                          " x ", kv_block, " tokens exceed 2^28 cells (4 GiB in the padded layout; use larger blocks)");
  out.kv_num_blocks.assign(out.num_q_blocks, 0);
  out.full_kv_num_blocks.assign(out.num_q_blocks, 0);
  out.kv_indices.assign(cells, 0);
  out.full_kv_indices.assign(cells, 0);

  const std::int64_t t = mask.size();
  const std::int64_t kb_size = kv_block;
  std::vector<std::int64_t> area(out.num_kv_blocks);
  const auto runs = mask.runs();
  auto add_fixed = [&](std::int64_t s, std::int64_t e, std::int64_t rows) {
    for (std::int64_t kb = s / kb_size; kb * kb_size < e; ++kb)
      area[kb] += rows * (std::min(e, (kb + 1) * kb_size) - std::max(s, kb * kb_size));
  };
  std::size_t first_run = 0;
  for (std::uint32_t qb = 0; qb < out.num_q_blocks; ++qb) {
    std::fill(area.begin(), area.end(), 0);
    const std::int64_t q0 = std::int64_t{qb} * q_block, q1 = std::min(t, q0 + q_block);
    while (runs[first_run].begin + runs[first_run].length <= q0) ++first_run;
    for (std::size_t ri = first_run; ri < runs.size() && runs[ri].begin < q1; ++ri) {
      const auto& r = runs[ri];
      const std::int64_t a = std::max<std::int64_t>(q0, r.begin);
      const std::int64_t b = std::min<std::int64_t>(q1, std::int64_t{r.begin} + r.length);
      const auto doc = mask.document_runs(r.document);
      if ((r.bits & text_bit) != 0) {
        const std::uint64_t q = r.bits & ~control_bits;
        for (const auto& k : doc) {
          if (k.begin >= r.begin) break;
          if ((k.bits & q) != 0) add_fixed(k.begin, std::int64_t{k.begin} + k.length, b - a);
        }
        // query x in [a, b) attends [r.begin, x + 1) of its own run
        for (std::int64_t kb = r.begin / kb_size; kb * kb_size < b; ++kb) {
          const std::int64_t lo = std::max<std::int64_t>(r.begin, kb * kb_size);
          const std::int64_t w = std::min(t, (kb + 1) * kb_size) - lo;
          area[kb] += detail::clamped_sum(a + 1 - lo, b - lo, w);
        }
      } else {
        for (const auto& k : doc)
          if (k.bits == r.bits) add_fixed(k.begin, std::int64_t{k.begin} + k.length, b - a);
      }
    }
    const std::size_t row = std::size_t{qb} * out.num_kv_blocks;
    for (std::uint32_t kb = 0; kb < out.num_kv_blocks; ++kb) {
      if (area[kb] == 0) continue;
      const std::int64_t cols = std::min(t, (std::int64_t{kb} + 1) * kb_size) - std::int64_t{kb} * kb_size;
      if (area[kb] == (q1 - q0) * cols)
        out.full_kv_indices[row + out.full_kv_num_blocks[qb]++] = kb;
      else
        out.kv_indices[row + out.kv_num_blocks[qb]++] = kb;
    }
  }
  // transpose (ascending query blocks per key block, since qb ascends)
  out.q_num_blocks.assign(out.num_kv_blocks, 0);
  out.full_q_num_blocks.assign(out.num_kv_blocks, 0);
  out.q_indices.assign(cells, 0);
  out.full_q_indices.assign(cells, 0);
  for (std::uint32_t qb = 0; qb < out.num_q_blocks; ++qb) {
    const std::size_t row = std::size_t{qb} * out.num_kv_blocks;
    for (std::uint32_t i = 0; i < out.kv_num_blocks[qb]; ++i) {
      const std::uint32_t kb = out.kv_indices[row + i];
      out.q_indices[std::size_t{kb} * out.num_q_blocks + out.q_num_blocks[kb]++] = qb;
    }
    for (std::uint32_t i = 0; i < out.full_kv_num_blocks[qb]; ++i) {
      const std::uint32_t kb = out.full_kv_indices[row + i];
      out.full_q_indices[std::size_t{kb} * out.num_q_blocks + out.full_q_num_blocks[kb]++] = qb;
    }
  }
  return out;
}

}  // namespace mmbal
