#pragma once
/// @file
/// Node-wise relabeling (docs/DESIGN.md §5.5): a balancing algorithm decides which items form new
/// batch j (the destination ranks of a rearrangement); which RANK receives batch j is free —
/// permuting batches over ranks permutes the loads and leaves balance unchanged. Choose the
/// permutation that minimizes the maximum per-rank inter-node volume, which bounds the time of
/// the all-to-all on clusters whose inter-node links are much slower than intra-node ones.
/// @see OrchMLLM §5.2.2, eq. (5), Algorithm 3 (the paper solves it as an ILP with CBC).

#include <mmbal/core/detail/node_map.hpp>
#include <mmbal/core/error.hpp>
#include <mmbal/core/rng.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/rearrange/rearrangement.hpp>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace mmbal {

/// Per-rank inter-node volume of executing `r` with `item_bytes[i]` bytes for item i: for
/// every item whose source and destination ranks lie on different nodes (node = rank /
/// ranks_per_node), its bytes count for the SENDING rank and for the RECEIVING rank. So
/// volume[q] = bytes q sends to other nodes + bytes q receives from other nodes; intra-node
/// moves and self sends count zero. `ranks_per_node = 0` means one node (all zero). The last
/// node may be partial when ranks_per_node does not divide ranks. Throws on size mismatch. O(n + ranks).
/// @see OrchMLLM eq. (5) (which counts one direction; both directions share each rank's link).
[[nodiscard]] inline std::vector<std::uint64_t> inter_node_volume(const rearrangement& r,
                                                                  std::span<const std::uint64_t> item_bytes,
                                                                  rank_t ranks_per_node) {
  if (item_bytes.size() != r.size() || r.destination.size() != r.size())
    detail::throw_invalid("inter_node_volume: ", r.size(), " items but ", item_bytes.size(), " item_bytes");
  if (r.ranks > max_ranks) (void)checked_ranks(r.ranks, "inter_node_volume: ranks");
  std::vector<std::uint64_t> v(r.ranks, 0);
  if (ranks_per_node == 0) return v;
  const detail::node_map node(r.ranks, ranks_per_node);
  for (std::size_t i = 0; i < r.size(); ++i) {
    const rank_t a = r.source[i].rank, b = r.destination[i].rank;
    if (a >= r.ranks || b >= r.ranks)
      detail::throw_invalid("inter_node_volume: item ", i, " uses rank ", std::max(a, b), " >= ranks ", r.ranks);
    if (node(a) == node(b)) continue;
    v[a] += item_bytes[i];
    v[b] += item_bytes[i];
  }
  return v;
}

