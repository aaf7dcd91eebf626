#pragma once
/// @file
/// Parsing of `name:key=value,key=value` specs (cost and algorithm specs of docs/DESIGN.md §6),
/// the base of the spec layer (`mmbal/spec/`), which only the tool and the Python module include.

#include <mmbal/core/error.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <system_error>

namespace mmbal::spec {

using mmbal::detail::throw_invalid;

/// A spec split into its name and its parameters (kept sorted by key for determinism).
struct parsed_spec {
  std::string name;
  std::map<std::string, std::string, std::less<>> params;

  /// Throws unless every parameter key is one of `allowed`.
  void only(std::initializer_list<std::string_view> allowed) const {
    for (const auto& [key, value] : params) {
      bool ok = false;
      for (std::string_view a : allowed) ok = ok || key == a;
      if (!ok) throw_invalid("spec '", name, "': unknown parameter '", key, "'");
    }
  }

  /// The parameter as a finite double, or `fallback` when absent.
  [[nodiscard]] double number(std::string_view key, double fallback) const {
    const auto it = params.find(key);
    if (it == params.end()) return fallback;
    const std::string& text = it->second;
    double v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc{} || end != text.data() + text.size() || !std::isfinite(v))
      throw_invalid("spec '", name, "': parameter ", key, " = '", text, "' is not a finite number");
    return v;
  }

  /// The parameter as a non-negative integer, or `fallback` when absent.
  [[nodiscard]] std::uint64_t integer(std::string_view key, std::uint64_t fallback) const {
    const auto it = params.find(key);
    if (it == params.end()) return fallback;
    const std::string& text = it->second;
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc{} || end != text.data() + text.size())
      throw_invalid("spec '", name, "': parameter ", key, " = '", text, "' is not a non-negative integer");
    return v;
  }

  /// The parameter as a boolean (true/false/1/0), or `fallback` when absent.
  [[nodiscard]] bool boolean(std::string_view key, bool fallback) const {
    const auto it = params.find(key);
    if (it == params.end()) return fallback;
    if (it->second == "true" || it->second == "1") return true;
    if (it->second == "false" || it->second == "0") return false;
    throw_invalid("spec '", name, "': parameter ", key, " = '", it->second, "' is not true/false");
  }
};

/// Splits `name[:k=v[,k=v]...]`. Throws on an empty name, a parameter without '=', or a
/// repeated key.
[[nodiscard]] inline parsed_spec parse_spec(std::string_view spec) {
  parsed_spec out;
  const auto colon = spec.find(':');
  out.name = std::string(spec.substr(0, colon));
  if (out.name.empty()) throw_invalid("spec '", spec, "': empty name");
  if (colon == std::string_view::npos) return out;
  std::string_view rest = spec.substr(colon + 1);
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    const auto eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0)
      throw_invalid("spec '", spec, "': parameter '", item, "' is not key=value");
    const std::string key(item.substr(0, eq));
    if (!out.params.emplace(key, std::string(item.substr(eq + 1))).second)
      throw_invalid("spec '", spec, "': parameter '", key, "' given twice");
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
    if (rest.empty()) throw_invalid("spec '", spec, "': trailing ','");
  }
  return out;
}

}  // namespace mmbal::spec
