// Fuzz target: every spec parser the tool uses — cost (`--cost`), algorithm (`--algorithm`),
// count cap (`--count-cap`) and capacity (`--capacity`, parsed by CLI11 as the tool does);
// the schedule, order and token-distributor names on each of those lines — and `spec::solve`
// on a small problem with what they accepted.
//
// Input: four lines (cost, algorithm, count cap, capacity; an empty capacity line = none),
// then bytes: bins (1..8), items (0..31), and per item a u16 weight, an origin byte and a
// group byte (0 = no group; any non-zero group turns the groups constraint on).
// Invariants: parse(to_spec(x)) == x (a name parser accepts exactly its names); a solved assignment is valid over
// `bins` bins, honours the count cap, the capacity and the groups, and its maximum is at least the lower bound
// (which refuses only a total cost that overflows a double, when the loads overflow too).
#include "fuzz_support.hpp"

#include "../tools/mmbal/constraint_flags.hpp"

#include <mmbal/cost/metrics.hpp>
#include <mmbal/spec/algorithm.hpp>
#include <mmbal/spec/context.hpp>
#include <mmbal/spec/cost.hpp>
#include <mmbal/spec/pipeline.hpp>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace mmbal;

void check_solution(const assignment& a, const balance::problem& p, const spec::any_cost& cost_fn) {
  a.validate();
  fuzz::require(a.bins == p.bins && a.size() == p.weights.size(), "assignment covers every item over bins");
  const partition part = a.to_partition();
  std::vector<std::size_t> counts(p.bins, 0);
  for (rank_t b : part.bin_of) ++counts[b];
  const std::size_t n = p.weights.size();
  if (p.limits.counts.kind == balance::count_cap::mode::equal)
    for (std::size_t c : counts) fuzz::require(c == n / p.bins || c == (n + p.bins - 1) / p.bins, "equal counts");
  if (p.limits.counts.kind == balance::count_cap::mode::fixed)
    for (std::size_t c : counts) fuzz::require(c <= p.limits.counts.cap, "fixed count cap");
  if (!p.limits.groups.empty()) {
    std::map<std::uint64_t, rank_t> bin_of_group;
    for (std::size_t i = 0; i < n; ++i) {
      const auto [it, fresh] = bin_of_group.emplace(p.limits.groups[i], part.bin_of[i]);
      fuzz::require(fresh || it->second == part.bin_of[i], "a group shares one bin");
    }
  }
  std::visit(
      [&](const auto& c) {
        const std::vector<double> loads = bin_loads(a, p.weights, c);
        const double max = loads.empty() ? 0.0 : *std::max_element(loads.begin(), loads.end());
        if (p.limits.capacity && std::isfinite(max))
          for (double l : loads) fuzz::require(l <= *p.limits.capacity * (1 + 1e-9) + 1e-9, "capacity");
        double lb = 0;
        const bool bounded = fuzz::accepts([&] {
          lb = p.limits.counts.kind == balance::count_cap::mode::equal ? equal_count_lower_bound(p.weights, p.bins, c)
                                                                       : lower_bound(p.weights, p.bins, c);
        });
        // The bounds refuse only a total cost that overflows a double; the loads hold at least
        // that total (every built-in batch cost is at least the sum of its items' solo costs),
        // up to the rounding of another summation order.
        double sum = 0;
        for (double l : loads) sum += l;
        if (!bounded)
          fuzz::require(sum >= std::numeric_limits<double>::max() * (1 - 1e-9),
                        "lower_bound refuses only an overflowing total");
        if (bounded && std::isfinite(max)) fuzz::require(max >= lb * (1 - 1e-9), "lower bound <= max");
      },
      cost_fn);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::input in(data, size);
  const std::string cost_text(in.line()), algorithm_text(in.line()), cap_text(in.line()), capacity_text(in.line());

  for (const std::string* text : {&cost_text, &algorithm_text, &cap_text, &capacity_text}) {
    pipeline::schedule sched;
    if (fuzz::accepts([&] { sched = spec::parse_schedule(*text); }))
      fuzz::require(spec::parse_schedule(pipeline::to_spec(sched)) == sched, "parse_schedule(to_spec(s)) == s");
    pipeline::order_kind order{};
    if (fuzz::accepts([&] { order = spec::parse_order_kind(*text); }))
      fuzz::require(pipeline::to_string(order) == *text, "parse_order_kind accepts only the order names");
    spec::any_distributor distributor;
    if (fuzz::accepts([&] { distributor = spec::parse_distributor(*text, 7); }))
      fuzz::require(spec::distributor_name(distributor) == *text, "parse_distributor accepts only the names");
  }

  std::optional<spec::any_cost> cost_fn;
  if (fuzz::accepts([&] { cost_fn = spec::parse_cost(cost_text); })) {
    const std::string spec = spec::to_spec(*cost_fn);
    fuzz::require(spec::to_spec(spec::parse_cost(spec)) == spec, "parse_cost(to_spec(c)) == c");
  }
  std::optional<spec::algorithm_spec> algorithm;
  if (fuzz::accepts([&] { algorithm = spec::parse_algorithm(algorithm_text); }))
    fuzz::require(spec::parse_algorithm(spec::to_spec(*algorithm)) == *algorithm, "parse_algorithm(to_spec(a)) == a");
  std::optional<balance::count_cap> cap;
  fuzz::accepts([&] { cap = tool::parse_count_cap(cap_text); });
  std::optional<double> capacity;
  bool capacity_ok = true;
  if (!capacity_text.empty()) {
    double v = 0;
    capacity_ok = CLI::detail::lexical_cast(std::string(capacity_text), v);
    if (capacity_ok) capacity = v;
  }
  if (!cost_fn || !algorithm || !cap || !capacity_ok) return 0;

  const rank_t bins = 1 + in.byte() % 8;
  const std::size_t n = in.byte() % 32;
  std::vector<length_t> weights(n);
  std::vector<rank_t> origin(n);
  std::vector<std::uint64_t> groups(n);
  bool grouped = false;
  for (std::size_t i = 0; i < n; ++i) {
    weights[i] = in.u16();
    origin[i] = in.byte() % bins;
    const std::uint8_t g = in.byte();
    grouped = grouped || g != 0;
    groups[i] = g != 0 ? g : 1000 + i;  // no group: a group of its own
  }
  balance::problem p;
  p.weights = weights;
  p.bins = bins;
  p.origin = origin;
  p.limits.counts = *cap;
  p.limits.capacity = capacity;
  if (grouped) p.limits.groups = groups;
  assignment a;
  if (fuzz::accepts([&] { a = spec::solve(*algorithm, *cost_fn, p); })) check_solution(a, p, *cost_fn);
  return 0;
}
