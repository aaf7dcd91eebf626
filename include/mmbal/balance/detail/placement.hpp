#pragma once
/// @file
/// Building an assignment unit by unit (namespace mmbal::balance::detail).

#include <mmbal/core/types.hpp>

#include <cstdint>
#include <utility>
#include <vector>

namespace mmbal::balance::detail {

/// Builds an assignment while units are placed: slots follow placement order.
class placement_builder {
 public:
  placement_builder(std::size_t n, rank_t bins) : a_{bins, std::vector<location>(n)}, counts_(bins, 0) {}
  void place(item_id i, rank_t b) noexcept { a_.where[i] = location{b, counts_[b]++}; }
  [[nodiscard]] std::uint32_t count(rank_t b) const noexcept { return counts_[b]; }
  [[nodiscard]] assignment finish() && { return std::move(a_); }

 private:
  assignment a_;
  std::vector<std::uint32_t> counts_;
};

}  // namespace mmbal::balance::detail
