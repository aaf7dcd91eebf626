#pragma once
/// @file
/// Workloads of a bitfield mask without materializing it: per-token workloads (the number of
/// keys a query attends, Cornstarch's W_i = row sum of the mask), exact per-block areas, and
/// non-empty tile counts.
/// @see Cornstarch §4.3.2 (W_i, the row-wise sum of the attention mask); docs/DESIGN.md §5.3.

#include <mmbal/core/error.hpp>
#include <mmbal/mask/bitfield.hpp>

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace mmbal {

/// The workloads of one run of the mask: token `begin + j` (j < length) attends
/// `first + step · j` keys. Text runs have step 1 (each further causal query sees one more
/// key of its own run), modality runs step 0.
struct workload_run {
  std::uint32_t begin = 0;
  std::uint32_t length = 0;
  std::uint32_t first = 0;
  std::uint32_t step = 0;
  friend bool operator==(const workload_run&, const workload_run&) = default;
};

namespace detail {

/// The distinct bit patterns of one document's runs, sorted, with each run's pattern index.
struct document_patterns {
  std::vector<std::uint64_t> patterns;
  std::vector<std::uint32_t> index_of_run;

  explicit document_patterns(std::span<const bitfield_mask::run> runs) {
    patterns.reserve(runs.size());
    for (const auto& r : runs) patterns.push_back(r.bits);
    std::sort(patterns.begin(), patterns.end());
    patterns.erase(std::unique(patterns.begin(), patterns.end()), patterns.end());
    index_of_run.reserve(runs.size());
    for (const auto& r : runs)
      index_of_run.push_back(
          static_cast<std::uint32_t>(std::lower_bound(patterns.begin(), patterns.end(), r.bits) - patterns.begin()));
  }
};

/// Σ_{j=j0}^{j1-1} (first + step·j) without overflow for any sum that fits 64 bits.
[[nodiscard]] inline std::uint64_t run_sum(const workload_run& w, std::uint64_t j0, std::uint64_t j1) {
  const std::uint64_t n = j1 - j0;
  std::uint64_t s = n * w.first;
  if (w.step != 0 && n > 0) {
    std::uint64_t a = n, b = j0 + j1 - 1;  // Σ j = n (j0 + j1 - 1) / 2; exactly one factor is even
    if (a % 2 == 0)
      a /= 2;
    else
      b /= 2;
    s += a * b;
  }
  return s;
}

}  // namespace detail

/// Per-run workloads of the mask: one `workload_run` per run of `mask.runs()`, in order.
///
/// Per document, keeps a prefix count of every distinct pattern; a text run's first query
/// attends (keys of earlier runs whose pattern shares a non-control bit with it) + 1, a
/// modality run's queries attend all keys of the document with their exact pattern.
/// O(runs · P + P log P) with P the distinct patterns per document; T does not appear.
/// Guarantee: identical to the row sums of the dense mask.
/// @see Cornstarch §4.3.2 (W_i).
[[nodiscard]] inline std::vector<workload_run> workload_runs(const bitfield_mask& mask) {
  std::vector<workload_run> out;
  out.reserve(mask.runs().size());
  std::vector<std::uint64_t> total, prefix;
  for (std::uint32_t d = 0; d < mask.document_count(); ++d) {
    const auto runs = mask.document_runs(d);
    const detail::document_patterns pat(runs);
    const std::size_t p = pat.patterns.size();
    total.assign(p, 0);
    prefix.assign(p, 0);
    for (std::size_t i = 0; i < runs.size(); ++i) total[pat.index_of_run[i]] += runs[i].length;
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const auto& r = runs[i];
      if ((r.bits & text_bit) != 0) {
        std::uint64_t base = 0;
        const std::uint64_t q = r.bits & ~control_bits;
        for (std::size_t j = 0; j < p; ++j)
          if ((pat.patterns[j] & q) != 0) base += prefix[j];
        out.push_back({r.begin, r.length, static_cast<std::uint32_t>(base + 1), 1});
      } else {
        out.push_back({r.begin, r.length, static_cast<std::uint32_t>(total[pat.index_of_run[i]]), 0});
      }
      prefix[pat.index_of_run[i]] += r.length;
    }
  }
  return out;
}