/// The maximum of `inter_node_volume` (0 for no ranks).
[[nodiscard]] inline std::uint64_t max_inter_node_volume(const rearrangement& r,
                                                         std::span<const std::uint64_t> item_bytes,
                                                         rank_t ranks_per_node) {
  const auto v = inter_node_volume(r, item_bytes, ranks_per_node);
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

/// Moves every new batch j (the items whose destination rank is j) to rank
/// `rank_of_batch[j]`, keeping its slot order: destination[i] = {σ(dest.rank), dest.slot}.
/// Sources are unchanged. Throws unless `rank_of_batch` is a permutation of 0..ranks-1. This
/// overload reuses `r`'s storage. O(n + ranks).
[[nodiscard]] inline rearrangement apply_relabeling(rearrangement&& r, std::span<const rank_t> rank_of_batch) {
  if (rank_of_batch.size() != r.ranks)
    detail::throw_invalid("apply_relabeling: ", rank_of_batch.size(), " batch ranks for ", r.ranks, " ranks");
  std::vector<bool> used(r.ranks, false);
  for (std::size_t j = 0; j < rank_of_batch.size(); ++j) {
    const rank_t q = rank_of_batch[j];
    if (q >= r.ranks || used[q])
      detail::throw_invalid("apply_relabeling: batch ", j, " goes to rank ", q, ", which is out of range or taken");
    used[q] = true;
  }
  for (location& l : r.destination) l.rank = rank_of_batch[l.rank];
  return std::move(r);
}

/// The same on a copy of `r`. O(n + ranks).
[[nodiscard]] inline rearrangement apply_relabeling(const rearrangement& r, std::span<const rank_t> rank_of_batch) {
  return apply_relabeling(rearrangement(r), rank_of_batch);
}

/// Tuning of `relabel_nodewise`. Defaults suit d up to a few thousand ranks.
struct relabel_options {
  /// Improving swaps at most (0 = automatic: 4 · nodes + 64). Bounds the time on any input.
  std::uint32_t max_iterations = 0;
  /// Besides the batches holding bytes from the bottleneck node, how many of the batches with
  /// the least incoming bytes are tried as swap partners per step. Default 8.
  std::uint32_t low_volume_candidates = 8;
  /// How many of the batches holding bytes from the bottleneck node (those it sends most to
  /// first) are tried as swap partners per step. Default 16 (at d = 2,560 in the omni
  /// orchestration, 64 + 32 partners reached a 0.13 % lower maximum in one phase of three,
  /// at 1.6 × the search time).
  std::uint32_t partner_candidates = 16;
  /// Rounds of iterated local search after the first descent: two seeded random swaps out
  /// of the bottleneck node, then descend again; the best map seen is kept. Default (empty) =
  /// automatic: 64 rounds up to 32 nodes (small instances, where they close most of the gap
  /// to the optimum for little time), none above (at 320 nodes, d = 2,560, four rounds cost
  /// a quarter of the relabeling time and found nothing in any phase of the omni
  /// orchestration benchmark).
  std::optional<std::uint32_t> perturbations{};
  /// With one rank per node and at most this many ranks, solve exactly (bottleneck
  /// assignment, O(d³ log d)) instead. Default 64.
  rank_t exact_up_to = 64;
};

/// The result of a relabeling: which rank receives every new batch, and the objective.
struct relabeling {
  std::vector<rank_t> rank_of_batch;  ///< σ: batch j → rank σ[j] (identity when nothing better was found)
  std::uint64_t max_identity = 0;     ///< max per-rank inter-node volume with σ = identity
  std::uint64_t max_relabeled = 0;    ///< the same with σ (≤ max_identity, always)
  /// Work done: swaps of the local search (heuristic), matching probes (one rank per node,
  /// exact path) or search-tree nodes (`relabel_nodewise_exact` with several ranks per node).
  std::uint32_t iterations = 0;

  [[nodiscard]] bool is_identity() const noexcept {
    for (std::size_t j = 0; j < rank_of_batch.size(); ++j)
      if (rank_of_batch[j] != j) return false;
    return true;
  }
};

namespace detail {

/// The sparse volume matrix of a rearrangement at rank and node granularity, per new batch.
/// Batches and nodes are what relabeling permutes; everything the objective needs is here.
struct relabel_model {
  rank_t d = 0, c = 0, nodes = 0;
  std::vector<std::uint64_t> in, out;                      ///< bytes into batch j / out of rank q
  std::vector<std::size_t> rank_first;                     ///< CSR per batch over (source rank, bytes)
  std::vector<std::pair<rank_t, std::uint64_t>> rank_vol;  ///< sorted by rank within a batch
  std::vector<std::size_t> node_first;                     ///< CSR per batch over (source node, bytes)
  std::vector<std::pair<rank_t, std::uint64_t>> node_vol;  ///< sorted by node within a batch
  /// Per batch, the node that sends it the most bytes (the lowest on ties) and those bytes;
  /// (0, 0) for a batch without bytes.
  std::vector<std::pair<rank_t, std::uint64_t>> strongest;
  /// Per node m, the batches with bytes from it that a swap search can pick as partners
  /// (`improve`): when at most `top_keep` batches have bytes from m (`node_batches[m]`), all
  /// of them in ascending batch order; otherwise the `top_keep` with the most bytes from m
  /// (ties: lower batch), in that order. CSR over `top_first`. A full transpose of `node_vol`
  /// held the same information at 16 B per (batch, node) pair; the search never reads
  /// beyond its `partner_candidates` best plus the node's own c batches.
  std::uint32_t top_keep = 0;
  std::vector<std::size_t> node_batches;              ///< batches with bytes from node m
  std::vector<std::size_t> top_first;                 ///< CSR per node over `top`
  std::vector<std::pair<rank_t, std::uint64_t>> top;  ///< (batch, bytes from the node)

  [[nodiscard]] rank_t node_of(rank_t q) const noexcept { return q / c; }
  [[nodiscard]] rank_t node_begin(rank_t m) const noexcept { return m * c; }
  [[nodiscard]] rank_t node_end(rank_t m) const noexcept { return std::min<rank_t>(d, (m + 1) * c); }

  /// Bytes of batch j that come from node m. O(log).
  [[nodiscard]] std::uint64_t from_node(rank_t j, rank_t m) const noexcept {
    const auto b = node_vol.begin() + static_cast<std::ptrdiff_t>(node_first[j]);
    const auto e = node_vol.begin() + static_cast<std::ptrdiff_t>(node_first[j + 1]);
    const auto it = std::lower_bound(b, e, m, [](const auto& p, rank_t v) { return p.first < v; });
    return (it != e && it->first == m) ? it->second : 0;
  }
  /// Inter-node bytes batch j receives when it sits on node m.
  [[nodiscard]] std::uint64_t recv_at(rank_t j, rank_t m) const noexcept { return in[j] - from_node(j, m); }

  relabel_model() = default;
  /// The model of `r`; `keep` = `top_keep` (see there), by default what `relabel_nodewise`
  /// keeps with default options and c ranks per node.
  relabel_model(const rearrangement& r, std::span<const std::uint64_t> bytes, rank_t ranks_per_node,
                std::uint32_t keep = 0) {
    build(r, bytes, ranks_per_node, keep ? keep : default_keep(ranks_per_node));
  }

  /// What `relabel_nodewise` keeps with `options`: `partner_candidates` + c (saturating).
  [[nodiscard]] static std::uint32_t default_keep(rank_t ranks_per_node, const relabel_options& options = {}) noexcept {
    const std::uint64_t k = std::uint64_t{options.partner_candidates} + ranks_per_node;
    return static_cast<std::uint32_t>(std::min<std::uint64_t>(k, std::numeric_limits<std::uint32_t>::max()));
  }

  /// (Re)builds the model of `r`, reusing the capacity of every member; `keep` = `top_keep`.
  void build(const rearrangement& r, std::span<const std::uint64_t> bytes, rank_t ranks_per_node, std::uint32_t keep) {
    d = r.ranks;
    c = ranks_per_node;
    nodes = (r.ranks + ranks_per_node - 1) / ranks_per_node;
    top_keep = std::max<std::uint32_t>(1, std::min<std::uint32_t>(keep, d));
    const std::size_t n = r.size();
    // One counting sort of (source rank, bytes) by batch, then per batch a dense accumulator
    // over the source ranks read back in ascending rank (`merge_batches`). When every item's
    // bytes fit beside its source rank in one word, the sort moves 8-byte records through
    // `records`; otherwise it writes 16-byte ones into `rank_vol` itself, and every batch's
    // merged list is written back over its own records (a batch never has more sources than
    // items, and its records are read before it writes). The scatter, one store to one of d
    // places per item, is the build's costliest pass (bench/RESULTS.md "Session 40").
    std::vector<std::size_t> first(d + std::size_t{1}, 0);
    std::vector<std::size_t> items_from(d, 0);  // items per source rank: bounds `top`'s scratch
    std::uint64_t any_bytes = 0;
    for (std::size_t i = 0; i < n; ++i) {
      ++first[r.destination[i].rank + std::size_t{1}];
      ++items_from[r.source[i].rank];
      any_bytes |= bytes[i];
    }
    for (rank_t j = 0; j < d; ++j) first[j + 1] += first[j];
    std::vector<std::size_t> at(first.begin(), first.end() - 1);
    rank_vol.resize(n);
    const int source_bits = std::bit_width(d - rank_t{1});
    if (std::bit_width(any_bytes) + source_bits <= 64) {
      records.resize(n);
      for (std::size_t i = 0; i < n; ++i)
        records[at[r.destination[i].rank]++] = bytes[i] << source_bits | r.source[i].rank;
      const std::uint64_t source_mask = (std::uint64_t{1} << source_bits) - 1;
      merge_batches(first, items_from, [&](std::size_t k) {
        return std::pair{static_cast<rank_t>(records[k] & source_mask), records[k] >> source_bits};
      });
    } else {
      for (std::size_t i = 0; i < n; ++i) rank_vol[at[r.destination[i].rank]++] = {r.source[i].rank, bytes[i]};
      merge_batches(first, items_from, [&](std::size_t k) { return rank_vol[k]; });
    }
  }

 private:
  /// Scratch of `build`: the batch-sorted 8-byte records (bytes << source bits | source rank).
  std::vector<std::uint64_t> records;

  /// Every member but `records` from the items sorted by batch: batch j's are `record(k)` =
  /// (source rank, bytes) for k in [first[j], first[j + 1]); `items_from[q]` counts rank q's
  /// items. Writes `rank_vol` from its front, never past the batch being read.
  ///
  /// `top` is chosen as the node entries are finished, in ascending batch order: an entry that
  /// sends strictly more than node m's current floor joins m's candidates; when they fill their
  /// room (twice `top_keep`, or fewer when the node cannot have that many batches),
  /// `nth_element` keeps the `top_keep` strongest (bytes descending, batch ascending) and the
  /// weakest of them sets the floor (so a later batch loses ties). O(entries) amortized, and no
  /// pass of its own over the entries (two passes over them, counting first, were ≈ 17 % of the
  /// build on the image-heavy image phase: bench/RESULTS.md "Session 40"). A
  /// replace-the-weakest list (a scan per replacement, then a heap) took 2–3 ms per phase at
  /// d = 2,560, where the bytes a node sends a batch often grow with the batch index and most
  /// entries replace one (bench/RESULTS.md "Session 33").
  template <class Record>
  void merge_batches(const std::vector<std::size_t>& first, const std::vector<std::size_t>& items_from, Record record) {
    in.assign(d, 0);
    out.assign(d, 0);
    node_vol.clear();
    node_vol.reserve(first.back());
    rank_first.assign(1, 0);
    node_first.assign(1, 0);
    node_batches.assign(nodes, 0);
    strongest.assign(d, {0, 0});
    // Node m's candidates live in [cand_first[m], cand_first[m + 1]): room for twice `top_keep`,
    // or for every batch m can send to when that is fewer (then it never compacts).
    std::vector<std::size_t> cand_first(nodes + std::size_t{1}, 0);
    for (rank_t m = 0; m < nodes; ++m) {
      std::size_t from_m = 0;
      for (rank_t q = node_begin(m); q < node_end(m); ++q) from_m += items_from[q];
      cand_first[m + 1] = cand_first[m] + std::min<std::size_t>({from_m, d, std::size_t{2} * top_keep});
    }
    std::vector<std::pair<rank_t, std::uint64_t>> cand(cand_first.back());
    std::vector<std::size_t> size(nodes, 0);
    // The bytes an entry must exceed to become a candidate of node m: 0 until its first
    // compaction (every entry has bytes), then its weakest kept entry's.
    std::vector<std::uint64_t> floor(nodes, 0);
    const auto stronger = [](const auto& a, const auto& b) {
      return a.second != b.second ? a.second > b.second : a.first < b.first;
    };
    const auto keep_strongest = [&](rank_t m) {
      const auto b = cand.begin() + static_cast<std::ptrdiff_t>(cand_first[m]);
      std::nth_element(b, b + (top_keep - 1), b + static_cast<std::ptrdiff_t>(size[m]), stronger);
      size[m] = top_keep;
      floor[m] = b[top_keep - 1].second;
    };
    std::vector<std::uint64_t> sum(d, 0);               // bytes of the current batch per source rank
    std::vector<std::uint64_t> seen((d + 63) / 64, 0);  // bitmap of its source ranks
    std::vector<rank_t> touched;
    const node_map node(d, c);
    std::size_t written = 0;
    for (rank_t j = 0; j < d; ++j) {
      // Source ranks in ascending order, each with its merged nonzero bytes: a bitmap scan when
      // the batch has many records (chosen by the record count, so the hot loop only adds and
      // sets bits), a sort of the few touched ranks otherwise (keeps the build O(n log n) when
      // d is huge). Sources ascend, so nodes do: a node's entry is finished when the next
      // source lies on another node.
      constexpr rank_t no_node = std::numeric_limits<rank_t>::max();
      rank_t open_node = no_node;
      std::uint64_t open_bytes = 0, batch_bytes = 0;
      const auto finish_node = [&] {
        node_vol.emplace_back(open_node, open_bytes);
        const rank_t m = open_node;
        ++node_batches[m];
        if (open_bytes > strongest[j].second) strongest[j] = {m, open_bytes};  // nodes ascend
        if (open_bytes <= floor[m]) return;
        cand[cand_first[m] + size[m]++] = {j, open_bytes};
        if (cand_first[m] + size[m] == cand_first[m + 1] && size[m] > top_keep) keep_strongest(m);
      };
      const auto emit = [&](rank_t src, std::uint64_t b) {
        batch_bytes += b;
        out[src] += b;
        rank_vol[written++] = {src, b};
        const rank_t m = node(src);
        if (m != open_node) {
          if (open_node != no_node) finish_node();
          open_node = m;
          open_bytes = 0;
        }
        open_bytes += b;
      };
      if ((first[j + 1] - first[j]) * 8 >= seen.size()) {
        for (std::size_t k = first[j]; k < first[j + 1]; ++k) {
          const auto [src, b] = record(k);
          sum[src] += b;
          seen[src / 64] |= std::uint64_t{1} << (src % 64);
        }
        for (std::size_t wd = 0; wd < seen.size(); ++wd)
          for (std::uint64_t bits = std::exchange(seen[wd], 0); bits != 0; bits &= bits - 1) {
            const auto src = static_cast<rank_t>(wd * 64 + static_cast<std::size_t>(std::countr_zero(bits)));
            if (const std::uint64_t b = std::exchange(sum[src], 0); b != 0) emit(src, b);
          }
      } else {
        touched.clear();
        for (std::size_t k = first[j]; k < first[j + 1]; ++k) {
          const auto [src, b] = record(k);
          if (b == 0) continue;
          if (sum[src] == 0) touched.push_back(src);
          sum[src] += b;
        }
        std::sort(touched.begin(), touched.end());
        for (const rank_t src : touched) emit(src, std::exchange(sum[src], 0));
      }
      if (open_node != no_node) finish_node();
      in[j] = batch_bytes;
      rank_first.push_back(written);
      node_first.push_back(node_vol.size());
    }
    rank_vol.resize(written);
    top_first.assign(nodes + std::size_t{1}, 0);
    for (rank_t m = 0; m < nodes; ++m)
      top_first[m + 1] = top_first[m] + std::min<std::size_t>(node_batches[m], top_keep);
    top.resize(top_first.back());
    for (rank_t m = 0; m < nodes; ++m) {
      const auto b = cand.begin() + static_cast<std::ptrdiff_t>(cand_first[m]);
      if (node_batches[m] > top_keep) {
        if (size[m] > top_keep) keep_strongest(m);
        std::sort(b, b + top_keep, stronger);
      }
      std::copy(b, b + static_cast<std::ptrdiff_t>(top_first[m + 1] - top_first[m]),
                top.begin() + static_cast<std::ptrdiff_t>(top_first[m]));
    }
  }
};

/// Sorts `v` by `less`: insertion sort for node-sized arrays (the local search sorts two
/// arrays of c values per candidate swap, where std::sort's setup dominated), std::sort above.
template <class Less>
void sort_small(std::vector<std::uint64_t>& v, Less less) {
  if (v.size() > 16) {
    std::sort(v.begin(), v.end(), less);
    return;
  }
  for (std::size_t i = 1; i < v.size(); ++i) {
    const std::uint64_t x = v[i];
    std::size_t k = i;
    for (; k > 0 && less(x, v[k - 1]); --k) v[k] = v[k - 1];
    v[k] = x;
  }
}

/// Minimum over bijections of max(sent_i + recv_j): pair the largest sent with the smallest
/// recv (exchange argument). Sorts both in place. O(k log k).
inline std::uint64_t bottleneck_pairing(std::vector<std::uint64_t>& sent, std::vector<std::uint64_t>& recv) {
  sort_small(sent, std::greater<>());
  sort_small(recv, std::less<>());
  std::uint64_t m = 0;
  for (std::size_t i = 0; i < sent.size(); ++i) m = std::max(m, sent[i] + recv[i]);
  return m;
}

/// Node-level search state: which batches every node receives, and the intra-node part of
/// every rank's outgoing bytes.
struct relabel_state {
  const relabel_model* model = nullptr;
  std::vector<rank_t> node_of_batch;
  std::vector<std::vector<rank_t>> members;  ///< batches of node m (size = node size)
  std::vector<std::uint64_t> kept;           ///< bytes rank q sends to batches on its own node
  std::vector<std::uint64_t> cost;           ///< node cost (optimal pairing inside the node)
  std::vector<std::uint64_t> sent_buf, recv_buf;

  relabel_state(const relabel_model& mdl, std::vector<rank_t> batch_node)
      : model(&mdl), node_of_batch(std::move(batch_node)) {
    members.assign(mdl.nodes, {});
    for (rank_t j = 0; j < mdl.d; ++j) members[node_of_batch[j]].push_back(j);
    kept.assign(mdl.d, 0);
    // Only a batch's entries from its own node count; they are contiguous (ranks ascend), so
    // two binary searches per batch instead of a node lookup per entry.
    for (rank_t j = 0; j < mdl.d; ++j) shift_kept(j, node_of_batch[j], true);
    cost.assign(mdl.nodes, 0);
    for (rank_t m = 0; m < mdl.nodes; ++m) cost[m] = node_cost(m);
  }

  [[nodiscard]] std::uint64_t node_cost(rank_t m) {
    const relabel_model& md = *model;
    sent_buf.clear();
    recv_buf.clear();
    for (rank_t q = md.node_begin(m); q < md.node_end(m); ++q) sent_buf.push_back(md.out[q] - kept[q]);
    for (rank_t j : members[m]) recv_buf.push_back(md.recv_at(j, m));
    return bottleneck_pairing(sent_buf, recv_buf);
  }

  /// Entries of batch j's (source rank, bytes) list whose rank lies on node m: [first, last).
  [[nodiscard]] std::pair<std::size_t, std::size_t> on_node(rank_t j, rank_t m) const {
    const relabel_model& md = *model;
    const auto base = md.rank_vol.begin();
    const auto b = base + static_cast<std::ptrdiff_t>(md.rank_first[j]);
    const auto e = base + static_cast<std::ptrdiff_t>(md.rank_first[j + 1]);
    const auto lo = std::lower_bound(b, e, md.node_begin(m), [](const auto& p, rank_t v) { return p.first < v; });
    const auto hi = std::lower_bound(lo, e, md.node_end(m), [](const auto& p, rank_t v) { return p.first < v; });
    return {static_cast<std::size_t>(lo - base), static_cast<std::size_t>(hi - base)};
  }

  /// Adds or removes batch j's bytes to/from the `kept` of node m's ranks.
  void shift_kept(rank_t j, rank_t m, bool add) {
    const relabel_model& md = *model;
    const auto [lo, hi] = on_node(j, m);
    for (std::size_t k = lo; k < hi; ++k) {
      if (add)
        kept[md.rank_vol[k].first] += md.rank_vol[k].second;
      else
        kept[md.rank_vol[k].first] -= md.rank_vol[k].second;
    }
  }

  /// Cost of node m if member `leave` were replaced by `enter` whose receive volume on m is
  /// `enter_recv`; `recv_of_member[i]` is the current receive volume of members[m][i].
  /// When a lower bound of that cost exceeds `limit` (the largest send plus the smallest
  /// receive, or the smallest send plus the largest receive: the pairing matches each pair of
  /// extremes), returns the bound instead, a value > `limit`; the default asks for the exact
  /// cost. O(c log c + entries of the two batches on m) (O(c + entries) when the bound
  /// decides). Touches nothing.
  [[nodiscard]] std::uint64_t cost_if_swapped(rank_t m, rank_t leave, rank_t enter, std::uint64_t enter_recv,
                                              std::span<const std::uint64_t> recv_of_member,
                                              std::uint64_t limit = std::numeric_limits<std::uint64_t>::max()) {
    return cost_if_swapped(m, leave, on_node(leave, m), on_node(enter, m), enter_recv, recv_of_member, limit);
  }

  /// The same with the two batches' entry ranges on node m already looked up (`on_node`).
  [[nodiscard]] std::uint64_t cost_if_swapped(rank_t m, rank_t leave, std::pair<std::size_t, std::size_t> leave_on_m,
                                              std::pair<std::size_t, std::size_t> enter_on_m, std::uint64_t enter_recv,
                                              std::span<const std::uint64_t> recv_of_member,
                                              std::uint64_t limit = std::numeric_limits<std::uint64_t>::max()) {
    const relabel_model& md = *model;
    const rank_t b = md.node_begin(m), e = md.node_end(m);
    sent_buf.resize(e - b);
    for (rank_t q = b; q < e; ++q) sent_buf[q - b] = md.out[q] - kept[q];
    // The leaving batch's bytes from m now cross nodes; the entering batch's stop crossing.
    for (std::size_t k = leave_on_m.first; k < leave_on_m.second; ++k)
      sent_buf[md.rank_vol[k].first - b] += md.rank_vol[k].second;
    for (std::size_t k = enter_on_m.first; k < enter_on_m.second; ++k)
      sent_buf[md.rank_vol[k].first - b] -= md.rank_vol[k].second;
    recv_buf.clear();
    for (std::size_t i = 0; i < members[m].size(); ++i)
      recv_buf.push_back(members[m][i] == leave ? enter_recv : recv_of_member[i]);
    // Most candidate swaps of the search fail against its best so far: the bound rejects them
    // without the two sorts (bench/RESULTS.md "Session 40").
    const auto [sent_min, sent_max] = std::minmax_element(sent_buf.begin(), sent_buf.end());
    const auto [recv_min, recv_max] = std::minmax_element(recv_buf.begin(), recv_buf.end());
    const std::uint64_t bound = std::max(*sent_max + *recv_min, *sent_min + *recv_max);
    if (bound > limit) return bound;
    return bottleneck_pairing(sent_buf, recv_buf);
  }

  /// Current receive volumes of node m's members, in member order.
  void member_recv(rank_t m, std::vector<std::uint64_t>& out_recv) const {
    out_recv.clear();
    for (rank_t j : members[m]) out_recv.push_back(model->recv_at(j, m));
  }

  void swap_batches(rank_t j, rank_t k) {
    const rank_t mj = node_of_batch[j], mk = node_of_batch[k];
    shift_kept(j, mj, false);
    shift_kept(k, mk, false);
    shift_kept(j, mk, true);
    shift_kept(k, mj, true);
    *std::find(members[mj].begin(), members[mj].end(), j) = k;
    *std::find(members[mk].begin(), members[mk].end(), k) = j;
    node_of_batch[j] = mk;
    node_of_batch[k] = mj;
    cost[mj] = node_cost(mj);
    cost[mk] = node_cost(mk);
  }

  [[nodiscard]] std::uint64_t max_cost() const { return *std::max_element(cost.begin(), cost.end()); }

  /// The maximum per-rank inter-node volume (`inter_node_volume`) when every batch j sits on
  /// rank `sigma[j]`, a rank of its node in this state: rank σ(j) sends out[σ(j)] − kept[σ(j)]
  /// across nodes and receives in[j] minus what j gets from its own node. Equals the maximum
  /// over the relabeled rearrangement's items (the model holds the same integer sums) at
  /// O(d log L) instead of O(n).
  [[nodiscard]] std::uint64_t max_volume(std::span<const rank_t> sigma) const {
    const relabel_model& md = *model;
    std::uint64_t m = 0;
    for (rank_t j = 0; j < md.d; ++j) {
      const rank_t q = sigma[j];
      m = std::max(m, md.out[q] - kept[q] + md.recv_at(j, node_of_batch[j]));
    }
    return m;
  }

  /// Ranks for the batches of every node: the identity where a batch's own rank is on its
  /// node and that costs nothing over `budget`; otherwise the optimal pairing.
  [[nodiscard]] std::vector<rank_t> ranks_of_batches(std::uint64_t budget) {
    const relabel_model& md = *model;
    std::vector<rank_t> sigma(md.d, 0);
    // Per node: ranks as (~sent, rank) and batches as (recv, batch), so that sorting ascending
    // gives the pairing rule's orders (sent descending, recv ascending; ties by index), each
    // receive volume looked up once. Buffers are shared by the nodes.
    std::vector<std::pair<std::uint64_t, rank_t>> free_ranks, loose, ranks, batches;
    std::vector<bool> taken;
    std::vector<std::pair<rank_t, rank_t>> pairs;  // (batch, rank)
    for (rank_t m = 0; m < md.nodes; ++m) {
      const rank_t first = md.node_begin(m), last = md.node_end(m);
      const auto sent_of = [&](rank_t q) { return md.out[q] - kept[q]; };
      // Try "stay where you are" first: it moves the fewest bytes inside the node.
      free_ranks.clear();
      loose.clear();
      batches.clear();
      pairs.clear();
      taken.assign(last - first, false);
      std::uint64_t cost_pairs = 0;
      for (rank_t j : members[m]) {
        const std::uint64_t recv = md.recv_at(j, m);
        batches.emplace_back(recv, j);
        if (md.node_of(j) == m) {
          pairs.emplace_back(j, j);
          taken[j - first] = true;
          cost_pairs = std::max(cost_pairs, sent_of(j) + recv);
        } else {
          loose.emplace_back(recv, j);
        }
      }
      ranks.clear();
      for (rank_t q = first; q < last; ++q) {
        ranks.emplace_back(~sent_of(q), q);
        if (!taken[q - first]) free_ranks.push_back(ranks.back());
      }
      // Loose batches take the free ranks by the optimal pairing rule (largest sent ↔ smallest recv).
      std::sort(free_ranks.begin(), free_ranks.end());
      std::sort(loose.begin(), loose.end());
      for (std::size_t i = 0; i < loose.size(); ++i) {
        pairs.emplace_back(loose[i].second, free_ranks[i].second);
        cost_pairs = std::max(cost_pairs, ~free_ranks[i].first + loose[i].first);
      }
      if (cost_pairs > budget) {  // fall back to the optimal pairing over the whole node
        std::sort(ranks.begin(), ranks.end());
        std::sort(batches.begin(), batches.end());
        pairs.clear();
        for (std::size_t i = 0; i < ranks.size(); ++i) pairs.emplace_back(batches[i].second, ranks[i].second);
      }
      for (const auto& [j, q] : pairs) sigma[j] = q;
    }
    return sigma;
  }
};

/// Greedy start: batches in decreasing order of their largest single-node volume (ties by
/// batch) take the node that sends them the most bytes if it has room, else their next best
/// node with room; batches with no bytes, or whose nodes are full, fill the remaining room in
/// batch order. This maximizes intra-node volume greedily — a good start, not the objective.
inline std::vector<rank_t> affinity_start(const relabel_model& md) {
  constexpr rank_t none = std::numeric_limits<rank_t>::max();
  const auto top = [&](rank_t j) { return md.strongest[j].second; };
  std::vector<rank_t> order(md.d);
  std::iota(order.begin(), order.end(), rank_t{0});
  std::sort(order.begin(), order.end(), [&](rank_t a, rank_t b) { return top(a) != top(b) ? top(a) > top(b) : a < b; });
  std::vector<rank_t> node_of_batch(md.d, none);
  std::vector<rank_t> room(md.nodes);
  for (rank_t m = 0; m < md.nodes; ++m) room[m] = md.node_end(m) - md.node_begin(m);
  for (rank_t j : order) {
    if (top(j) == 0) continue;
    // The node with the most bytes among those with room (ties: lower node): the strongest
    // node while it has room, else a scan of the batch's nodes.
    rank_t pick = md.strongest[j].first;
    if (room[pick] == 0) {
      std::uint64_t best = 0;
      pick = none;
      for (std::size_t k = md.node_first[j]; k < md.node_first[j + 1]; ++k) {
        const auto [m, vol] = md.node_vol[k];
        if (room[m] > 0 && (pick == none || vol > best)) {
          best = vol;
          pick = m;
        }
      }
      if (pick == none) continue;
    }
    node_of_batch[j] = pick;
    --room[pick];
  }
  rank_t m = 0;
  for (rank_t j = 0; j < md.d; ++j) {
    if (node_of_batch[j] != none) continue;
    while (room[m] == 0) ++m;
    node_of_batch[j] = m;
    --room[m];
  }
  return node_of_batch;
}

/// Maximum per-rank inter-node volume of `r` after moving batch j to rank sigma[j] (without
/// materializing the relabeled rearrangement). O(n + ranks).
inline std::uint64_t max_volume_relabeled(const rearrangement& r, std::span<const std::uint64_t> bytes, rank_t c,
                                          std::span<const rank_t> sigma) {
  std::vector<std::uint64_t> v(r.ranks, 0);
  const node_map node(r.ranks, c);
  for (std::size_t i = 0; i < r.size(); ++i) {
    const rank_t a = r.source[i].rank, b = sigma[r.destination[i].rank];
    if (node(a) == node(b)) continue;
    v[a] += bytes[i];
    v[b] += bytes[i];
  }
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

/// Bottleneck local search: repeatedly take the node with the highest cost (lowest index on
/// ties) and apply the swap of one of its batches with a batch of another node that brings
/// both nodes strictly below the current maximum, choosing the swap with the lowest resulting
/// max(cost of the two nodes) (ties: first found in a fixed order). A swap changes only the
/// two nodes' costs, so the sorted vector of node costs decreases lexicographically: it
/// terminates; `max_iterations` bounds it. Returns the number of swaps.
inline std::uint32_t improve(relabel_state& st, const relabel_model& md, const relabel_options& opt,
                             std::span<const rank_t> low_in) {
  const std::uint32_t cap = opt.max_iterations ? opt.max_iterations : 4 * md.nodes + 64;
  std::vector<rank_t> cand;
  std::vector<std::uint64_t> score(md.d, 0), recv1, recv2;
  std::vector<std::pair<std::size_t, std::size_t>> own_on_m1;
  std::uint32_t swaps = 0;
  while (swaps < cap) {
    const auto top = std::max_element(st.cost.begin(), st.cost.end());
    const std::uint64_t M = *top;
    if (M == 0) break;
    const rank_t m1 = static_cast<rank_t>(top - st.cost.begin());
    // Partners: batches holding bytes from m1's ranks (moving them in cuts m1's sends), and
    // the batches with the least incoming bytes (they cut m1's receives).
    cand.clear();
    for (std::size_t k = md.top_first[m1]; k < md.top_first[m1 + 1]; ++k) {
      const auto [j, vol] = md.top[k];
      if (st.node_of_batch[j] != m1) {
        score[j] = vol;
        cand.push_back(j);
      }
    }
    std::uint32_t extra = 0;
    // Keep the partners that relieve m1's sends most (ties by id), and the low-volume ones.
    // A complete list is in batch order; a truncated one is already in that order and holds
    // the best `partner_candidates` of those off m1 (m1 holds at most c of its entries).
    if (cand.size() > opt.partner_candidates) {
      if (md.node_batches[m1] <= md.top_keep)
        std::partial_sort(cand.begin(), cand.begin() + opt.partner_candidates, cand.end(),
                          [&](rank_t a, rank_t b) { return score[a] != score[b] ? score[a] > score[b] : a < b; });
      cand.resize(opt.partner_candidates);
    }
    for (rank_t j : low_in) {
      if (extra >= opt.low_volume_candidates) break;
      // Skip batches on m1 and those with bytes from m1 (partner candidates, kept or not).
      if (st.node_of_batch[j] == m1 || md.from_node(j, m1) != 0) continue;
      cand.push_back(j);
      ++extra;
    }
    std::uint64_t best = M;
    rank_t best_j = 0, best_k = 0;
    st.member_recv(m1, recv1);
    const std::vector<rank_t> own = st.members[m1];
    own_on_m1.clear();
    for (rank_t j : own) own_on_m1.push_back(st.on_node(j, m1));
    for (rank_t k : cand) {
      const rank_t m2 = st.node_of_batch[k];
      const std::uint64_t k_recv_m1 = md.recv_at(k, m1);
      const auto k_on_m1 = st.on_node(k, m1);
      bool m2_loaded = false;
      for (std::size_t jj = 0; jj < own.size(); ++jj) {
        const rank_t j = own[jj];
        // Only c1 < best and worst <= best matter: the bound may stand in above those limits.
        const std::uint64_t c1 = st.cost_if_swapped(m1, j, own_on_m1[jj], k_on_m1, k_recv_m1, recv1, best - 1);
        if (c1 >= best) continue;
        if (!m2_loaded) {
          st.member_recv(m2, recv2);
          m2_loaded = true;
        }
        const std::uint64_t c2 = st.cost_if_swapped(m2, k, j, md.recv_at(j, m2), recv2, best);
        const std::uint64_t worst = std::max(c1, c2);
        if (worst < best || (worst == best && best < M && std::pair{j, k} < std::pair{best_j, best_k})) {
          best = worst;
          best_j = j;
          best_k = k;
        }
      }
    }
    if (best >= M) break;
    st.swap_batches(best_j, best_k);
    ++swaps;
  }
  return swaps;
}

/// Exact relabeling with one rank per node: the cost of batch j on rank q is
/// out(q) + in(j) − 2·V[q][j] (sends plus receives that cross), so minimizing the maximum is a
/// bottleneck assignment: binary search over the distinct costs, each probe a bipartite
/// matching by augmenting paths (Kuhn). O(d³ log d). Returns σ (batch → rank).
inline std::vector<rank_t> bottleneck_assignment(const relabel_model& md, std::uint32_t& probes) {
  const rank_t d = md.d;
  std::vector<std::uint64_t> cost(std::size_t{d} * d);
  for (rank_t j = 0; j < d; ++j) {
    for (rank_t q = 0; q < d; ++q) cost[std::size_t{q} * d + j] = md.out[q] + md.in[j];
    for (std::size_t k = md.rank_first[j]; k < md.rank_first[j + 1]; ++k)
      cost[std::size_t{md.rank_vol[k].first} * d + j] -= 2 * md.rank_vol[k].second;
  }
  std::vector<std::uint64_t> values(cost);
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  constexpr rank_t none = std::numeric_limits<rank_t>::max();
  std::vector<rank_t> batch_on(d, none);
  std::vector<std::uint32_t> seen(d, 0);
  std::uint32_t stamp = 0;
  auto feasible = [&](std::uint64_t limit) {
    std::fill(batch_on.begin(), batch_on.end(), none);
    // Recursion depth ≤ d ≤ 512 (checked by the callers).
    auto augment = [&](auto&& self, rank_t j) -> bool {
      for (rank_t q = 0; q < d; ++q) {
        if (cost[std::size_t{q} * d + j] > limit || seen[q] == stamp) continue;
        seen[q] = stamp;
        if (batch_on[q] == none || self(self, batch_on[q])) {
          batch_on[q] = j;
          return true;
        }
      }
      return false;
    };
    for (rank_t j = 0; j < d; ++j) {
      ++stamp;
      if (!augment(augment, j)) return false;
    }
    return true;
  };
  std::size_t lo = 0, hi = values.size() - 1;  // the largest cost admits every pair
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    ++probes;
    if (feasible(values[mid]))
      hi = mid;
    else
      lo = mid + 1;
  }
  feasible(values[lo]);
  std::vector<rank_t> sigma(d, 0);
  for (rank_t q = 0; q < d; ++q) sigma[batch_on[q]] = q;
  return sigma;
}

inline std::vector<rank_t> identity_nodes(const relabel_model& md) {
  std::vector<rank_t> v(md.d);
  for (rank_t j = 0; j < md.d; ++j) v[j] = md.node_of(j);
  return v;
}

/// Relabeling reads only ranks: check those (a full slot validation would cost more than the
/// model itself at d = 2,560).
inline void check_relabel_input(const rearrangement& r, std::span<const std::uint64_t> bytes, const char* who) {
  if (r.source.size() != r.destination.size())
    throw_invalid(who, ": ", r.source.size(), " sources but ", r.destination.size(), " destinations");
  for (std::size_t i = 0; i < r.size(); ++i)
    if (r.source[i].rank >= r.ranks || r.destination[i].rank >= r.ranks)
      throw_invalid(who, ": item ", i, " uses rank ", std::max(r.source[i].rank, r.destination[i].rank), " >= ranks ",
                    r.ranks);
  if (bytes.size() != r.size()) throw_invalid(who, ": ", bytes.size(), " item_bytes for ", r.size(), " items");
}

}  // namespace detail

/// Scratch memory of `relabel_nodewise`, kept between calls: pass the same workspace to every
/// call (one per concurrent caller) and later calls reuse its buffers instead of faulting in
/// fresh pages (up to 40 B per item of the largest rearrangement). Contents are opaque; results
/// never depend on what a workspace held before.
struct relabel_workspace {
  detail::relabel_model model;
};

/// Node-wise relabeling heuristic (OrchMLLM Alg. 3 without an ILP solver).
///
/// Input: a rearrangement whose destination rank j names new batch j, the bytes of every
/// item, and `ranks_per_node` (node = rank / ranks_per_node; 0 or ≥ ranks = one node, where
/// nothing crosses nodes and the identity is returned). Output: σ (batch → rank) minimizing
/// heuristically the maximum per-rank inter-node volume as defined by `inter_node_volume`
/// after `apply_relabeling(r, σ)`.
///
/// Method. The objective decomposes: a rank's sends leave its node unless the batch lands on
/// its node — so sends depend only on which NODE each batch lands on — and the bytes a batch
/// receives across nodes depend only on its node too. For a fixed batch→node map the best
/// rank inside a node pairs the rank that sends most with the batch that receives least
/// (exact by an exchange argument). The search runs over batch→node maps: two starts (the
/// identity's nodes, and a greedy max-affinity map), the better is improved by bottleneck
/// swaps (see `detail::improve`), then by iterated local search (`perturbations` rounds of
/// two seeded random swaps out of the bottleneck node and a new descent; the best map is
/// kept); within a node, batches whose own rank is there stay on it when that does not
/// exceed the reached maximum (fewer intra-node moves). With one rank per node and at most
/// `exact_up_to` ranks the problem is a bottleneck assignment and is solved exactly instead.
///
/// Inter-node volume, the objective: for rank q, the bytes q sends to ranks of other nodes
/// plus the bytes q receives from ranks of other nodes (`inter_node_volume`); a rank's NIC
/// carries both directions, and the slowest rank bounds the all-to-all (OrchMLLM eq. (5)).
///
/// Guarantee: never worse than the identity on the maximum; when it cannot strictly improve
/// the maximum it returns the identity (no gratuitous moves). Balance is unaffected: the
/// batches, hence the per-rank loads, are permuted as a whole. Deterministic (ties by index).
/// Complexity: O(n + d²/64 + d log d) to build the model (a counting sort by batch and a
/// bitmap over the source ranks per batch), then per swap
/// O(c · P · (c log c + log L)) for P ≤ `partner_candidates` + `low_volume_candidates`
/// partners and L entries per batch list; swaps per descent ≤ `max_iterations`. Measured:
/// see bench/RESULTS.md, section rearrange (d = 2,560, 8 ranks per node). `workspace`: see
/// `relabel_workspace`; without one, temporary buffers are allocated and freed.
/// @see OrchMLLM §5.2.2, Algorithm 3.
[[nodiscard]] inline relabeling relabel_nodewise(const rearrangement& r, std::span<const std::uint64_t> item_bytes,
                                                 rank_t ranks_per_node, const relabel_options& options,
                                                 relabel_workspace* workspace) {
  detail::check_relabel_input(r, item_bytes, "relabel_nodewise");
  relabeling out;
  out.rank_of_batch.resize(r.ranks);
  std::iota(out.rank_of_batch.begin(), out.rank_of_batch.end(), rank_t{0});
  if (ranks_per_node == 0 || ranks_per_node >= r.ranks) return out;  // one node: nothing crosses

  relabel_workspace local;
  relabel_workspace& ws = workspace ? *workspace : local;
  ws.model.build(r, item_bytes, ranks_per_node, detail::relabel_model::default_keep(ranks_per_node, options));
  const detail::relabel_model& md = ws.model;
  // The identity's maximum from the model (a pass over the items cost as much as a tenth of
  // the relabeling at d = 2,560).
  detail::relabel_state a(md, detail::identity_nodes(md));
  out.max_identity = out.max_relabeled = a.max_volume(out.rank_of_batch);
  if (out.max_identity == 0) return out;
  std::vector<rank_t> low_in(md.d);
  std::iota(low_in.begin(), low_in.end(), rank_t{0});
  std::sort(low_in.begin(), low_in.end(),
            [&](rank_t a, rank_t b) { return md.in[a] != md.in[b] ? md.in[a] < md.in[b] : a < b; });

  std::vector<rank_t> sigma;
  std::uint64_t reached = 0;
  if (ranks_per_node == 1 && md.d <= options.exact_up_to) {
    sigma = detail::bottleneck_assignment(md, out.iterations);
    reached = detail::max_volume_relabeled(r, item_bytes, ranks_per_node, sigma);
  } else {
    detail::relabel_state b(md, detail::affinity_start(md));
    detail::relabel_state& st = b.max_cost() < a.max_cost() ? b : a;
    out.iterations = detail::improve(st, md, options, low_in);
    const std::uint32_t rounds = options.perturbations.value_or(md.nodes <= 32 ? 64 : 0);
    // Iterated local search: kick the bottleneck node with a few seeded random swaps, descend
    // again, remember the best batch→node map seen. Deterministic (portable RNG, fixed seed).
    if (rounds > 0) {
      detail::relabel_state best_state = st;  // copies are O(d); rebuilding would be O(n)
      std::uint64_t best = st.max_cost();
      auto g = make_rng(0x72656c6162656cULL, md.d, md.nodes);
      for (std::uint32_t kick = 0; kick < rounds && best > 0; ++kick) {
        for (int s = 0; s < 2; ++s) {
          const auto top = static_cast<rank_t>(std::max_element(st.cost.begin(), st.cost.end()) - st.cost.begin());
          const rank_t j = st.members[top][uniform_below(g, st.members[top].size())];
          rank_t k = static_cast<rank_t>(uniform_below(g, md.d));
          if (st.node_of_batch[k] == top) continue;
          st.swap_batches(j, k);
        }
        out.iterations += detail::improve(st, md, options, low_in);
        if (st.max_cost() < best) {
          best = st.max_cost();
          best_state = st;
        }
      }
      st = std::move(best_state);
    }
    sigma = st.ranks_of_batches(st.max_cost());
    reached = st.max_volume(sigma);
  }
  if (reached < out.max_identity) {  // else the identity: no gratuitous moves
    out.rank_of_batch = std::move(sigma);
    out.max_relabeled = reached;
  }
  return out;
}

/// `relabel_nodewise` with temporary buffers.
[[nodiscard]] inline relabeling relabel_nodewise(const rearrangement& r, std::span<const std::uint64_t> item_bytes,
                                                 rank_t ranks_per_node, const relabel_options& options = {}) {
  return relabel_nodewise(r, item_bytes, ranks_per_node, options, nullptr);
}

}  // namespace mmbal
