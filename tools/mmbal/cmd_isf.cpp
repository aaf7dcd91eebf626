// `mmbal isf`: OmniBal's balanced dynamic mini-batches (ISF, docs/DESIGN.md §5.2) for a JSONL
// workload, with pad and dist ratios of the groups dealt to --ranks devices per step.
#include "tool.hpp"
#include "workload_input.hpp"

#include <mmbal/sampling/isf.hpp>

#include <cmath>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace {

struct isf_state {
  std::string input;
  std::uint32_t ranks = 0;
  std::uint64_t qv = 0, qt = 0;
  std::optional<std::uint64_t> qv_target, qt_target;
  bool automatic = false;
  double target_batch = 0;
  std::string vision = "images";
  std::uint32_t iterations = 10;
  std::uint64_t seed = 0;
  std::string oversize = "auto";
  bool drop_unfilled = false;
  bool draw_order = false;
  bool json = false;
  bool emit_groups = false;
  bool qv_given = false, qt_given = false;
};

// Per-sample sizes: v from the sample's visual segments (modalities "image" and "video";
// audio is not vision), t = all its LLM tokens (OmniBal's token_num).
struct sizes {
  std::vector<mmbal::length_t> vision, text;
};

sizes sample_sizes(const mmbal::workload& w, bool count_images, const std::string& path) {
  std::vector<bool> visual(w.modalities.size(), false);
  for (std::size_t m = 1; m < w.modalities.size(); ++m)
    visual[m] = w.modalities[m] == "image" || w.modalities[m] == "video";
  sizes s;
  s.vision.reserve(w.samples.size());
  s.text.reserve(w.samples.size());
  for (const mmbal::sample& x : w.samples) {
    std::uint64_t v = 0;
    for (const mmbal::segment& seg : x.segments)
      if (visual[seg.modality]) v += count_images ? 1 : seg.encoder_len;
    const std::uint64_t t = x.llm_length();
    if (v > UINT32_MAX)
      mmbal::detail::throw_invalid(path, ": sample id ", x.id, ": vision size ", v, " exceeds 2^32 - 1");
    if (t > UINT32_MAX)
      mmbal::detail::throw_invalid(path, ": sample id ", x.id, ": LLM length ", t, " exceeds 2^32 - 1");
    s.vision.push_back(static_cast<mmbal::length_t>(v));
    s.text.push_back(static_cast<mmbal::length_t>(t));
  }
  return s;
}

mmbal::sampling::oversize_policy parse_oversize(const std::string& name, bool automatic) {
  using mmbal::sampling::oversize_policy;
  if (name == "auto") return automatic ? oversize_policy::singleton : oversize_policy::reject;
  if (name == "singleton") return oversize_policy::singleton;
  if (name == "reject") return oversize_policy::reject;
  if (name == "drop") return oversize_policy::drop;
  mmbal::detail::throw_invalid("--oversize '", name, "': expected auto, singleton, reject or drop");
}