/// Writes per-token workloads from per-run workloads (`workload_runs`) into `out`, whose
/// size is the mask's T (a caller-owned buffer, reusable across steps). O(T).
/// @throws invalid_input if a run reaches past `out.size()`.
inline void fill_token_workloads(std::span<const workload_run> runs, std::span<std::uint32_t> out) {
  for (const workload_run& w : runs) {
    if (std::uint64_t{w.begin} + w.length > out.size())
      detail::throw_invalid("token_workloads: run [", w.begin, ", ", std::uint64_t{w.begin} + w.length,
                            ") exceeds T = ", out.size());
    std::uint32_t* o = out.data() + w.begin;
    if (w.step == 0) {
      std::fill_n(o, w.length, w.first);
    } else {
      for (std::uint32_t j = 0; j < w.length; ++j) o[j] = w.first + j;
    }
  }
}

/// Per-token workloads from per-run workloads (`workload_runs`) of a T-token mask. O(T).
[[nodiscard]] inline std::vector<std::uint32_t> token_workloads(std::span<const workload_run> runs,
                                                                std::uint64_t tokens) {
  std::vector<std::uint32_t> out(tokens);
  fill_token_workloads(runs, out);
  return out;
}

/// Per-token workloads: entry t is the number of keys query t attends (a row sum of the
/// mask; at most T, so it fits 32 bits). O(runs · P + T); the mask is never materialized.
/// @see Cornstarch §4.3.2 (W_i); `workload_runs`.
[[nodiscard]] inline std::vector<std::uint32_t> token_workloads(const bitfield_mask& mask) {
  return token_workloads(workload_runs(mask), mask.size());
}

/// Number of blocks of `block` tokens covering T tokens (the last one may be shorter).
/// @throws invalid_input if B = 0 or there are more than 2^32 − 1 blocks.
[[nodiscard]] inline std::uint32_t block_count(std::uint64_t tokens, std::uint32_t block) {
  if (block == 0) detail::throw_invalid("block size B = 0 (must be at least 1)");
  const std::uint64_t blocks = tokens / block + (tokens % block != 0);
  if (blocks > std::numeric_limits<std::uint32_t>::max())
    detail::throw_invalid("block_count: ", tokens, " tokens in blocks of ", block, " make ", blocks,
                          " blocks, above 2^32 - 1");
  return static_cast<std::uint32_t>(blocks);
}

/// Exact per-block workloads: entry b is the number of attended (q, k) pairs with q in
/// [b·B, min((b+1)·B, T)), i.e. the area of the mask's rows of block b. `block` B defaults
/// to 128. O(runs · P + T / B).
/// @throws invalid_input if B = 0, there are more than 2^32 − 1 blocks, or a run reaches past T.
/// @see Cornstarch §4.3.2 (token distribution by blocks of workloads).
[[nodiscard]] inline std::vector<std::uint64_t> block_workloads(std::span<const workload_run> runs,
                                                                std::uint64_t tokens, std::uint32_t block = 128) {
  std::vector<std::uint64_t> out(block_count(tokens, block), 0);
  for (const workload_run& w : runs) {
    if (std::uint64_t{w.begin} + w.length > tokens)
      detail::throw_invalid("block_workloads: run [", w.begin, ", ", std::uint64_t{w.begin} + w.length,
                            ") exceeds T = ", tokens);
    std::uint64_t t = w.begin;
    const std::uint64_t end = std::uint64_t{w.begin} + w.length;
    while (t < end) {
      const std::uint64_t b = t / block;
      const std::uint64_t stop = std::min(end, (b + 1) * block);
      out[b] += detail::run_sum(w, t - w.begin, stop - w.begin);
      t = stop;
    }
  }
  return out;
}

/// Exact per-block workloads of a mask (see the overload on runs). O(runs · P + T / B).
/// @throws invalid_input if B = 0.
[[nodiscard]] inline std::vector<std::uint64_t> block_workloads(const bitfield_mask& mask, std::uint32_t block = 128) {
  if (block == 0) detail::throw_invalid("block size B = 0 (must be at least 1)");
  return block_workloads(workload_runs(mask), mask.size(), block);
}

/// Per-block workloads from per-token workloads (sums over blocks of B tokens). O(T).
/// @throws invalid_input if B = 0.
[[nodiscard]] inline std::vector<std::uint64_t> block_workloads(std::span<const std::uint32_t> token_workloads,
                                                                std::uint32_t block = 128) {
  std::vector<std::uint64_t> out(block_count(token_workloads.size(), block), 0);
  for (std::size_t b = 0; b < out.size(); ++b) {
    const std::size_t end = std::min(token_workloads.size(), (b + 1) * std::size_t{block});
    std::uint64_t s = 0;
    for (std::size_t t = b * block; t < end; ++t) s += token_workloads[t];
    out[b] = s;
  }
  return out;
}

