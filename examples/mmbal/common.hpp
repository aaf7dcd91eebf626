#pragma once
// Helpers shared by the tool's subcommands: per-phase item bytes, groups as a constraint
// span, and plain-text tables.

#include <mmbal/workload/sample.hpp>

#include <cstdint>
#include <iomanip>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

namespace mmbal::tool {

/// Bytes of each item of a phase: its weight (LLM tokens for the LLM phase, encoder length
/// for an encoder phase) × bytes per token.
inline std::vector<std::uint64_t> item_bytes(const phase_items& items, std::uint64_t bytes_per_token) {
  std::vector<std::uint64_t> bytes(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) bytes[i] = std::uint64_t{items.weights[i]} * bytes_per_token;
  return bytes;
}

/// Group id per item for the `groups` constraint, or empty when no sample has a group.
/// Items of samples without a group get ids of their own (2^63 + item index) that no JSONL
/// group can collide with... JSONL groups above 2^63 − 1 are rejected here for that reason.
inline std::vector<std::uint64_t> item_groups(const phase_items& items) {
  bool any = false;
  for (const auto& g : items.group) any = any || g.has_value();
  if (!any) return {};
  constexpr std::uint64_t own = std::uint64_t{1} << 63;
  std::vector<std::uint64_t> groups(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (items.group[i] && *items.group[i] >= own)
      detail::throw_invalid("group ", *items.group[i], " of sample ", items.sample_of[i], " is >= 2^63");
    groups[i] = items.group[i] ? *items.group[i] : own + i;
  }
  return groups;
}

/// Prints per-rank loads before and after as a table (all ranks up to 64, else a summary).
inline void print_load_table(const std::vector<double>& before, const std::vector<double>& after) {
  std::cout << std::setw(6) << "rank" << std::setw(18) << "load before" << std::setw(18) << "load after" << '\n';
  const std::size_t shown = before.size() <= 64 ? before.size() : 16;
  for (std::size_t r = 0; r < shown; ++r)
    std::cout << std::setw(6) << r << std::setw(18) << std::setprecision(6) << before[r] << std::setw(18) << after[r]
              << '\n';
  if (shown < before.size()) std::cout << "   ... (" << before.size() - shown << " more ranks)\n";
}

}  // namespace mmbal::tool
