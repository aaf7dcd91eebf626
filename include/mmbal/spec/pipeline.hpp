#pragma once
/// @file
/// Pipeline schedule and order names, as the `mmbal pipeline` tool takes them (docs/DESIGN.md
/// §5.7, §6): `1f1b`, `interleaved:V`, `gpipe`; `identity`, `verl`, `disttrain`, `search`.
/// The library takes the typed `pipeline::schedule` and `pipeline::order_kind`.

#include <mmbal/core/error.hpp>
#include <mmbal/pipeline/orders.hpp>
#include <mmbal/pipeline/schedule.hpp>

#include <cstdint>
#include <string_view>

namespace mmbal::spec {

/// Parses "1f1b", "interleaved:V" (V ≥ 1, also "interleaved:v=V") or "gpipe". Throws
/// `invalid_input` naming the spec otherwise.
[[nodiscard]] inline pipeline::schedule parse_schedule(std::string_view text) {
  if (text == "1f1b") return {};
  if (text == "gpipe") return {pipeline::schedule_kind::gpipe, 1};
  constexpr std::string_view prefix = "interleaved:";
  if (text.substr(0, prefix.size()) == prefix) {
    std::string_view v = text.substr(prefix.size());
    if (v.substr(0, 2) == "v=") v.remove_prefix(2);
    std::uint32_t chunks = 0;
    for (const char c : v) {
      if (c < '0' || c > '9' || chunks > 100000) {
        chunks = 0;
        break;
      }
      chunks = chunks * 10 + static_cast<std::uint32_t>(c - '0');
    }
    if (!v.empty() && chunks >= 1) return {pipeline::schedule_kind::interleaved, chunks};
  }
  mmbal::detail::throw_invalid("unknown schedule '", text, "' (expected 1f1b, interleaved:V with V >= 1, or gpipe)");
}

/// Parses a name of `to_string(order_kind)`. Throws `invalid_input` naming it otherwise.
[[nodiscard]] inline pipeline::order_kind parse_order_kind(std::string_view s) {
  for (const pipeline::order_kind k : pipeline::all_order_kinds)
    if (pipeline::to_string(k) == s) return k;
  mmbal::detail::throw_invalid("unknown order '", s, "' (expected identity, verl, disttrain or search)");
}

}  // namespace mmbal::spec
