// The `mmbal` command-line tool (docs/DESIGN.md §6). Subcommands live in cmd_*.cpp and register
// themselves; run_tool.cpp parses, dispatches and maps errors to exit codes:
// 0 success, 2 bad input or usage (the message names file, line and field), 1 anything else.
#include "tool.hpp"

#include <iostream>

int main(int argc, char** argv) { return mmbal::tool::run_tool(argc, argv, std::cout, std::cerr); }
