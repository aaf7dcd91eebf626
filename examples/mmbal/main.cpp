// The `mmbal` command-line tool (docs/DESIGN.md §6). Subcommands live in cmd_*.cpp and register
// themselves; this file parses, dispatches and maps errors to exit codes:
// 0 success, 2 bad input or usage (the message names file, line and field), 1 anything else.
#include "tool.hpp"

#include <algorithm>
#include <exception>
#include <iostream>

int main(int argc, char** argv) {
  CLI::App app{"mmbal: load balancing for multimodal LLM training"};
  app.require_subcommand(1);
  auto& registry = mmbal::tool::command_registry();
  std::stable_sort(registry.begin(), registry.end(), [](const auto& a, const auto& b) { return a.order < b.order; });
  std::vector<std::pair<CLI::App*, std::function<int()>>> commands;
  for (const auto& c : registry) {
    const std::size_t before = app.get_subcommands({}).size();
    auto run = c.setup(app);
    const auto subs = app.get_subcommands({});
    if (subs.size() > before) commands.emplace_back(subs.back(), std::move(run));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    for (auto& [sub, run] : commands)
      if (sub->parsed()) return run();
    return 2;
  } catch (const mmbal::invalid_input& e) {
    std::cerr << "mmbal: error: " << e.what() << '\n';
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "mmbal: internal error: " << e.what() << '\n';
    return 1;
  }
}
