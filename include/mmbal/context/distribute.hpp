#pragma once
/// @file
/// Token distribution for context parallelism: blocks of B consecutive tokens (default 128)
/// are dealt to the G ranks of a CP group, by workload (LPT), zigzag, contiguously (naive
/// ring attention) or at random.
/// @see Cornstarch §4.3.2 (workload-balanced token distribution), §5.3 (random, ring, zigzag);
/// docs/DESIGN.md §5.4.

#include <mmbal/core/concepts.hpp>
#include <mmbal/core/detail/least_loaded.hpp>
#include <mmbal/core/detail/order.hpp>
#include <mmbal/core/error.hpp>
#include <mmbal/core/rng.hpp>
#include <mmbal/core/types.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace mmbal {

namespace detail {

inline void check_ranks(rank_t ranks) { (void)checked_ranks(ranks, "context parallel group size G"); }

inline void check_block_count(std::size_t blocks) {
  if (blocks > std::numeric_limits<std::uint32_t>::max()) throw_invalid(blocks, " blocks exceed 2^32 - 1");
}

}  // namespace detail

/// Workload-balanced distribution (Cornstarch's greedy makespan minimization): blocks in
/// descending workload (ties: lower block index first) each go to the rank with the least
/// workload so far (ties: lower rank). The library's one LPT core: the block order is
/// `detail::descending_order` (a radix sort), the placement `detail::deal_least_loaded_*`
/// (core/detail/least_loaded.hpp, also balance::lpt's), exact u64 loads. O(n · passes +
/// n log G). Guarantee (Graham): max ≤ Σ/G + max block, and ≤ (4/3 − 1/(3G)) · optimum.
/// Throws `invalid_input` when the blocks' total workload exceeds 2⁶⁴ − 1 (a load would wrap).
/// @see Cornstarch §4.3.2, appendix A.
struct lpt_distributor {
  [[nodiscard]] std::vector<rank_t> operator()(std::span<const std::uint64_t> w, rank_t ranks) const {
    detail::check_ranks(ranks);
    detail::check_block_count(w.size());
    const std::vector<std::uint32_t> order = detail::descending_order(w);
    std::vector<rank_t> out(w.size());
    auto add = [&](std::size_t k) { return w[order[k]]; };
    auto place = [&](std::size_t k, rank_t r) { out[order[k]] = r; };
    std::uint64_t total = 0;
    for (const std::uint64_t x : w)
      total = detail::checked_add(total, x, "lpt_distributor: the blocks' total workload");
    if (detail::fits_packed(total, ranks))
      detail::deal_least_loaded_packed(order.size(), ranks, add, place);
    else  // loads as plain u64 words beside the rank
      detail::deal_least_loaded_wide(
          order.size(), ranks, [&](std::size_t k, std::uint64_t load) { return load + add(k); }, place);
    return out;
  }
};

/// Zigzag distribution (the causal load-balancing baseline): the n blocks are cut into 2G
/// chunks, chunk c = blocks [⌊c·n/(2G)⌋, ⌊(c+1)·n/(2G)⌋), and rank i takes chunks i and
/// 2G − 1 − i. O(n).
/// @see Cornstarch §5.3 (zigzag [13]).
struct zigzag_distributor {
  [[nodiscard]] std::vector<rank_t> operator()(std::span<const std::uint64_t> w, rank_t ranks) const {
    detail::check_ranks(ranks);
    detail::check_block_count(w.size());
    const std::uint64_t n = w.size(), chunks = 2 * std::uint64_t{ranks};
    std::vector<rank_t> out(n);
    for (std::uint64_t c = 0; c < chunks; ++c) {
      const auto r = static_cast<rank_t>(c < ranks ? c : chunks - 1 - c);
      for (std::uint64_t b = c * n / chunks; b < (c + 1) * n / chunks; ++b) out[b] = r;
    }
    return out;
  }
};

/// Contiguous distribution (naive ring attention): rank r takes blocks
/// [⌊r·n/G⌋, ⌊(r+1)·n/G⌋). O(n).
/// @see Cornstarch §5.3 (ring attention [32]).
struct contiguous_distributor {
  [[nodiscard]] std::vector<rank_t> operator()(std::span<const std::uint64_t> w, rank_t ranks) const {
    detail::check_ranks(ranks);
    detail::check_block_count(w.size());
    const std::uint64_t n = w.size();
    std::vector<rank_t> out(n);
    for (rank_t r = 0; r < ranks; ++r)
      for (std::uint64_t b = r * n / ranks; b < (std::uint64_t{r} + 1) * n / ranks; ++b) out[b] = r;
    return out;
  }
};

/// Random distribution: the blocks are shuffled (portable Fisher–Yates seeded by `seed`) and
/// dealt round robin, so every rank gets ⌊n/G⌋ or ⌈n/G⌉ blocks. O(n).
/// @see Cornstarch §5.3 (random distribution).
struct random_distributor {
  std::uint64_t seed = 0;  ///< default 0; the same seed gives the same distribution everywhere

