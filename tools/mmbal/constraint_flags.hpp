#pragma once
// The balancing-constraint flags of `mmbal balance` as text → constraints (shared with the
// spec fuzzer, fuzz/fuzz_specs.cpp, so that it parses exactly what the tool parses).

#include <mmbal/balance/constraints.hpp>
#include <mmbal/core/error.hpp>

#include <charconv>
#include <cstdint>
#include <string_view>
#include <system_error>

namespace mmbal::tool {

/// `--count-cap`: empty = no cap, `equal` = ⌊n/d⌋ or ⌈n/d⌉ per rank, else a positive integer
/// N = at most N per rank. Throws `invalid_input` naming the text otherwise.
inline balance::count_cap parse_count_cap(std::string_view text) {
  using mode = balance::count_cap::mode;
  if (text.empty()) return {};
  if (text == "equal") return {mode::equal, 0};
  std::uint32_t cap = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), cap);
  if (ec != std::errc{} || end != text.data() + text.size() || cap == 0)
    detail::throw_invalid("--count-cap: '", text, "' is neither 'equal' nor a positive integer");
  return {mode::fixed, cap};
}

}  // namespace mmbal::tool
