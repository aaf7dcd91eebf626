// `mmbal balance`: balance one phase of a workload file over D ranks (docs/DESIGN.md §6).
#include <mmbal/balance/micro_batches.hpp>
#include <mmbal/cost/metrics.hpp>
#include <mmbal/spec/algorithm.hpp>
#include <mmbal/spec/cost.hpp>

#include "common.hpp"
#include "constraint_flags.hpp"
#include "tool.hpp"
#include "workload_input.hpp"

#include <cmath>
#include <memory>
#include <optional>

namespace {

struct balance_options {
  std::string input;
  std::uint32_t ranks = 0;
  std::uint32_t ranks_per_node = 0;
  std::string phase = "llm";
  std::string cost = "tokens";
  std::optional<std::string> algorithm;  // unset: spec::default_algorithm of the cost
  std::string count_cap;
  std::optional<double> capacity;  // unset = no cap; negative or NaN is rejected by the library
  std::uint64_t bytes_per_token = 1;
  std::uint32_t micro_batches = 0;
  bool emit_assignment = false;
  bool json = false;
};

int run_balance(const balance_options& o) {
  using namespace mmbal;
  (void)checked_ranks(o.ranks, "--ranks");
  const workload w = tool::read_workload(o.input, o.ranks);
  const phase_items items = phase_items_of(w, o.phase);
  const auto named = [](const char* flag, auto parse) {
    try {
      return parse();
    } catch (const invalid_input& e) {
      detail::throw_invalid(flag, ": ", e.what());
    }
  };
  const spec::any_cost cost_fn = named("--cost", [&] { return spec::parse_cost(o.cost); });
  const spec::algorithm_spec algorithm = o.algorithm
                                             ? named("--algorithm", [&] { return spec::parse_algorithm(*o.algorithm); })
                                             : spec::default_algorithm(cost_fn);
  // As orchestrate: 0 bytes per token would report every move as free.
  if (o.bytes_per_token == 0) detail::throw_invalid("--bytes-per-token 0: must be > 0");
  const std::vector<std::uint64_t> bytes = phase_item_bytes(items, o.bytes_per_token, o.phase);
  const std::vector<std::uint64_t> groups = phase_group_ids(items, o.phase);

  balance::problem p;
  p.weights = items.weights;
  p.bins = o.ranks;
  p.origin = items.origin;
  p.item_bytes = bytes;
  p.ranks_per_node = o.ranks_per_node;
  p.limits.counts = tool::parse_count_cap(o.count_cap);
  if (o.capacity && !(std::isfinite(*o.capacity) && *o.capacity >= 0))
    detail::throw_invalid("--capacity ", *o.capacity, ": must be a finite number >= 0");
  p.limits.capacity = o.capacity;
  p.limits.groups = groups;

  assignment plan;
  const double us = tool::elapsed_us([&] { plan = spec::solve(algorithm, cost_fn, p); });

  const partition before{o.ranks, items.origin};
  const auto [loads_before, loads_after, lower] = std::visit(
      [&](const auto& c) {
        const double lb = p.limits.counts.kind == balance::count_cap::mode::equal
                              ? equal_count_lower_bound(p.weights, p.bins, c)
                              : lower_bound(p.weights, p.bins, c);
        return std::tuple{bin_loads(before, p.weights, c), bin_loads(plan, p.weights, c), lb};
      },
      cost_fn);
  const traffic moved = placement_traffic(items.origin, plan.to_partition(), bytes, o.ranks_per_node);
  const load_summary sb = summarize_loads(loads_before), sa = summarize_loads(loads_after);
  // Optional: split every rank's batch into micro-batches (items stay on their rank).
  std::optional<balance::micro_batch_plan> micro;
  double micro_lower = 0;
  if (o.micro_batches > 0) {
    std::visit(
        [&](const auto& c) {
          micro = balance::split_micro_batches(p.weights, plan.to_partition(), o.micro_batches, c);
          micro_lower = balance::micro_batch_lower_bound(p.weights, p.bins, c);
        },
        cost_fn);
  }

  if (o.json) {
    nlohmann::json j;
    j["ranks"] = o.ranks;
    j["items"] = items.size();
    j["phase"] = o.phase;
    j["algorithm"] = spec::to_spec(algorithm);
    j["cost"] = spec::to_spec(cost_fn);
    j["loads_before"] = loads_before;
    j["loads_after"] = loads_after;
    j["max_before"] = sb.max;
    j["max_after"] = sa.max;
    j["mean"] = sa.mean;
    j["lower_bound"] = lower;
    j["moved_items"] = moved.moved_items;
    j["moved_bytes"] = moved.moved_bytes;
    j["inter_node_bytes"] = moved.inter_node_bytes;
    j["elapsed_us"] = us;
    if (o.emit_assignment) {
      nlohmann::json a = nlohmann::json::array();
      for (const location& l : plan.where) a.push_back({l.rank, l.slot});
      j["assignment"] = std::move(a);
    }
    if (micro) {
      j["micro_batches"] = o.micro_batches;
      j["micro_batch_sum_of_max"] = micro->sum_of_max();
      j["micro_batch_lower_bound"] = micro_lower;
      if (o.emit_assignment) {
        nlohmann::json a = nlohmann::json::array();
        for (const auto& l : micro->where) a.push_back({l.rank, l.micro_batch, l.slot});
        j["micro_batch_assignment"] = std::move(a);
      }
    }
    tool::print_json(j);
    return 0;
  }
  std::cout << "phase " << o.phase << ": " << items.size() << " items on " << o.ranks << " ranks, cost "
            << spec::to_spec(cost_fn) << ", algorithm " << spec::to_spec(algorithm) << "\n";
  tool::print_load_table(loads_before, loads_after);
  std::cout << "max/mean before " << sb.max_over_mean << ", after " << sa.max_over_mean << "; max/lower bound "
            << (lower > 0 ? sa.max / lower : 1.0) << "\n"
            << "moved " << moved.moved_items << " items, " << moved.moved_bytes << " bytes (" << moved.inter_node_bytes
            << " inter-node); planning " << us << " us\n";
  if (micro)
    std::cout << o.micro_batches << " micro-batches per rank: sum over rounds of the slowest rank "
              << micro->sum_of_max() << " (lower bound " << micro_lower << ")\n";
  return 0;
}

const bool registered = mmbal::tool::register_command(20, [](CLI::App& app) -> std::function<int()> {
  auto o = std::make_shared<balance_options>();
  auto* sub = app.add_subcommand("balance", "Balance one phase of a workload over D ranks");
  sub->add_option("--input", o->input, "Workload file (JSON Lines, docs/DESIGN.md §6)")->required();
  sub->add_option("--ranks", o->ranks, "Number of data-parallel ranks D")->required();
  sub->add_option("--ranks-per-node", o->ranks_per_node,
                  "Ranks per node C for inter-node traffic (node = rank / C); default: one node");
  sub->add_option("--phase", o->phase, "llm (items = samples) or a modality (items = its segments)")
      ->capture_default_str();
  sub->add_option("--cost", o->cost,
                  "Cost spec: tokens, padded, attention:alpha=..,beta=.., padded-attention:.., conv:lambda=.., "
                  "fitted:x=..,y=..,z=.., flops:hidden=..,ffn=..,heads=..,kv_heads=..,layers=..")
      ->capture_default_str();
  sub->add_option("--algorithm", o->algorithm,
                  "Algorithm spec: lpt, greedy-ascending, padded, tolerance:v=.., conv, kk, migrate:eps=.., "
                  "optionally followed by +refine (default: padded for a padded cost, else lpt+refine)");
  sub->add_option("--count-cap", o->count_cap, "Per-rank item counts: 'equal' (±1) or a maximum N");
  sub->add_option("--capacity", o->capacity, "Hard per-rank cost cap (in cost units)");
  sub->add_option("--bytes-per-token", o->bytes_per_token,
                  "Bytes per token (item bytes = LLM tokens, or encoder length, × this)")
      ->capture_default_str();
  sub->add_option("--micro-batches", o->micro_batches,
                  "Split each rank's batch into M micro-batches (balanced per round; reports "
                  "micro_batch_sum_of_max, and [rank, micro_batch, slot] per item with --emit-assignment)");
  sub->add_flag("--emit-assignment", o->emit_assignment, "With --json: add [rank, slot] per item in input order");
  sub->add_flag("--json", o->json, "Print one JSON object");
  return [o] { return run_balance(*o); };
});

}  // namespace