int run_isf(const isf_state& s) {
  using namespace mmbal::sampling;
  (void)mmbal::checked_ranks(s.ranks, "--ranks");
  if (s.vision != "images" && s.vision != "tokens")
    mmbal::detail::throw_invalid("--vision '", s.vision, "': expected images or tokens");
  if (s.automatic) {
    if (!(s.target_batch > 0) || !std::isfinite(s.target_batch))
      mmbal::detail::throw_invalid("--auto needs --target-batch B > 0 (got ", s.target_batch, ")");
  } else if (!s.qv_given || !s.qt_given) {
    mmbal::detail::throw_invalid("give both --qv N and --qt N, or --auto --target-batch B");
  }
  const mmbal::sampling::oversize_policy oversize = parse_oversize(s.oversize, s.automatic);

  // The file's ranks are where samples sit now, unrelated to the --ranks devices the groups
  // are dealt to, so any rank value is accepted (ranks = 0).
  const mmbal::workload w = mmbal::tool::read_workload(s.input, 0);
  const sizes x = sample_sizes(w, s.vision == "images", s.input);

  if (s.iterations > mmbal::sampling::max_isf_iterations)
    mmbal::detail::throw_invalid("--iterations = ", s.iterations, " exceeds ", mmbal::sampling::max_isf_iterations);
  isf_options o;
  o.qv = s.qv;
  o.qt = s.qt;
  o.qv_target = s.qv_target;
  o.qt_target = s.qt_target;
  o.iterations = s.iterations;
  o.seed = s.seed;
  o.oversize = oversize;
  o.drop_unfilled = s.drop_unfilled;
  o.sort_tail = !s.draw_order;
  isf_result r;
  const double elapsed = mmbal::tool::elapsed_us([&] {
    if (s.automatic) {
      threshold_search_options so;
      so.iterations = s.iterations;
      so.seed = s.seed;
      so.sort_tail = !s.draw_order;
      const threshold_search_result best = search_thresholds(x.vision, x.text, s.ranks, s.target_batch, so);
      o.qv = best.thresholds.qv;
      o.qt = best.thresholds.qt;
      o.qv_target = o.qv_target.value_or(best.thresholds.qv_target);
      o.qt_target = o.qt_target.value_or(best.thresholds.qt_target);
    }
    if (o.oversize == oversize_policy::reject && o.qv > 0 && o.qt > 0) {
      (void)resolve_thresholds(o);  // bad thresholds first: a target above its cap, not a sample, is the error
      // The library names the sample's index; the tool names its JSONL id.
      for (std::size_t i = 0; i < x.text.size(); ++i)
        if (x.vision[i] > o.qv || x.text[i] > o.qt)
          mmbal::detail::throw_invalid(s.input, ": sample id ", w.samples[i].id, " alone exceeds a cap (vision ",
                                       x.vision[i], ", qv = ", o.qv, "; LLM tokens ", x.text[i], ", qt = ", o.qt,
                                       "); raise --qv/--qt or pass --oversize singleton");
    }
    r = isf(x.vision, x.text, o);
  });
  const grouping_metrics m = evaluate_grouping(r.groups, x.vision, x.text, s.ranks);
  const isf_thresholds& q = r.stats.thresholds;

  if (s.json) {
    nlohmann::json j;
    j["samples"] = w.samples.size();
    j["groups"] = r.groups.size();
    j["singletons"] = r.singletons.size();
    j["dropped"] = r.dropped.size();
    j["iterations"] = s.iterations;
    j["qv"] = q.qv;
    j["qt"] = q.qt;
    j["qv_target"] = q.qv_target;
    j["qt_target"] = q.qt_target;
    j["pad_ratio"] = m.pad_ratio;
    j["dist_ratio_vision"] = m.dist_ratio_vision;
    j["dist_ratio_text"] = m.dist_ratio_text;
    j["elapsed_us"] = elapsed;
    if (s.emit_groups) {
      nlohmann::json groups = nlohmann::json::array();
      for (std::size_t g = 0; g < r.groups.size(); ++g) {
        nlohmann::json ids = nlohmann::json::array();
        for (std::uint32_t i : r.groups.group(g)) ids.push_back(w.samples[i].id);
        groups.push_back(std::move(ids));
      }
      j["group_members"] = std::move(groups);
    }
    mmbal::tool::print_json(j);
    return 0;
  }

  const grouping_metrics rnd = evaluate_grouping(
      random_grouping(w.samples.size(), static_cast<std::uint32_t>(std::max(1.0, std::round(m.average_batch))), s.seed),
      x.vision, x.text, s.ranks);
  std::cout << "ISF over " << w.samples.size() << " samples (vision = " << s.vision << "), " << s.ranks
            << " ranks per step, seed " << s.seed << (s.automatic ? ", thresholds searched" : "") << '\n'
            << "  Qv = " << q.qv << "  Qt = " << q.qt << "  Qv' = " << q.qv_target << "  Qt' = " << q.qt_target << '\n'
            << "  groups " << r.groups.size() << " (singletons " << r.singletons.size() << ", final pass "
            << r.stats.final_groups << "), dropped " << r.dropped.size() << ", rounds run " << r.stats.iterations_run
            << " of " << s.iterations << ", planning " << std::fixed << std::setprecision(0) << elapsed << " us\n"
            << "  kept per round:";
  for (std::uint32_t k : r.stats.kept_per_iteration) std::cout << ' ' << k;
  std::cout << "\n\n"
            << std::setw(26) << "" << std::setw(12) << "AVE-BS" << std::setw(12) << "pad" << std::setw(12) << "dist ViT"
            << std::setw(12) << "dist LLM" << '\n'
            << std::setprecision(4) << std::setw(26) << "ISF" << std::setw(12) << m.average_batch << std::setw(12)
            << m.pad_ratio << std::setw(12) << m.dist_ratio_vision << std::setw(12) << m.dist_ratio_text << '\n'
            << std::setw(26) << "random batches (baseline)" << std::setw(12) << rnd.average_batch << std::setw(12)
            << rnd.pad_ratio << std::setw(12) << rnd.dist_ratio_vision << std::setw(12) << rnd.dist_ratio_text << '\n';
  return 0;
}

