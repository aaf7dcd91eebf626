#pragma once
/// @file
/// Rank → node lookups (namespace mmbal::detail) for the passes over every item that ask
/// whether a move crosses nodes.

#include <mmbal/core/types.hpp>

#include <algorithm>
#include <vector>

namespace mmbal::detail {

/// rank → node = rank / ranks_per_node (ranks_per_node = 0: one node, every rank on node 0) by
/// table lookup. Why: a 32-bit division by a divisor known only at run time costs about as much
/// as everything else a traffic pass does per item (the image-heavy composed plan's traffic at
/// d = 2,560: 6.2 ms with divisions, see bench/RESULTS.md "Session 14"). The table holds
/// `ranks` entries (4 B each; at most `max_ranks`, so a bad count cannot ask for 16 GB); ranks at
/// or beyond it fall back to the division, so any rank is answered. Construction O(ranks),
/// lookup O(1).
class node_map {
 public:
  node_map(rank_t ranks, rank_t ranks_per_node)
      : per_node_(ranks_per_node), node_(ranks_per_node ? std::min(ranks, max_ranks) : 0) {
    rank_t m = 0, k = 0;
    for (rank_t& node : node_) {
      node = m;
      if (++k == per_node_) {
        k = 0;
        ++m;
      }
    }
  }

  /// The node of rank q.
  [[nodiscard]] rank_t operator()(rank_t q) const noexcept {
    if (per_node_ == 0) return 0;
    return q < node_.size() ? node_[q] : q / per_node_;
  }

 private:
  rank_t per_node_;
  std::vector<rank_t> node_;
};

}  // namespace mmbal::detail