  [[nodiscard]] std::vector<rank_t> operator()(std::span<const std::uint64_t> w, rank_t ranks) const {
    detail::check_ranks(ranks);
    detail::check_block_count(w.size());
    std::vector<std::uint32_t> perm(w.size());
    std::iota(perm.begin(), perm.end(), 0u);
    rng_engine g = make_rng(seed, 0x5eed'c0de);
    shuffle(std::span<std::uint32_t>(perm), g);
    std::vector<rank_t> out(w.size());
    for (std::size_t j = 0; j < perm.size(); ++j) out[perm[j]] = static_cast<rank_t>(j % ranks);
    return out;
  }
};

static_assert(token_distributor<lpt_distributor>);
static_assert(token_distributor<zigzag_distributor>);
static_assert(token_distributor<contiguous_distributor>);
static_assert(token_distributor<random_distributor>);

/// The result of distributing T tokens in blocks of B over G ranks.
struct token_distribution {
  std::uint64_t tokens = 0;                              ///< T
  std::uint32_t block = 128;                             ///< B
  rank_t ranks = 0;                                      ///< G
  std::vector<rank_t> rank_of_block;                     ///< block b = tokens [b·B, min((b+1)·B, T))
  std::vector<std::vector<std::uint64_t>> rank_offsets;  ///< per rank: first token of each of its blocks, ascending
  std::vector<std::uint64_t> rank_tokens;                ///< per rank: tokens held
  std::vector<std::uint64_t> rank_workloads;             ///< per rank: Σ workloads of its blocks
  std::uint64_t total_workload = 0;                      ///< Σ block workloads (the mask's area)

  /// Largest per-rank workload.
  [[nodiscard]] std::uint64_t max_workload() const {
    return rank_workloads.empty() ? 0 : *std::max_element(rank_workloads.begin(), rank_workloads.end());
  }
  /// Mean per-rank workload (total / G).
  [[nodiscard]] double mean_workload() const { return ranks == 0 ? 0.0 : static_cast<double>(total_workload) / ranks; }
  /// max / mean (1 = perfectly balanced; 1 when the total is 0).
  [[nodiscard]] double max_over_mean() const {
    return total_workload == 0 ? 1.0 : static_cast<double>(max_workload()) / mean_workload();
  }
  /// The token positions rank r holds, ascending. O(tokens of r).
  [[nodiscard]] std::vector<std::uint64_t> token_indices(rank_t r) const {
    if (r >= rank_tokens.size() || r >= rank_offsets.size())
      mmbal::detail::throw_invalid("token_distribution: rank ", r, " >= ranks ", rank_offsets.size());
    std::vector<std::uint64_t> out;
    out.reserve(rank_tokens[r]);
    for (std::uint64_t o : rank_offsets[r])
      for (std::uint64_t t = o; t < std::min(tokens, o + block); ++t) out.push_back(t);
    return out;
  }
};

/// Distributes T = `tokens` tokens in blocks of `block` tokens whose workloads are
/// `block_workloads` (one per block, e.g. `block_workloads(mask, block)`) over `ranks` ranks
/// with distributor `d`. O(distributor + n + G).
/// @throws invalid_input if G = 0 or above `max_ranks`, B = 0, the block count does not match
/// ⌈T/B⌉, the block workloads sum to more than 2^64 − 1, or the distributor returns a rank ≥ G
/// or a wrong size.
/// @see Cornstarch §4.3.2.
template <token_distributor D>
[[nodiscard]] token_distribution distribute_tokens(std::span<const std::uint64_t> block_workloads, std::uint64_t tokens,
                                                   std::uint32_t block, rank_t ranks, const D& d) {
  detail::check_ranks(ranks);
  if (block == 0) detail::throw_invalid("block size B = 0 (must be at least 1)");
  const std::uint64_t n = tokens / block + (tokens % block != 0);  // ⌈T/B⌉ without overflow near 2^64
  if (block_workloads.size() != n)
    detail::throw_invalid("distribute_tokens: ", block_workloads.size(), " block workloads for ", tokens,
                          " tokens in blocks of ", block, " (expected ", n, ")");
  token_distribution out;
  for (std::uint64_t b = 0; b < n; ++b) {  // before the distributor, whose loads would wrap too
    if (block_workloads[b] > std::numeric_limits<std::uint64_t>::max() - out.total_workload)
      detail::throw_invalid("distribute_tokens: the block workloads sum to more than 2^64 - 1 (block ", b, " adds ",
                            block_workloads[b], " to ", out.total_workload, ")");
    out.total_workload += block_workloads[b];
  }
  out.tokens = tokens;
  out.block = block;
  out.ranks = ranks;
  out.rank_of_block = d(block_workloads, ranks);
  if (out.rank_of_block.size() != n)
    detail::throw_invalid("distribute_tokens: the distributor returned ", out.rank_of_block.size(), " ranks for ", n,
                          " blocks");
  out.rank_offsets.resize(ranks);
  out.rank_tokens.assign(ranks, 0);
  out.rank_workloads.assign(ranks, 0);
  std::vector<std::uint64_t> count(ranks, 0);
  for (rank_t r : out.rank_of_block) {
    if (r >= ranks) detail::throw_invalid("distribute_tokens: the distributor returned rank ", r, " >= G = ", ranks);
    ++count[r];
  }
  for (rank_t r = 0; r < ranks; ++r) out.rank_offsets[r].reserve(count[r]);
  for (std::uint64_t b = 0; b < n; ++b) {  // ascending b: offsets come out sorted
    const rank_t r = out.rank_of_block[b];
    out.rank_offsets[r].push_back(b * block);
    out.rank_tokens[r] += std::min<std::uint64_t>(block, tokens - b * block);
    out.rank_workloads[r] += block_workloads[b];  // <= the total, checked above: no overflow
  }
  return out;
}

}  // namespace mmbal
