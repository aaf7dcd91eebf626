#pragma once
// Plain-text output shared by the tool's subcommands.

#include <iomanip>
#include <iostream>
#include <vector>

namespace mmbal::tool {

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
