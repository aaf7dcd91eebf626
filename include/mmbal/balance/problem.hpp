#pragma once
/// @file
/// `problem`: one balancing problem as `balance::solve` and `migrate` take it (docs/DESIGN.md
/// §5.1). Its own header so that the spec layer (`balance/spec.hpp`, which dispatches to every
/// partitioner) and `migrate` (a partitioner that needs origins and bytes) both depend on it
/// and not on each other.

#include <mmbal/balance/constraints.hpp>
#include <mmbal/core/types.hpp>

#include <cstdint>
#include <span>

namespace mmbal::balance {

/// One balancing problem: what every algorithm may look at.
struct problem {
  std::span<const length_t> weights;            ///< cost weight (length) per item
  rank_t bins = 0;                              ///< number of bins (ranks); must be > 0
  constraints limits{};                         ///< count cap, capacity, groups (default: none)
  std::span<const rank_t> origin{};             ///< current rank per item (used by migrate; may be empty)
  std::span<const std::uint64_t> item_bytes{};  ///< bytes per item (migrate; empty = weights as bytes)
  rank_t ranks_per_node = 0;                    ///< ranks per node; 0 = a single node
};

}  // namespace mmbal::balance
