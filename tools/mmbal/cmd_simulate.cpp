// `mmbal simulate`: the main demo (docs/DESIGN.md §6). A realistic omni workload (docs/WORKLOADS.md
// family d, generated from the real length data with a fixed seed) on 64 ranks of 8 per node,
// 60 samples per rank, planned by the orchestrator; one table per phase with imbalance before
// and after, simulated step time and speed-up, and traffic; `--svg FILE` draws per-rank loads.
//
// Step-time model. Every phase's cost is its training FLOPs (forward + backward) for
// OrchMLLM's MLLM-10B (Table 1): LLM Qwen2-7B-like (h 3584, f 18944, 28 heads / 4 KV heads,
// 28 layers, causal, gated MLP, `flops`), vision ViT (h 2048, f 8192, 16 heads, 36 layers,
// bidirectional) on patches without padding (video: frame by frame, attention within a
// frame of 784 patches, so linear in the clip's length), audio Whisper-like encoder (h 1280, f 5120,
// 20 heads, 32 layers) on frames WITH padding (`padded-attention` with the same α, β). A
// phase runs on every rank, then all ranks synchronize at the all-to-all that follows it, so
//     phase time = max over ranks of the phase's cost / (--tflops × 10¹²) s,
//     step time  = Σ over phases of the phase times,
// before (every sample on its dealt rank) and after (the orchestrator's plan). Communication
// is not added to the step time; its volume is reported (bytes = tokens × --bytes-per-token,
// default 7168 = one bf16 hidden state of the 7B LLM).
#include "common.hpp"
#include "orchestrate_cli.hpp"
#include "tool.hpp"

#include <mmbal/cost/functions.hpp>
#include <mmbal/orchestrate/orchestrator.hpp>
#include <mmbal/workload/generators.hpp>
#include <mmbal/workload/length_data.hpp>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct simulate_state {
  std::uint32_t ranks = 64;
  std::uint64_t samples_per_rank = 60;
  std::uint64_t seed = 1;
  std::string family = "omni";
  std::string data_dir;
  double tflops = 400;
  // 8 ranks per node; a bf16 hidden state of width 3584 per token.
  mmbal::tool::orchestrator_flags orchestrator{8, 7168};
  std::string svg;
  bool json = false;
  mmbal::tool::phase_flags flags;
};

mmbal::cost::model_config model(std::uint64_t hidden, std::uint64_t ffn, std::uint64_t heads, std::uint64_t kv_heads,
                                std::uint64_t layers, bool causal, bool gated) {
  mmbal::cost::model_config m;
  m.hidden = hidden;
  m.ffn = ffn;
  m.heads = heads;
  m.kv_heads = kv_heads;
  m.layers = layers;
  m.causal = causal;
  m.gated_mlp = gated;
  m.backward = true;
  return m;
}

/// The demo's FLOPs-based policies (MLLM-10B of OrchMLLM Table 1; see the file comment), each
/// with its cost's `default_balancer`.
mmbal::orchestrate::phase_policy simulate_policy(const std::string& phase) {
  using mmbal::orchestrate::default_balancer;
  if (phase == "llm") return {default_balancer(mmbal::cost::flops{model(3584, 18944, 28, 4, 28, true, true)})};
  if (phase == "audio") {
    const mmbal::cost::flops f{model(1280, 5120, 20, 20, 32, false, false)};
    return {default_balancer(mmbal::cost::padded_attention{f.as_attention().alpha(), f.as_attention().beta()})};
  }
  if (phase == "video") {
    // Frames are encoded one by one: attention spans one frame (784 patches = 196 LLM tokens
    // × 4), so a clip of L patches costs (α + 784 β) · L — linear in its length.
    const mmbal::cost::flops f{model(2048, 8192, 16, 16, 36, false, false)};
    return {default_balancer(mmbal::cost::attention{f.as_attention().alpha() + 784.0 * f.as_attention().beta(), 0.0})};
  }
  return {default_balancer(mmbal::cost::flops{model(2048, 8192, 16, 16, 36, false, false)})};
}

struct phase_times {
  double before_ms = 0, after_ms = 0;
};

phase_times times_of(const mmbal::orchestrate::phase_report& r, double tflops) {
  const double per_ms = tflops * 1e12 / 1e3;
  return {r.max_before / per_ms, r.max_after / per_ms};
}

