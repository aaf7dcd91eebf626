#pragma once
/// @file
/// Algorithm specs as the `mmbal` tool and the orchestrator take them (docs/DESIGN.md §6) and one
/// dispatch entry point, `solve`, over every partitioner and every built-in cost.
///
/// Specs: `lpt`, `greedy-ascending`, `padded`, `tolerance:v=<Σl units>`, `conv`, `kk`,
/// `migrate:eps=<fraction>`, each optionally followed by `+refine`.

#include <mmbal/balance/constraints.hpp>
#include <mmbal/balance/conv_lpt.hpp>
#include <mmbal/balance/greedy_ascending.hpp>
#include <mmbal/balance/karmarkar_karp.hpp>
#include <mmbal/balance/lpt.hpp>
#include <mmbal/balance/migrate.hpp>
#include <mmbal/balance/padded_binary_search.hpp>
#include <mmbal/balance/problem.hpp>
#include <mmbal/balance/refine.hpp>
#include <mmbal/balance/tolerance_lpt.hpp>
#include <mmbal/core/error.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/cost/spec.hpp>
#include <mmbal/detail/spec_parse.hpp>

#include <cmath>
#include <concepts>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>

namespace mmbal::balance {

/// The base algorithms a spec can name.
enum class algorithm_kind : std::uint8_t {
  lpt,               ///< `lpt` — OrchMLLM Alg. 1
  greedy_ascending,  ///< `greedy-ascending` — DistTrain Alg. 2
  padded,            ///< `padded` — OrchMLLM Alg. 2 (padded costs)
  tolerance,         ///< `tolerance:v=..` — OrchMLLM Alg. 4
  conv,              ///< `conv` — OrchMLLM Alg. 5 (conv_attention)
  kk,                ///< `kk` — Karmarkar–Karp largest differencing
  migrate,           ///< `migrate:eps=..` — locality-aware minimal migration
};

/// A parsed algorithm spec: the base algorithm, its parameters, and whether `refine` runs
/// after it. Parameters not used by `base` keep their defaults (and are not printed).
struct algorithm_spec {
  algorithm_kind base = algorithm_kind::lpt;
  double tolerance = 0.0;  ///< `tolerance:v=` — window on Σl, in length units (default 0)
  double epsilon =
      migrate_options{}
          .epsilon;     ///< `migrate:eps=` — allowed max excess over lpt's max (default as `migrate_options`, 0.1 %)
  bool refine = false;  ///< `+refine` — local search after the base algorithm
  friend bool operator==(const algorithm_spec&, const algorithm_spec&) = default;
};

/// The spec name of a base algorithm.
[[nodiscard]] inline std::string_view algorithm_name(algorithm_kind k) noexcept {
  switch (k) {
    case algorithm_kind::lpt:
      return "lpt";
    case algorithm_kind::greedy_ascending:
      return "greedy-ascending";
    case algorithm_kind::padded:
      return "padded";
    case algorithm_kind::tolerance:
      return "tolerance";
    case algorithm_kind::conv:
      return "conv";
    case algorithm_kind::kk:
      return "kk";
    case algorithm_kind::migrate:
      return "migrate";
  }
  return "?";
}

/// Parses an algorithm spec (docs/DESIGN.md §6). Throws `invalid_input` naming the spec on an
/// unknown algorithm, an unknown or malformed parameter, a negative/NaN value, or an unknown
/// `+` suffix.
[[nodiscard]] inline algorithm_spec parse_algorithm(std::string_view text) {
  algorithm_spec out;
  std::string_view base = text;
  // The suffix starts at the first '+' not followed by a digit: a '+' inside a number
  // (`migrate:eps=1e+24`, as `to_spec` prints large values) is not one (found by fuzz_specs).
  auto plus = text.find('+');
  while (plus != std::string_view::npos && plus + 1 < text.size() && text[plus + 1] >= '0' && text[plus + 1] <= '9')
    plus = text.find('+', plus + 1);
  if (plus != std::string_view::npos) {
    const std::string_view suffix = text.substr(plus + 1);
    if (suffix != "refine")
      mmbal::detail::throw_invalid("algorithm spec '", text, "': unknown suffix '+", suffix,
                                   "' (only '+refine' is allowed)");
    out.refine = true;
    base = text.substr(0, plus);
  }
  const mmbal::detail::parsed_spec s = mmbal::detail::parse_spec(base);
  if (s.name == "lpt") {
    s.only({});
    out.base = algorithm_kind::lpt;
  } else if (s.name == "greedy-ascending") {
    s.only({});
    out.base = algorithm_kind::greedy_ascending;
  } else if (s.name == "padded") {
    s.only({});
    out.base = algorithm_kind::padded;
  } else if (s.name == "tolerance") {
    s.only({"v"});
    out.base = algorithm_kind::tolerance;
    out.tolerance = s.number("v", 0.0);
    if (out.tolerance < 0)
      mmbal::detail::throw_invalid("algorithm spec '", text, "': tolerance v = ", out.tolerance, " must be >= 0");
  } else if (s.name == "conv") {
    s.only({});
    out.base = algorithm_kind::conv;
  } else if (s.name == "kk") {
    s.only({});
    out.base = algorithm_kind::kk;
  } else if (s.name == "migrate") {
    s.only({"eps"});
    out.base = algorithm_kind::migrate;
    out.epsilon = s.number("eps", out.epsilon);
    if (out.epsilon < 0)
      mmbal::detail::throw_invalid("algorithm spec '", text, "': migrate eps = ", out.epsilon, " must be >= 0");
  } else {
    mmbal::detail::throw_invalid("unknown algorithm '", s.name, "' in spec '", text,
                                 "' (expected lpt, greedy-ascending, padded, tolerance:v=.., conv, kk or "
                                 "migrate:eps=.., optionally followed by +refine)");
  }
  return out;
}

/// The canonical spec text (parameters with full precision); `parse_algorithm(to_spec(s)) == s`
/// for the parameters the base algorithm uses.
[[nodiscard]] inline std::string to_spec(const algorithm_spec& s) {
  std::string out(algorithm_name(s.base));
  if (s.base == algorithm_kind::tolerance) out += mmbal::detail::concat(":v=", s.tolerance);
  if (s.base == algorithm_kind::migrate) out += mmbal::detail::concat(":eps=", s.epsilon);
  if (s.refine) out += "+refine";
  return out;
}

namespace detail {

/// Checks a problem's spans against each other and the bin count.
inline void check_problem_spans(const problem& p) {
  if (p.bins == 0) mmbal::detail::throw_invalid("balance: bins = 0 (need at least one bin)");
  checked_count(p.weights.size(), "item count");
  if (!p.origin.empty()) {
    if (p.origin.size() != p.weights.size())
      mmbal::detail::throw_invalid("balance: origin has ", p.origin.size(), " entries but there are ", p.weights.size(),
                                   " items");
    for (std::size_t i = 0; i < p.origin.size(); ++i)
      if (p.origin[i] >= p.bins)
        mmbal::detail::throw_invalid("balance: origin of item ", i, " is rank ", p.origin[i], " >= bins ", p.bins);
  }
  if (!p.item_bytes.empty() && p.item_bytes.size() != p.weights.size())
    mmbal::detail::throw_invalid("balance: item_bytes has ", p.item_bytes.size(), " entries but there are ",
                                 p.weights.size(), " items");
}

/// Throws `invalid_input`: algorithm `s` cannot run with cost `c`.
template <class C>
[[noreturn]] void reject_cost(const algorithm_spec& s, const C& c, const char* needs) {
  mmbal::detail::throw_invalid("algorithm '", algorithm_name(s.base), "' needs ", needs, "; cost '",
                               cost::to_spec(cost::any_cost{c}), "' is not one");
}

/// Runs the base algorithm of `s` with cost `c`.
template <batch_cost C>
[[nodiscard]] assignment solve_base(const algorithm_spec& s, const C& c, const problem& p) {
  switch (s.base) {
    case algorithm_kind::lpt:
      return lpt{}(p.weights, p.bins, c, p.limits);
    case algorithm_kind::greedy_ascending:
      return greedy_ascending{}(p.weights, p.bins, c, p.limits);
    case algorithm_kind::tolerance:
      return tolerance_lpt{s.tolerance}(p.weights, p.bins, c, p.limits);
    case algorithm_kind::padded:
      if constexpr (padded_cost<C>)
        return padded_binary_search{}(p.weights, p.bins, c, p.limits);
      else
        reject_cost(s, c, "a padded cost (padded or padded-attention)");
    case algorithm_kind::conv:
      if constexpr (std::same_as<C, cost::conv_attention>)
        return conv_lpt{}(p.weights, p.bins, c, p.limits);
      else
        reject_cost(s, c, "the conv cost (conv:lambda=..)");
    case algorithm_kind::kk:
      if constexpr (additive_cost<C>)
        return karmarkar_karp{}(p.weights, p.bins, c, p.limits);
      else
        reject_cost(s, c, "an additive cost (tokens, attention, fitted or flops)");
    case algorithm_kind::migrate:
      return migrate(p.weights, p.origin, p.item_bytes, p.bins, c, p.limits,
                     migrate_options{s.epsilon, p.ranks_per_node})
          .placement;
  }
  mmbal::detail::throw_invalid("algorithm kind ", static_cast<int>(s.base), " is unknown");
}

}  // namespace detail

/// Validates the problem, runs the base algorithm of `spec` with `cost`, then `refine` (default
/// `refine_options`) when `spec.refine`. `migrate` needs `p.origin` (and uses `p.item_bytes`,
/// `p.ranks_per_node`); the others ignore those fields. Deterministic: the same arguments give the same assignment on
/// every rank. Throws `invalid_input` for bad problems (bins = 0, mismatched spans, infeasible or unsupported
/// constraints, a cost the algorithm cannot handle), naming the offending value.
[[nodiscard]] inline assignment solve(const algorithm_spec& spec, const cost::any_cost& cost, const problem& p) {
  detail::check_problem_spans(p);
  return std::visit(
      [&](const auto& c) {
        assignment a = detail::solve_base(spec, c, p);
        if (spec.refine) a = refine(p.weights, a, c, p.limits);
        return a;
      },
      cost);
}

}  // namespace mmbal::balance
