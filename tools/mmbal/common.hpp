#pragma once
// Output shared by the tool's subcommands: the load table, files named by an option.

#include <mmbal/core/error.hpp>

#include <fstream>
#include <iomanip>
#include <iostream>
#include <string>
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

/// Writes the file `path` that `option` names with `write(stream)`. A path that cannot be opened
/// is bad input (exit 2); a write that fails (a full disk) exits 1, as a failed standard output.
template <class Write>
void write_file(const char* option, const std::string& path, Write&& write) {
  std::ofstream out(path, std::ios::binary);
  if (!out) mmbal::detail::throw_invalid(option, " '", path, "': cannot open for writing");
  write(out);
  out.flush();
  if (!out) mmbal::detail::throw_runtime(option, " '", path, "': write failed");
}

}  // namespace mmbal::tool