double ratio(double a, double b) { return b > 0 ? a / b : 1.0; }

void write_svg(const std::string& path, const mmbal::orchestrate::orchestration& o) {
  const double width = 1100, panel = 200, top = 50, left = 70, right = 20;
  const double height = top + panel * static_cast<double>(o.phases.size()) + 20;
  std::ostringstream s;
  s << std::fixed << std::setprecision(2);
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s << "<text x=\"" << left << "\" y=\"22\" font-size=\"16\">mmbal simulate: per-rank load before and after ("
    << o.ranks << " ranks, " << o.samples << " samples)</text>\n";
  s << "<rect x=\"" << width - 260 << "\" y=\"10\" width=\"12\" height=\"12\" fill=\"#c8c8c8\"/><text x=\""
    << width - 243 << "\" y=\"21\">before</text>\n";
  s << "<rect x=\"" << width - 180 << "\" y=\"10\" width=\"12\" height=\"12\" fill=\"#2b6cb0\"/><text x=\""
    << width - 163 << "\" y=\"21\">after</text>\n";
  s << "<line x1=\"" << width - 110 << "\" y1=\"16\" x2=\"" << width - 90
    << "\" y2=\"16\" stroke=\"#c53030\" stroke-dasharray=\"4 3\"/><text x=\"" << width - 85
    << "\" y=\"21\">mean after</text>\n";
  for (std::size_t k = 0; k < o.phases.size(); ++k) {
    const auto& r = o.phases[k].report;
    const double y0 = top + panel * static_cast<double>(k), h = panel - 45, base = y0 + 25 + h;
    double peak = 0;
    for (double v : r.loads_before) peak = std::max(peak, v);
    for (double v : r.loads_after) peak = std::max(peak, v);
    if (peak <= 0) peak = 1;
    const double slot = (width - left - right) / std::max<double>(1, static_cast<double>(r.loads_before.size()));
    s << "<text x=\"" << left << "\" y=\"" << y0 + 15 << "\" font-weight=\"bold\">" << r.name << "</text><text x=\""
      << left + 60 << "\" y=\"" << y0 + 15 << "\">" << r.cost << " / " << r.algorithm << " — max/mean "
      << r.imbalance_before << " → " << r.imbalance_after << "</text>\n";
    s << "<line x1=\"" << left << "\" y1=\"" << base << "\" x2=\"" << width - right << "\" y2=\"" << base
      << "\" stroke=\"black\"/>\n";
    s << "<line x1=\"" << left << "\" y1=\"" << base - h << "\" x2=\"" << left << "\" y2=\"" << base
      << "\" stroke=\"black\"/>\n";
    std::ostringstream peak_text;
    peak_text << std::setprecision(3) << peak;
    s << "<text x=\"" << left - 5 << "\" y=\"" << base - h + 4 << "\" text-anchor=\"end\">" << peak_text.str()
      << "</text><text x=\"" << left - 5 << "\" y=\"" << base + 4 << "\" text-anchor=\"end\">0</text>\n";
    for (std::size_t q = 0; q < r.loads_before.size(); ++q) {
      const double x = left + slot * static_cast<double>(q);
      const double hb = h * r.loads_before[q] / peak, ha = h * r.loads_after[q] / peak;
      s << "<rect x=\"" << x + slot * 0.08 << "\" y=\"" << base - hb << "\" width=\"" << slot * 0.42 << "\" height=\""
        << hb << "\" fill=\"#c8c8c8\"/>";
      s << "<rect x=\"" << x + slot * 0.5 << "\" y=\"" << base - ha << "\" width=\"" << slot * 0.42 << "\" height=\""
        << ha << "\" fill=\"#2b6cb0\"/>\n";
    }
    const double ym = base - h * r.mean / peak;
    s << "<line x1=\"" << left << "\" y1=\"" << ym << "\" x2=\"" << width - right << "\" y2=\"" << ym
      << "\" stroke=\"#c53030\" stroke-dasharray=\"4 3\"/>\n";
    s << "<text x=\"" << (left + width - right) / 2 << "\" y=\"" << base + 14 << "\" text-anchor=\"middle\">rank (0.."
      << (r.loads_before.empty() ? 0 : r.loads_before.size() - 1) << ")</text>\n";
  }
  s << "</svg>\n";
  mmbal::tool::write_file("--svg", path, [&](std::ostream& out) { out << s.str(); });
}

