// The `mmbal` tool's dispatch (docs/DESIGN.md §6), separate from main() so that the argument
// fuzzer (fuzz/fuzz_tool.cpp) runs exactly what the executable runs.
#include "tool.hpp"

#include <algorithm>
#include <cctype>
#include <exception>
#include <iostream>
#include <new>
#include <streambuf>
#include <string>
#include <utility>
#include <vector>

namespace mmbal::tool {

namespace {

/// Points a standard stream at another stream's buffer for one scope: the subcommands print
/// to std::cout / std::cerr, run_tool's caller chooses where that goes.
class redirect {
 public:
  redirect(std::ostream& stream, std::ostream& target)
      : stream_(stream), saved_(&stream == &target ? nullptr : stream.rdbuf(target.rdbuf())) {}
  ~redirect() {
    if (saved_) stream_.rdbuf(saved_);
  }
  redirect(const redirect&) = delete;
  redirect& operator=(const redirect&) = delete;

 private:
  std::ostream& stream_;
  std::streambuf* saved_;
};

}  // namespace

int run_tool(int argc, char** argv, std::ostream& out, std::ostream& err) {
  const redirect to_out(std::cout, out), to_err(std::cerr, err);
  try {
    CLI::App app{"mmbal: load balancing for multimodal LLM training"};
    app.require_subcommand(1);
    auto& registry = command_registry();
    std::stable_sort(registry.begin(), registry.end(), [](const auto& a, const auto& b) { return a.order < b.order; });
    std::vector<std::pair<CLI::App*, std::function<int()>>> commands;
    for (const auto& c : registry) {
      const std::size_t before = app.get_subcommands({}).size();
      auto run = c.setup(app);
      const auto subs = app.get_subcommands({});
      if (subs.size() > before) commands.emplace_back(subs.back(), std::move(run));
    }
    // CLI11 reads integers with strtoull in base 0: "010" was 8, "0x10" 16, and "-5" wrapped
    // to 2^64 - 5 in every unsigned option. Values must be plain decimals, without a sign.
    const CLI::Validator plain_decimal(
        [](std::string& value) -> std::string {
          const bool has_sign =
              value.size() > 1 && (value[0] == '-' || value[0] == '+') && (std::isdigit(value[1]) || value[1] == '.');
          const bool based =
              value.size() > 1 && value[0] == '0' && (std::isdigit(value[1]) || value[1] == 'x' || value[1] == 'X');
          if (has_sign || based) return "'" + value + "' is not a plain decimal number >= 0 (no sign, no leading zero)";
          return {};
        },
        "", "plain decimal");
    for (auto& [sub, run] : commands)
      for (CLI::Option* option : sub->get_options())
        if (option->get_type_size_max() > 0) option->check(plain_decimal);
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      const int code = app.exit(e, out, err);
      return code == 0 ? 0 : 2;
    }
    for (auto& [sub, run] : commands)
      if (sub->parsed()) {
        const int code = run();
        // A full disk or a closed pipe lost the output: not a success (every subcommand
        // writes through `out`).
        if (!out.flush()) {
          err << "mmbal: error: writing the output failed\n";
          return 1;
        }
        return code;
      }
    return 2;
  } catch (const invalid_input& e) {
    err << "mmbal: error: " << e.what() << '\n';
    return 2;
  } catch (const runtime_failure& e) {
    err << "mmbal: error: " << e.what() << '\n';
    return 1;
  } catch (const std::bad_alloc&) {
    // Not a defect of the input or of mmbal: the command needs more memory than the process
    // may have (millions of ranks under a `ulimit -v`, say); say so, not "internal error".
    err << "mmbal: out of memory: the command needs more memory than this process may allocate\n";
    return 1;
  } catch (const std::exception& e) {
    err << "mmbal: internal error: " << e.what() << '\n';
    return 1;
  }
}

}  // namespace mmbal::tool
