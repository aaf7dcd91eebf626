// The `mmbal` command-line tool (docs/DESIGN.md §6). Subcommands live in cmd_*.cpp and register
// themselves; run_tool.cpp parses, dispatches and maps errors to exit codes:
// 0 success, 2 bad input or usage (the message names file, line and field), 1 anything else.
#include "tool.hpp"
#include "workload_input.hpp"

#include <iostream>

int main(int argc, char** argv) {
  // Every page a subcommand's plan writes is new to this short-lived process: fault them in
  // 2 MiB at a time, and back them while the input is read (`read_workload`; docs/DESIGN.md
  // §5.5 "Fresh memory").
  mmbal::tool::reserved_heap() = mmbal::reserve_huge_page_heap();
  return mmbal::tool::run_tool(argc, argv, std::cout, std::cerr);
}