int run_simulate(const simulate_state& s) {
  (void)mmbal::checked_ranks(s.ranks, "--ranks");
  if (s.samples_per_rank == 0) mmbal::detail::throw_invalid("--samples-per-rank 0: need at least one sample per rank");
  const mmbal::orchestrate::orchestrator_options opt = s.orchestrator.options(s.ranks);
  // 1 GFLOPS to 1 EFLOPS per rank: every device there is, and step times that stay finite
  // and normal (1e-310 gave infinite times, inf zero ones).
  if (!(s.tflops >= 1e-3 && s.tflops <= 1e6))
    mmbal::detail::throw_invalid("--tflops ", s.tflops, ": must be in [0.001, 1e6]");
  const mmbal::family f = mmbal::parse_family(s.family);
  if (f == mmbal::family::longctx)
    mmbal::detail::throw_invalid("--family longctx: simulate needs a sample workload (llava, internvl, audio, omni)");
  // samples_per_rank · ranks wrapped silently (2 × 2^63 made 0 samples, exit 0).
  if (s.samples_per_rank > std::numeric_limits<std::uint32_t>::max() / s.ranks)
    mmbal::detail::throw_invalid("--samples-per-rank ", s.samples_per_rank, " x --ranks ", s.ranks,
                                 " exceeds 2^32 - 1 samples");
  mmbal::generator_options g;
  g.samples = s.samples_per_rank * s.ranks;
  g.ranks = s.ranks;
  g.seed = s.seed;
  const mmbal::workload w = mmbal::generate(f, g, mmbal::load_length_data(mmbal::find_data_dir(s.data_dir)));

  mmbal::orchestrate::orchestrator orch(opt);
  for (const auto& name : mmbal::orchestrate::orchestrator::phase_names(w))
    orch.set_policy(name, simulate_policy(name));
  s.flags.apply(orch, simulate_policy);
  mmbal::orchestrate::orchestration o;
  const double us = mmbal::tool::elapsed_us([&] { o = orch.plan(w); });

  double step_before = 0, step_after = 0;
  for (const auto& p : o.phases) {
    const phase_times t = times_of(p.report, s.tflops);
    step_before += t.before_ms;
    step_after += t.after_ms;
  }
  if (!s.svg.empty()) write_svg(s.svg, o);

  if (s.json) {
    nlohmann::json phases = nlohmann::json::array();
    for (const auto& p : o.phases) {
      const auto& r = p.report;
      const phase_times t = times_of(r, s.tflops);
      nlohmann::json j = mmbal::tool::phase_report_json(r);
      j.update(mmbal::tool::phase_report_json(r, mmbal::tool::simulate_extra_keys));
      j.update({{"mean_after", r.mean},
                {"time_before_ms", t.before_ms},
                {"time_after_ms", t.after_ms},
                {"speedup", ratio(t.before_ms, t.after_ms)}});
      phases.push_back(std::move(j));
    }
    mmbal::tool::print_json({{"family", s.family},
                             {"seed", s.seed},
                             {"ranks", o.ranks},
                             {"ranks_per_node", o.ranks_per_node},
                             {"samples", o.samples},
                             {"bytes_per_token", o.bytes_per_token},
                             {"tflops", s.tflops},
                             {"phases", phases},
                             {"step_time_before_ms", step_before},
                             {"step_time_after_ms", step_after},
                             {"speedup", ratio(step_before, step_after)},
                             {"composed_bytes", o.composed_bytes},
                             {"two_hop_bytes", o.two_hop_bytes},
                             {"composed_inter_node_bytes", o.composed_inter_node_bytes},
                             {"two_hop_inter_node_bytes", o.two_hop_inter_node_bytes},
                             {"plan_fingerprint", mmbal::tool::hex64(o.fingerprint)},
                             {"elapsed_us", us}});
    return 0;
  }

  using mmbal::tool::human_bytes;
  std::cout << "mmbal simulate: " << s.family << " workload, " << o.samples << " samples (" << s.samples_per_rank
            << " per rank, seed " << s.seed << ") on " << o.ranks << " ranks, " << o.ranks_per_node
            << " per node\nstep-time model: per phase, max over ranks of its training FLOPs at " << s.tflops
            << " TFLOP/s per GPU (MLLM-10B of OrchMLLM Table 1); step = sum over phases\n";
  std::cout << std::fixed;
  for (const auto& p : o.phases) {
    const auto& r = p.report;
    const phase_times t = times_of(r, s.tflops);
    std::cout << "\n== phase " << r.name << ": " << r.items << " items, cost " << r.cost << ", algorithm "
              << r.algorithm << '\n';
    std::cout << "                          before        after\n";
    std::cout << "  imbalance (max/mean) " << std::setprecision(3) << std::setw(9) << r.imbalance_before
              << std::setw(13) << r.imbalance_after << "   (lower bound / mean " << ratio(r.lower_bound, r.mean)
              << ")\n";
    std::cout << "  step time (ms)       " << std::setprecision(2) << std::setw(9) << t.before_ms << std::setw(13)
              << t.after_ms << "   speed-up " << std::setprecision(2) << ratio(t.before_ms, t.after_ms) << "x\n";
    std::cout << "  traffic: " << r.moved_items << " items moved, " << human_bytes(r.moved_bytes) << " ("
              << human_bytes(r.inter_node_bytes) << " inter-node); max inter-node per rank "
              << human_bytes(r.inter_node_max_identity) << " -> " << human_bytes(r.inter_node_max_relabeled)
              << " with node-wise relabeling\n";
  }
  std::cout << "\n== step\n  step time (ms) " << std::setprecision(2) << step_before << " -> " << step_after
            << "   speed-up " << ratio(step_before, step_after) << "x\n";
  std::cout << "  encoder outputs to LLM ranks: composed " << human_bytes(o.composed_bytes) << " vs two hops "
            << human_bytes(o.two_hop_bytes) << " (" << std::setprecision(1)
            << 100.0 * ratio(static_cast<double>(o.composed_bytes), static_cast<double>(o.two_hop_bytes))
            << " %); inter-node " << human_bytes(o.composed_inter_node_bytes) << " vs "
            << human_bytes(o.two_hop_inter_node_bytes) << '\n';
  std::cout << "  plan fingerprint " << mmbal::tool::hex64(o.fingerprint) << ", planning " << std::setprecision(0) << us
            << " us\n";
  if (!s.svg.empty()) std::cout << "  per-rank loads drawn to " << s.svg << '\n';
  return 0;
}

