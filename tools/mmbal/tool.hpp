#pragma once
// Shared plumbing of the `mmbal` tool: subcommand registration, workload loading, JSON
// output and the exit-code convention (0 ok, 2 bad input or usage, 1 internal failure).

#include <mmbal/core/error.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

namespace mmbal::tool {

/// A subcommand adds itself to the app and returns the function to run when it was chosen.
using command_setup = std::function<std::function<int()>(CLI::App&)>;

struct registered_command {
  int order;  // position in `mmbal --help`
  command_setup setup;
};

inline std::vector<registered_command>& command_registry() {
  static std::vector<registered_command> registry;
  return registry;
}

/// Registers a subcommand at static-initialization time: `static const bool registered = ...;`
inline bool register_command(int order, command_setup setup) {
  command_registry().push_back({order, std::move(setup)});
  return true;
}

/// Parses `argv` (argv[0] is the program name), runs the chosen subcommand and returns the
/// exit code: 0 success, 2 bad input or usage (the message names file, line and field),
/// 1 anything else. While it runs, std::cout and std::cerr write to `out` and `err`
/// (restored afterwards). Defined in run_tool.cpp; `main` is only this call.
int run_tool(int argc, char** argv, std::ostream& out, std::ostream& err);

/// Microseconds elapsed while running `f` (planning only; callers keep I/O outside).
template <class F>
double elapsed_us(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  std::forward<F>(f)();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
}

/// Prints a JSON object to stdout, one line.
inline void print_json(const nlohmann::json& j) { std::cout << j.dump() << '\n'; }

}  // namespace mmbal::tool
