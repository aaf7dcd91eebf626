#pragma once
/// @file
/// The exact node-wise relabeling: the test and benchmark oracle of `relabel_nodewise` (the
/// heuristic's gap to the optimum). Not part of the library: exponential in the worst case.

#include <mmbal/rearrange/relabel.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <vector>

namespace mmbal {

namespace oracle_detail {

/// The identity relabeling of `r` with its max volume (what every relabeling starts from and
/// falls back to).
[[nodiscard]] inline relabeling identity_relabeling(const rearrangement& r, std::span<const std::uint64_t> bytes,
                                                    rank_t ranks_per_node) {
  relabeling out;
  out.rank_of_batch.resize(r.ranks);
  std::iota(out.rank_of_batch.begin(), out.rank_of_batch.end(), rank_t{0});
  out.max_identity = out.max_relabeled = max_inter_node_volume(r, bytes, ranks_per_node);
  return out;
}

/// Takes `sigma` into `out` only when its max volume is strictly below the identity's.
inline void keep_if_better(relabeling& out, const rearrangement& r, std::span<const std::uint64_t> bytes,
                           rank_t ranks_per_node, const std::vector<rank_t>& sigma) {
  const std::uint64_t reached = detail::max_volume_relabeled(r, bytes, ranks_per_node, sigma);
  if (reached < out.max_identity) {
    out.rank_of_batch = sigma;
    out.max_relabeled = reached;
  }
}

}  // namespace oracle_detail

/// Exact node-wise relabeling for small instances (tests and benchmarks: the heuristic's gap).
///
/// With one rank per node the cost of putting batch j on rank q is out(q) + in(j) − 2·V[q][j]
/// and the problem is a bottleneck assignment, solved exactly by binary search over the
/// distinct costs with a bipartite matching (Kuhn) per probe: O(d³ log d), any d ≤ 512.
/// Otherwise a depth-first branch and bound over batch→node maps (batches by incoming bytes,
/// largest first), pruned with lower bounds (sends only grow as batches are placed; every
/// rank receives some batch still possible for its node), started from the heuristic's value;
/// within a node the pairing rule is exact. Worst case exponential: throws `invalid_input`
/// when ranks > `max_ranks` (default 16). Same tie rules, guarantee and result as
/// `relabel_nodewise` (identity unless strictly better). `iterations` counts search nodes.
[[nodiscard]] inline relabeling relabel_nodewise_exact(const rearrangement& r,
                                                       std::span<const std::uint64_t> item_bytes, rank_t ranks_per_node,
                                                       rank_t max_ranks = 16) {
  detail::check_relabel_input(r, item_bytes, "relabel_nodewise_exact");
  relabeling out = oracle_detail::identity_relabeling(r, item_bytes, ranks_per_node);
  if (ranks_per_node == 0 || ranks_per_node >= r.ranks || out.max_identity == 0) return out;
  const detail::relabel_model md(r, item_bytes, ranks_per_node);
  const rank_t d = md.d;
  std::vector<rank_t> best_sigma;
  std::uint64_t best = out.max_identity;

  if (ranks_per_node == 1) {
    if (d > 512) detail::throw_invalid("relabel_nodewise_exact: ranks = ", d, " > 512 with one rank per node");
    best_sigma = detail::bottleneck_assignment(md, out.iterations);
  } else {
    if (d > max_ranks)
      detail::throw_invalid("relabel_nodewise_exact: ranks = ", d, " > max_ranks = ", max_ranks,
                            " (the exact search is exponential)");
    // Incumbent: the heuristic (its value is an upper bound that prunes most of the tree).
    const relabeling h = relabel_nodewise(r, item_bytes, ranks_per_node);
    best = h.max_relabeled;
    best_sigma = h.rank_of_batch;
    std::vector<rank_t> order(d);
    std::iota(order.begin(), order.end(), rank_t{0});
    std::sort(order.begin(), order.end(),
              [&](rank_t a, rank_t b) { return md.in[a] != md.in[b] ? md.in[a] > md.in[b] : a < b; });
    constexpr rank_t none = std::numeric_limits<rank_t>::max();
    std::vector<rank_t> node_of_batch(d, none);
    std::vector<std::uint64_t> sent(d, 0);  // inter-node sends to batches placed so far
    std::vector<rank_t> room(md.nodes);
    for (rank_t m = 0; m < md.nodes; ++m) room[m] = md.node_end(m) - md.node_begin(m);
    std::vector<std::uint64_t> sbuf, rbuf;
    std::vector<rank_t> best_nodes;
    std::vector<std::uint64_t> recv_tab(std::size_t{d} * md.nodes);
    for (rank_t j = 0; j < d; ++j)
      for (rank_t m = 0; m < md.nodes; ++m) recv_tab[std::size_t{j} * md.nodes + m] = md.recv_at(j, m);
    // Lower bound of every completion: sends only grow as batches are placed, and the batches
    // node m ends with are among its members and the unplaced ones, so pairing the current
    // sends with the smallest such receive volumes bounds the node's final cost from below.
    auto bound = [&]() {
      std::uint64_t lb = 0;
      for (rank_t m = 0; m < md.nodes && lb < best; ++m) {
        sbuf.clear();
        rbuf.clear();
        for (rank_t q = md.node_begin(m); q < md.node_end(m); ++q) sbuf.push_back(sent[q]);
        for (rank_t j = 0; j < d; ++j)
          if (node_of_batch[j] == m || (node_of_batch[j] == none && room[m] > 0))
            rbuf.push_back(recv_tab[std::size_t{j} * md.nodes + m]);
        std::partial_sort(rbuf.begin(), rbuf.begin() + static_cast<std::ptrdiff_t>(sbuf.size()), rbuf.end());
        rbuf.resize(sbuf.size());
        lb = std::max(lb, detail::bottleneck_pairing(sbuf, rbuf));
      }
      return lb;
    };
    auto place = [&](rank_t j, rank_t m, bool add) {
      node_of_batch[j] = add ? m : none;
      room[m] = add ? room[m] - 1 : room[m] + 1;
      for (std::size_t k = md.rank_first[j]; k < md.rank_first[j + 1]; ++k) {
        const rank_t q = md.rank_vol[k].first;
        if (md.node_of(q) == m) continue;
        if (add)
          sent[q] += md.rank_vol[k].second;
        else
          sent[q] -= md.rank_vol[k].second;
      }
    };
    auto search = [&](auto&& self, std::size_t depth) -> void {
      ++out.iterations;
      const std::uint64_t lb = bound();
      if (lb >= best) return;
      if (depth == d) {
        best = lb;  // all placed: the bound is the exact cost
        best_nodes = node_of_batch;
        return;
      }
      const rank_t j = order[depth];
      for (rank_t m = 0; m < md.nodes; ++m) {
        if (room[m] == 0) continue;
        place(j, m, true);
        self(self, depth + 1);
        place(j, m, false);
      }
    };
    search(search, 0);
    if (!best_nodes.empty()) {
      detail::relabel_state st(md, best_nodes);
      best_sigma = st.ranks_of_batches(st.max_cost());
    }
  }
  oracle_detail::keep_if_better(out, r, item_bytes, ranks_per_node, best_sigma);
  return out;
}

}  // namespace mmbal