const bool registered = mmbal::tool::register_command(60, [](CLI::App& app) -> std::function<int()> {
  auto state = std::make_shared<simulate_state>();
  auto* sub = app.add_subcommand(
      "simulate",
      "The demo: a realistic omni workload (64 ranks, 8 per node, 60 samples per rank, seed 1) balanced phase by "
      "phase; imbalance, simulated step time (max over ranks of each phase's FLOPs at --tflops, summed over "
      "phases), speed-up and traffic per phase.");
  sub->add_option("--ranks", state->ranks, "data-parallel ranks (default 64)");
  sub->add_option("--samples-per-rank", state->samples_per_rank, "samples per rank (default 60)");
  sub->add_option("--seed", state->seed, "workload seed (default 1)");
  sub->add_option("--family", state->family, "workload family: omni, llava, internvl or audio (default omni)");
  sub->add_option("--data-dir", state->data_dir,
                  "directory with the real length files (default: $MMBAL_DATA_DIR, else the build's data/)");
  sub->add_option("--tflops", state->tflops,
                  "effective TFLOP/s per GPU for the step-time model (default 400; 0.001 to 1e6)");
  state->orchestrator.add_to(sub, "ranks per node; 0 = one node (default 8)",
                             "payload bytes per token (default 7168: a bf16 hidden state of width 3584)");
  state->flags.add_to(
      sub,
      "defaults: training FLOPs of OrchMLLM's MLLM-10B (llm flops + lpt+refine; image flops + lpt+refine; "
      "video per-frame flops as attention:alpha=..,beta=0 + lpt+refine; audio padded-attention + "
      "padded)");
  sub->add_option("--svg", state->svg, "write a bar chart of per-rank loads before and after to FILE");
  sub->add_flag("--json", state->json, "print one JSON object");
  return [state] { return run_simulate(*state); };
});

}  // namespace
