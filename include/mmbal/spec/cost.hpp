#pragma once
/// @file
/// Cost specs as the `mmbal` tool and the Python module take them (docs/DESIGN.md §6): `tokens`, `padded`,
/// `attention:alpha=1,beta=0.0001`, `padded-attention:alpha=..,beta=..`, `conv:lambda=..`,
/// `fitted:x=..,y=..,z=..`, `flops:hidden=..,ffn=..,heads=..,kv_heads=..,layers=..[,causal=..,gated=..,backward=..]`.

#include <mmbal/cost/any_batch_cost.hpp>
#include <mmbal/cost/functions.hpp>
#include <mmbal/spec/parse.hpp>

#include <string>
#include <string_view>
#include <variant>

namespace mmbal::spec {

/// Any built-in cost, as a spec names it; dispatch with `std::visit`. The library itself never
/// holds one: it takes any `batch_cost` (the orchestrator through `phase_balancer`).
using any_cost = std::variant<cost::tokens, cost::padded, cost::attention, cost::padded_attention, cost::conv_attention,
                              cost::fitted, cost::flops>;

/// Parses a cost spec. Throws `invalid_input` naming the spec on an unknown name, an unknown
/// parameter or a bad value.
[[nodiscard]] inline any_cost parse_cost(std::string_view text) {
  const parsed_spec s = parse_spec(text);
  if (s.name == "tokens") {
    s.only({});
    return cost::tokens{};
  }
  if (s.name == "padded") {
    s.only({});
    return cost::padded{};
  }
  if (s.name == "attention") {
    s.only({"alpha", "beta"});
    return cost::attention{s.number("alpha", 1.0), s.number("beta", 0.0)};
  }
  if (s.name == "padded-attention") {
    s.only({"alpha", "beta"});
    return cost::padded_attention{s.number("alpha", 1.0), s.number("beta", 0.0)};
  }
  if (s.name == "conv") {
    s.only({"lambda"});
    return cost::conv_attention{s.number("lambda", 0.0)};
  }
  if (s.name == "fitted") {
    s.only({"x", "y", "z"});
    return cost::fitted{s.number("x", 0.0), s.number("y", 1.0), s.number("z", 0.0)};
  }
  if (s.name == "flops") {
    s.only({"hidden", "ffn", "heads", "kv_heads", "layers", "causal", "gated", "backward"});
    cost::model_config m;
    m.hidden = s.integer("hidden", m.hidden);
    m.ffn = s.integer("ffn", m.ffn);
    m.heads = s.integer("heads", m.heads);
    m.kv_heads = s.integer("kv_heads", m.heads);
    m.layers = s.integer("layers", m.layers);
    m.causal = s.boolean("causal", m.causal);
    m.gated_mlp = s.boolean("gated", m.gated_mlp);
    m.backward = s.boolean("backward", m.backward);
    return cost::flops{m};
  }
  throw_invalid("unknown cost spec '", text,
                "' (expected tokens, padded, attention, padded-attention, conv, fitted or flops)");
}

/// The canonical spec of a cost: its `name()` (parameters printed with full precision);
/// `parse_cost(to_spec(c))` gives `c` back.
[[nodiscard]] inline std::string to_spec(const any_cost& c) {
  return std::visit([](const auto& concrete) { return concrete.name(); }, c);
}

/// The cost `c` holds, type-erased for data chosen at run time (a pipeline module's cost).
[[nodiscard]] inline cost::any_batch_cost erase(const any_cost& c) {
  return std::visit([](const auto& concrete) { return cost::any_batch_cost(concrete); }, c);
}

}  // namespace mmbal::spec