const bool registered = mmbal::tool::register_command(40, [](CLI::App& app) -> std::function<int()> {
  auto state = std::make_shared<isf_state>();
  auto* sub = app.add_subcommand(
      "isf",
      "Group samples into balanced dynamic mini-batches with OmniBal's ISF (iterative sampling and filtering) "
      "and report pad and dist ratios when the groups are dealt to --ranks devices per step.");
  sub->add_option("--input", state->input, "JSONL workload file")->required();
  sub->add_option("--ranks", state->ranks, "devices per step: groups are dealt d per step for the dist ratio")
      ->required();
  auto* qv = sub->add_option("--qv", state->qv, "Qv: vision cap per group (images or vision tokens, see --vision)");
  auto* qt = sub->add_option("--qt", state->qt, "Qt: LLM-token cap per group (whole sequences)");
  sub->add_option("--qv-target", state->qv_target, "Qv': keep a group when its vision >= Qv' (default Qv)");
  sub->add_option("--qt-target", state->qt_target, "Qt': or when its LLM tokens >= Qt' (default Qt - 128)");
  auto* automatic = sub->add_flag("--auto", state->automatic,
                                  "choose Qv, Qt: OmniBal's statistical rule for --target-batch, then a grid search "
                                  "minimising pad + dist ratios at that average batch size");
  sub->add_option("--target-batch", state->target_batch, "target average samples per group (with --auto)");
  automatic->excludes(qv)->excludes(qt);
  sub->add_option("--vision", state->vision,
                  "vision measure per sample: images (count of image/video segments, default) or tokens (their "
                  "encoder lengths)");
  sub->add_option("--iterations", state->iterations, "T, sampling+filtering rounds (default 10, at most 65536)");
  sub->add_option("--seed", state->seed, "shuffle seed (default 0)");
  sub->add_option("--oversize", state->oversize,
                  "a sample alone above a cap: singleton (own group, reported), reject (error naming it) or drop "
                  "(counted); default auto = reject with explicit --qv/--qt, singleton with --auto");
  sub->add_flag("--drop-unfilled", state->drop_unfilled,
                "drop (and count) final-pass groups that reach neither Qv' nor Qt' (default: keep them)");
  sub->add_flag("--draw-order", state->draw_order,
                "keep final-pass groups in draw order and singletons by index (default: both sorted by "
                "descending load, so each step deals groups of similar size)");
  sub->add_flag("--json", state->json, "print one JSON object");
  sub->add_flag("--emit-groups", state->emit_groups, "with --json: group_members, the sample ids of every group");
  return [state, qv, qt] {
    state->qv_given = qv->count() > 0;
    state->qt_given = qt->count() > 0;
    return run_isf(*state);
  };
});

}  // namespace
