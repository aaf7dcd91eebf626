#pragma once
/// @file
/// Orchestrator policies from spec strings (the tool's `--cost-<phase>` / `--algorithm-<phase>`
/// flags, the Python module's `(cost_spec, algorithm_spec)` pairs).

#include <mmbal/core/error.hpp>
#include <mmbal/orchestrate/policy.hpp>
#include <mmbal/spec/algorithm.hpp>
#include <mmbal/spec/cost.hpp>

#include <string_view>
#include <utility>

namespace mmbal::spec {

/// `base` with its cost and/or algorithm replaced by the ones the specs name; both empty return
/// `base`. An empty cost spec keeps `base`'s cost (read back from its name, so `base` must run a
/// built-in cost for it to be kept while the algorithm changes); an empty algorithm spec with a
/// new cost runs that cost's `default_algorithm` (`padded` for a padded cost, `lpt+refine` for
/// any other), as the default policies do. Constraints are kept. Throws `invalid_input` when a
/// spec does not parse.
[[nodiscard]] inline orchestrate::phase_policy with_specs(orchestrate::phase_policy base, std::string_view cost_spec,
                                                          std::string_view algorithm_spec) {
  if (cost_spec.empty() && algorithm_spec.empty()) return base;
  const any_cost c = parse_cost(cost_spec.empty() ? std::string_view(base.balancer.cost_name()) : cost_spec);
  const struct algorithm_spec a = algorithm_spec.empty() ? default_algorithm(c) : parse_algorithm(algorithm_spec);
  base.balancer = make_balancer(a, c);
  return base;
}

/// The policy of `phase` from spec strings: `orchestrate::default_policy(phase)` with the
/// specs applied (`with_specs`; an empty string keeps the phase's default).
/// Throws `invalid_input` naming the phase and the spec when a spec does not parse.
[[nodiscard]] inline orchestrate::phase_policy policy_from_specs(std::string_view phase, std::string_view cost_spec,
                                                                 std::string_view algorithm_spec) {
  try {
    return with_specs(orchestrate::default_policy(phase), cost_spec, algorithm_spec);
  } catch (const invalid_input& e) {
    throw_invalid("phase '", phase, "': ", e.what());
  }
}

}  // namespace mmbal::spec
