#pragma once
/// @file
/// Pipeline schedule and order names, as the `mmbal pipeline` tool takes them (docs/DESIGN.md
/// §5.7, §6): `1f1b`, `interleaved:V`, `gpipe`; `identity`, `verl`, `disttrain`, `search`.
/// The library takes the typed `pipeline::schedule` and `pipeline::order_kind`.

#include <mmbal/core/error.hpp>
#include <mmbal/pipeline/orders.hpp>
#include <mmbal/pipeline/schedule.hpp>

#include <algorithm>
#include <cstdint>
#include <string_view>

namespace mmbal::spec {

/// Parses "1f1b", "interleaved:V" (1 ≤ V ≤ `pipeline::max_chunks`, also "interleaved:v=V") or
/// "gpipe". Throws `invalid_input` naming the spec otherwise.
[[nodiscard]] inline pipeline::schedule parse_schedule(std::string_view text) {
  if (text == "1f1b") return {};
  if (text == "gpipe") return {pipeline::schedule_kind::gpipe, 1};
  constexpr std::string_view prefix = "interleaved:";
  if (text.substr(0, prefix.size()) == prefix) {
    std::string_view v = text.substr(prefix.size());
    if (v.substr(0, 2) == "v=") v.remove_prefix(2);
    std::uint64_t chunks = 0;
    bool digits = !v.empty();
    for (const char c : v) {
      if (c < '0' || c > '9') digits = false;
      if (!digits) break;
      chunks = std::min<std::uint64_t>(chunks * 10 + static_cast<std::uint64_t>(c - '0'), UINT32_MAX);
    }
    if (digits && (chunks == 0 || chunks > pipeline::max_chunks))
      mmbal::detail::throw_invalid("schedule '", text, "': V = ", v, " is out of range [1, ", pipeline::max_chunks,
                                   "]");
    if (digits) return {pipeline::schedule_kind::interleaved, static_cast<std::uint32_t>(chunks)};
  }
  mmbal::detail::throw_invalid("unknown schedule '", text,
                               "' (expected 1f1b, interleaved:V with 1 <= V <= ", pipeline::max_chunks, ", or gpipe)");
}

/// Parses a name of `to_string(order_kind)`. Throws `invalid_input` naming it otherwise.
[[nodiscard]] inline pipeline::order_kind parse_order_kind(std::string_view s) {
  for (const pipeline::order_kind k : pipeline::all_order_kinds)
    if (pipeline::to_string(k) == s) return k;
  mmbal::detail::throw_invalid("unknown order '", s, "' (expected identity, verl, disttrain or search)");
}

}  // namespace mmbal::spec