/// Total area of the mask: the number of attended (q, k) pairs (< 2^64 since T < 2^32).
/// O(runs · P).
[[nodiscard]] inline std::uint64_t total_area(const bitfield_mask& mask) {
  std::uint64_t s = 0;
  for (const workload_run& w : workload_runs(mask)) s += detail::run_sum(w, 0, w.length);
  return s;
}

/// The tile shape of an attention kernel: tiles of `rows` queries × `cols` keys (defaults
/// 128 × 32, a FlashAttention-style tile). A kernel that skips empty tiles costs in
/// proportion to the non-empty ones.
struct tile_shape {
  std::uint32_t rows = 128;
  std::uint32_t cols = 32;
};

namespace detail {

/// The keys attended by at least one query of [q0, q1), as sorted disjoint half-open
/// intervals. O(R · runs per document + I log I) for R runs meeting [q0, q1), I intervals.
inline void attended_key_union(const bitfield_mask& mask, std::uint32_t q0, std::uint32_t q1,
                               std::vector<std::pair<std::uint32_t, std::uint32_t>>& out) {
  out.clear();
  const auto runs = mask.runs();
  // first run ending after q0
  auto it = std::upper_bound(runs.begin(), runs.end(), q0,
                             [](std::uint32_t q, const bitfield_mask::run& r) { return q < r.begin + r.length; });
  for (; it != runs.end() && it->begin < q1; ++it) {
    const auto& r = *it;
    const auto doc = mask.document_runs(r.document);
    const std::uint32_t last = std::min(q1, r.begin + r.length);  // one past the last query of this run
    if ((r.bits & text_bit) != 0) {
      const std::uint64_t q = r.bits & ~control_bits;
      for (const auto& k : doc) {
        if (k.begin >= r.begin) break;
        if ((k.bits & q) != 0) out.emplace_back(k.begin, k.begin + k.length);
      }
      out.emplace_back(r.begin, last);
    } else {
      for (const auto& k : doc)
        if (k.bits == r.bits) out.emplace_back(k.begin, k.begin + k.length);
    }
  }
  std::sort(out.begin(), out.end());
  std::size_t m = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (m > 0 && out[i].first <= out[m - 1].second)
      out[m - 1].second = std::max(out[m - 1].second, out[i].second);
    else
      out[m++] = out[i];
  }
  out.resize(m);
}

}  // namespace detail

/// Non-empty tile counts per block: entry b is the number of (q-tile × k-tile) tiles with at
/// least one attended pair, over the rows of block b (B = `block`, default 128) cut into
/// q-tiles of `tile.rows` rows (the last one of a block may be shorter), and keys cut into
/// k-tiles of `tile.cols` from token 0. O(q-tiles · R · runs per document + intervals log).
/// @throws invalid_input if B, tile.rows or tile.cols is 0.
[[nodiscard]] inline std::vector<std::uint64_t> block_tile_counts(const bitfield_mask& mask, std::uint32_t block = 128,
                                                                  tile_shape tile = {}) {
  if (tile.rows == 0 || tile.cols == 0)
    detail::throw_invalid("tile shape ", tile.rows, " x ", tile.cols, " has a zero side");
  std::vector<std::uint64_t> out(block_count(mask.size(), block), 0);
  std::vector<std::pair<std::uint32_t, std::uint32_t>> keys;
  for (std::uint32_t b = 0; b < out.size(); ++b) {
    const std::uint32_t block_end =
        static_cast<std::uint32_t>(std::min<std::uint64_t>(mask.size(), (std::uint64_t{b} + 1) * block));
    for (std::uint64_t q0 = std::uint64_t{b} * block; q0 < block_end; q0 += tile.rows) {
      const auto q1 = static_cast<std::uint32_t>(std::min<std::uint64_t>(block_end, q0 + tile.rows));
      detail::attended_key_union(mask, static_cast<std::uint32_t>(q0), q1, keys);
      std::uint64_t counted_up_to = 0;  // tiles [0, counted_up_to) are already counted
      for (const auto& [k0, k1] : keys) {
        const std::uint64_t first = std::max<std::uint64_t>(k0 / tile.cols, counted_up_to);
        const std::uint64_t last = (std::uint64_t{k1} - 1) / tile.cols + 1;
        if (last > first) out[b] += last - first;
        counted_up_to = std::max(counted_up_to, last);
      }
    }
  }
  return out;
}

}  // namespace mmbal
