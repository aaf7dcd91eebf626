// `mmbal orchestrate`: every phase of a workload (each encoder modality and the LLM) balanced
// by its own policy, node-wise relabeling, the composed encoder→LLM plans, and the traffic
// with and without composition (docs/DESIGN.md §5.5, §6; OrchMLLM §6).
//
// Item bytes = token count × --bytes-per-token (default 1): LLM phase — the sample's LLM
// tokens; encoder phase — the segment's encoder length (the encoder input); composed
// encoder→LLM plans — the segment's LLM tokens (the encoder output). `two_hop_bytes` is what
// sending the outputs back to their origin and then on with their sample would move;
// `composed_bytes` what the single composed all-to-all moves (forward pass; backward equal).
#include "orchestrate_cli.hpp"
#include "tool.hpp"
#include "workload_input.hpp"

#include <mmbal/orchestrate/orchestrator.hpp>

#include <cstdint>
#include <iomanip>
#include <iostream>
#include <memory>
#include <string>

namespace {

struct orchestrate_state {
  std::string input;
  std::uint32_t ranks = 0;
  mmbal::tool::orchestrator_flags orchestrator;  // defaults: one node, 1 byte per token
  bool json = false;
  mmbal::tool::phase_flags flags;
};

void print_table(const mmbal::orchestrate::orchestration& o, double elapsed) {
  std::cout << "ranks " << o.ranks << ", ranks per node " << o.ranks_per_node << ", samples " << o.samples
            << ", bytes per token " << o.bytes_per_token << "\n\n";
  std::cout << std::left << std::setw(8) << "phase" << std::right << std::setw(9) << "items" << std::setw(14)
            << "max before" << std::setw(14) << "max after" << std::setw(14) << "mean" << std::setw(14) << "lower bound"
            << std::setw(10) << "moved" << std::setw(12) << "moved B" << std::setw(13) << "inter-node B"
            << std::setw(22) << "inter-node max id/rel" << '\n';
  for (const auto& p : o.phases) {
    const auto& r = p.report;
    std::cout << std::left << std::setw(8) << r.name << std::right << std::setw(9) << r.items << std::setprecision(6)
              << std::setw(14) << r.max_before << std::setw(14) << r.max_after << std::setw(14) << r.mean
              << std::setw(14) << r.lower_bound << std::setw(10) << r.moved_items << std::setw(12) << r.moved_bytes
              << std::setw(13) << r.inter_node_bytes << std::setw(11) << r.inter_node_max_identity << " /"
              << std::setw(9) << r.inter_node_max_relabeled << '\n';
  }
  std::cout << '\n';
  for (const auto& p : o.phases)
    std::cout << "  " << p.name << ": " << p.report.cost << " / " << p.report.algorithm << '\n';
  std::cout << "\nencoder outputs to LLM ranks: composed " << o.composed_bytes << " B (inter-node "
            << o.composed_inter_node_bytes << "), two hops " << o.two_hop_bytes << " B (inter-node "
            << o.two_hop_inter_node_bytes << ")\n";
  std::cout << "plan fingerprint " << mmbal::tool::hex64(o.fingerprint) << ", planning " << std::fixed
            << std::setprecision(0) << elapsed << " us\n";
}

int run_orchestrate(const orchestrate_state& s) {
  (void)mmbal::checked_ranks(s.ranks, "--ranks");
  const mmbal::orchestrate::orchestrator_options opt = s.orchestrator.options(s.ranks);
  const mmbal::workload w = mmbal::tool::read_workload(s.input, s.ranks);
  mmbal::orchestrate::orchestrator orch(opt);
  s.flags.apply(orch, [](const std::string& phase) { return mmbal::orchestrate::default_policy(phase); });
  mmbal::orchestrate::orchestration o;
  const double us = mmbal::tool::elapsed_us([&] { o = orch.plan(w); });
  if (!s.json) {
    print_table(o, us);
    return 0;
  }
  nlohmann::json phases = nlohmann::json::array();
  for (const auto& p : o.phases) phases.push_back(mmbal::tool::phase_report_json(p.report));
  mmbal::tool::print_json({{"ranks", o.ranks},
                           {"ranks_per_node", o.ranks_per_node},
                           {"samples", o.samples},
                           {"phases", phases},
                           {"composed_bytes", o.composed_bytes},
                           {"two_hop_bytes", o.two_hop_bytes},
                           {"plan_fingerprint", mmbal::tool::hex64(o.fingerprint)},
                           {"elapsed_us", us}});
  return 0;
}

const bool registered = mmbal::tool::register_command(30, [](CLI::App& app) -> std::function<int()> {
  auto state = std::make_shared<orchestrate_state>();
  auto* sub = app.add_subcommand(
      "orchestrate",
      "Balance every phase (each encoder modality, then the LLM on the full interleaved length) with its own "
      "policy, relabel batches node-wise, compose encoder->LLM plans; report each phase and the traffic. Item "
      "bytes = tokens x --bytes-per-token (LLM: LLM tokens; encoder: encoder length; composed: the segment's LLM "
      "tokens).");
  sub->add_option("--input", state->input, "workload JSONL file")->required();
  sub->add_option("--ranks", state->ranks, "data-parallel ranks D")->required();
  state->orchestrator.add_to(
      sub, "ranks per node C (node = rank / C) for inter-node traffic and relabeling; 0 = one node (default 0)",
      "payload bytes per token (default 1)");
  state->flags.add_to(sub,
                      "defaults: llm attention:alpha=1,beta=1.54e-05 + lpt+refine; image, video tokens + lpt+refine; "
                      "audio padded + padded (OrchMLLM 8); other modalities tokens + lpt+refine");
  sub->add_flag("--json", state->json, "print one JSON object");
  return [state] { return run_orchestrate(*state); };
});

}  // namespace
