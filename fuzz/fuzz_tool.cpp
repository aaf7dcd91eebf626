// Fuzz target: the `mmbal` tool's argument handling, end to end (`mmbal::tool::run_tool`, the
// very function `main` calls).
//
// Input: the command line, tokens separated by spaces or newlines (without the program
// name), then optionally a NUL byte and the content of a file; the token `@` stands for that
// file's path. Invariants: the exit code is 0 or 2 (1 = an internal error is a finding), never a crash, hang, leak or
// UB; a usage or input error (2) prints a message on the error stream.
//
// The harness runs in a private temporary directory and skips inputs that could leave it or
// ask for legitimately huge work (that is not a bug): tokens with '/' or '\', numbers of
// more than two digits on the command line (five in the file, four for `mask`, whose work
// is per token), hexadecimal and exponent notation.
#include "fuzz_support.hpp"

#include "../tools/mmbal/tool.hpp"

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr const char* input_file = "fuzz_input.jsonl";

/// Longest run of decimal digits in `s`.
std::size_t longest_digit_run(std::string_view s) {
  std::size_t best = 0, run = 0;
  for (char c : s) {
    run = std::isdigit(static_cast<unsigned char>(c)) ? run + 1 : 0;
    best = std::max(best, run);
  }
  return best;
}

bool harmless_token(std::string_view t) {
  if (t.find_first_of("/\\") != std::string_view::npos) return false;
  if (longest_digit_run(t) > 2) return false;
  for (std::size_t k = 0; k + 1 < t.size(); ++k) {
    const char c = t[k], next = static_cast<char>(std::tolower(static_cast<unsigned char>(t[k + 1])));
    if (std::isdigit(static_cast<unsigned char>(c)) && (next == 'x' || next == 'e' || next == 'b' || next == 'o'))
      return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  char dir[] = "/tmp/mmbal_fuzz_tool_XXXXXX";
  if (!mkdtemp(dir) || !std::filesystem::exists(dir)) std::abort();
  std::filesystem::current_path(dir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const auto nul = all.find('\0');
  const std::string_view command = all.substr(0, nul);
  const std::string_view file = nul == std::string_view::npos ? std::string_view{} : all.substr(nul + 1);

  std::vector<std::string> tokens{"mmbal"};
  bool mask = false;
  for (std::size_t at = 0; at < command.size();) {
    const auto end = std::min(command.find_first_of(" \n", at), command.size());
    if (end > at) {
      const std::string_view t = command.substr(at, end - at);
      if (!harmless_token(t)) return 0;
      mask = mask || t == "mask";
      tokens.emplace_back(t == "@" ? std::string_view(input_file) : t);
    }
    at = end + 1;
  }
  if (longest_digit_run(file) > (mask ? 4u : 5u)) return 0;
  {
    std::ofstream f(input_file, std::ios::binary | std::ios::trunc);
    f << file;
  }
  std::vector<char*> argv;
  for (std::string& t : tokens) argv.push_back(t.data());
  argv.push_back(nullptr);

  std::ostringstream out, err;
  const int code = mmbal::tool::run_tool(static_cast<int>(tokens.size()), argv.data(), out, err);
  // 1 means an internal error: bad input must give 2 with a message instead.
  mmbal::fuzz::require(code == 0 || code == 2, "exit code is 0 or 2");
  mmbal::fuzz::require(code != 2 || !err.str().empty(), "exit code 2 comes with a message");
  // Files the command wrote (generate --output, simulate --svg) go; the directory stays.
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::current_path()))
    std::filesystem::remove_all(entry.path());
  return 0;
}
