#pragma once
/// @file
/// Cost specs as the `mmbal` tool takes them (docs/DESIGN.md §6): `tokens`, `padded`,
/// `attention:alpha=1,beta=0.0001`, `padded-attention:alpha=..,beta=..`, `conv:lambda=..`,
/// `fitted:x=..,y=..,z=..`, `flops:hidden=..,ffn=..,heads=..,kv_heads=..,layers=..[,causal=..,gated=..,backward=..]`.

#include <mmbal/cost/functions.hpp>
#include <mmbal/detail/spec_parse.hpp>

#include <string>
#include <string_view>
#include <variant>

namespace mmbal::cost {

/// Any built-in cost; dispatch with `std::visit`.
using any_cost = std::variant<tokens, padded, attention, padded_attention, conv_attention, fitted, flops>;

/// Parses a cost spec. Throws `invalid_input` naming the spec on an unknown name, an unknown
/// parameter or a bad value.
[[nodiscard]] inline any_cost parse_cost(std::string_view text) {
  const detail::parsed_spec s = detail::parse_spec(text);
  if (s.name == "tokens") {
    s.only({});
    return tokens{};
  }
  if (s.name == "padded") {
    s.only({});
    return padded{};
  }
  if (s.name == "attention") {
    s.only({"alpha", "beta"});
    return attention{s.number("alpha", 1.0), s.number("beta", 0.0)};
  }
  if (s.name == "padded-attention") {
    s.only({"alpha", "beta"});
    return padded_attention{s.number("alpha", 1.0), s.number("beta", 0.0)};
  }
  if (s.name == "conv") {
    s.only({"lambda"});
    return conv_attention{s.number("lambda", 0.0)};
  }
  if (s.name == "fitted") {
    s.only({"x", "y", "z"});
    return fitted{s.number("x", 0.0), s.number("y", 1.0), s.number("z", 0.0)};
  }
  if (s.name == "flops") {
    s.only({"hidden", "ffn", "heads", "kv_heads", "layers", "causal", "gated", "backward"});
    model_config m;
    m.hidden = s.integer("hidden", m.hidden);
    m.ffn = s.integer("ffn", m.ffn);
    m.heads = s.integer("heads", m.heads);
    m.kv_heads = s.integer("kv_heads", m.heads);
    m.layers = s.integer("layers", m.layers);
    m.causal = s.boolean("causal", m.causal);
    m.gated_mlp = s.boolean("gated", m.gated_mlp);
    m.backward = s.boolean("backward", m.backward);
    return flops{m};
  }
  detail::throw_invalid("unknown cost spec '", text,
                        "' (expected tokens, padded, attention, padded-attention, conv, fitted or flops)");
}

/// The canonical spec of a cost (parameters printed with full precision).
[[nodiscard]] inline std::string to_spec(const any_cost& c) {
  struct visitor {
    std::string operator()(const tokens&) const { return "tokens"; }
    std::string operator()(const padded&) const { return "padded"; }
    std::string operator()(const attention& a) const {
      return detail::concat("attention:alpha=", a.alpha(), ",beta=", a.beta());
    }
    std::string operator()(const padded_attention& a) const {
      return detail::concat("padded-attention:alpha=", a.alpha(), ",beta=", a.beta());
    }
    std::string operator()(const conv_attention& a) const { return detail::concat("conv:lambda=", a.lambda()); }
    std::string operator()(const fitted& f) const {
      return detail::concat("fitted:x=", f.x(), ",y=", f.y(), ",z=", f.z());
    }
    std::string operator()(const flops& f) const {
      const model_config& m = f.model();
      return detail::concat("flops:hidden=", m.hidden, ",ffn=", m.ffn, ",heads=", m.heads, ",kv_heads=", m.kv_heads,
                            ",layers=", m.layers, ",causal=", m.causal ? "true" : "false",
                            ",gated=", m.gated_mlp ? "true" : "false", ",backward=", m.backward ? "true" : "false");
    }
  };
  return std::visit(visitor{}, c);
}

}  // namespace mmbal::cost
