#pragma once
/// @file
/// Algorithm specs as the `mmbal` tool and the Python module take them (docs/DESIGN.md §6): the
/// one place where a name becomes a partitioner type (`with_partitioner`), the orchestrator's
/// balancer for a spec (`make_balancer`) and `solve`, one entry point over every built-in
/// partitioner and cost.
///
/// Specs: `lpt`, `greedy-ascending`, `padded`, `tolerance:v=<Σl units>`, `conv`, `kk`,
/// `migrate:eps=<fraction>`, each optionally followed by `+refine`.
///
/// Build time: `make_balancer` instantiates every built-in partitioner with every built-in
/// cost, which dominates the compile time of each translation unit that calls it (directly or
/// through `solve`, `with_specs`, `policy_from_specs`). By default it is inline (header-only).
/// A program whose translation units all define `MMBAL_SEPARATE_COMPILATION` sees only its
/// declaration and compiles it once, in the one translation unit that includes
/// <mmbal/spec/separate_compilation.hpp> (the `mmbal` tool does so; docs/DESIGN.md §2).

#include <mmbal/balance/conv_lpt.hpp>
#include <mmbal/balance/greedy_ascending.hpp>
#include <mmbal/balance/karmarkar_karp.hpp>
#include <mmbal/balance/lpt.hpp>
#include <mmbal/balance/migrate.hpp>
#include <mmbal/balance/padded_binary_search.hpp>
#include <mmbal/balance/problem.hpp>
#include <mmbal/balance/tolerance_lpt.hpp>
#include <mmbal/core/error.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/orchestrate/policy.hpp>
#include <mmbal/spec/cost.hpp>
#include <mmbal/spec/parse.hpp>

#include <cmath>
#include <concepts>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#if defined(MMBAL_SEPARATE_COMPILATION)
#define MMBAL_SPEC_DECL
#else
#define MMBAL_SPEC_DECL inline
#endif

namespace mmbal::spec {

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
      balance::migrate_options{}
          .epsilon;  ///< `migrate:eps=` — allowed max excess over the reference (see `balance::migrate`; default 0.1 %)
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
      throw_invalid("algorithm spec '", text, "': unknown suffix '+", suffix, "' (only '+refine' is allowed)");
    out.refine = true;
    base = text.substr(0, plus);
  }
  const parsed_spec s = parse_spec(base);
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
    if (out.tolerance < 0) throw_invalid("algorithm spec '", text, "': tolerance v = ", out.tolerance, " must be >= 0");
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
    if (out.epsilon < 0) throw_invalid("algorithm spec '", text, "': migrate eps = ", out.epsilon, " must be >= 0");
  } else {
    throw_invalid("unknown algorithm '", s.name, "' in spec '", text,
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

/// Stands in for an algorithm that cannot run with a cost (`padded` with `tokens`, ...): a
/// partitioner for every cost that throws `invalid_input` with the reason when called, so a
/// policy for a phase a workload lacks never fails (as the tool's flags need).
struct unsupported_pairing {
  std::string reason;
  template <batch_cost C>
  [[noreturn]] assignment operator()(std::span<const length_t>, rank_t, const C&, const balance::constraints&) const {
    throw_invalid(reason);
  }
};

/// `unsupported_pairing` for algorithm `s` with cost `c`.
template <class C>
[[nodiscard]] unsupported_pairing reject_cost(const algorithm_spec& s, const C& c, const char* needs) {
  return {mmbal::detail::concat("algorithm '", algorithm_name(s.base), "' needs ", needs, "; cost '", c.name(),
                                "' is not one")};
}

}  // namespace detail

/// Calls `f(partitioner, cost)` with the built-in partitioner `spec` names (without `+refine`)
/// and the concrete cost of `cost`: the one place where an algorithm name becomes a type.
/// Returns what `f` returns. When the algorithm cannot run with the cost (`padded` needs a
/// padded cost, `conv` the conv cost, `kk` an additive cost) the partitioner is a
/// `detail::unsupported_pairing`, which throws `invalid_input` saying so when called.
template <class F>
decltype(auto) with_partitioner(const algorithm_spec& spec, const any_cost& cost, F&& f) {
  return std::visit(
      [&](const auto& c) -> decltype(auto) {
        using C = std::decay_t<decltype(c)>;
        switch (spec.base) {
          case algorithm_kind::lpt:
            return f(balance::lpt{}, c);
          case algorithm_kind::greedy_ascending:
            return f(balance::greedy_ascending{}, c);
          case algorithm_kind::tolerance:
            return f(balance::tolerance_lpt{spec.tolerance}, c);
          case algorithm_kind::padded:
            if constexpr (padded_cost<C>)
              return f(balance::padded_binary_search{}, c);
            else
              return f(detail::reject_cost(spec, c, "a padded cost (padded or padded-attention)"), c);
          case algorithm_kind::conv:
            if constexpr (std::same_as<C, cost::conv_attention>)
              return f(balance::conv_lpt{}, c);
            else
              return f(detail::reject_cost(spec, c, "the conv cost (conv:lambda=..)"), c);
          case algorithm_kind::kk:
            if constexpr (additive_cost<C>)
              return f(balance::karmarkar_karp{}, c);
            else
              return f(detail::reject_cost(spec, c, "an additive cost (tokens, attention, fitted or flops)"), c);
          case algorithm_kind::migrate:
            return f(balance::migrate_partitioner{balance::migrate_options{spec.epsilon}}, c);
        }
        throw_invalid("algorithm kind ", static_cast<int>(spec.base), " is unknown");
      },
      cost);
}

/// The algorithm the tool and the Python module run when none is named: the one that
/// `orchestrate::default_balancer` picks for `cost` — `padded` for a padded cost, `lpt+refine`
/// for any other (docs/DESIGN.md §5.1). O(1).
[[nodiscard]] inline algorithm_spec default_algorithm(const any_cost& cost) {
  return std::visit(
      [](const auto& c) {
        algorithm_spec out;
        if constexpr (padded_cost<std::decay_t<decltype(c)>>)
          out.base = algorithm_kind::padded;
        else
          out.refine = true;
        return out;
      },
      cost);
}

/// The orchestrator's balancer for `spec` under `cost`, named by their canonical specs.
/// Defined in mmbal/spec/impl/make_balancer.ipp: inline, or out of line under
/// `MMBAL_SEPARATE_COMPILATION` (see the file comment).
[[nodiscard]] MMBAL_SPEC_DECL orchestrate::phase_balancer make_balancer(const algorithm_spec& spec,
                                                                        const any_cost& cost);

/// Validates the problem (`balance::check_problem_spans`), runs the base algorithm of `spec`
/// with `cost`, then `refine` (default `refine_options`) when `spec.refine`. `migrate` needs
/// `p.origin` (and uses `p.item_bytes`, `p.ranks_per_node`); the others ignore those fields.
/// Deterministic: the same arguments give the same assignment on every rank. Throws
/// `invalid_input` for bad problems (bins = 0, mismatched spans, infeasible or unsupported
/// constraints, a cost the algorithm cannot handle), naming the offending value.
[[nodiscard]] inline assignment solve(const algorithm_spec& spec, const any_cost& cost, const balance::problem& p) {
  balance::check_problem_spans(p);
  return make_balancer(spec, cost).balance(p);
}

}  // namespace mmbal::spec

#if !defined(MMBAL_SEPARATE_COMPILATION)
#include <mmbal/spec/impl/make_balancer.ipp>
#endif
