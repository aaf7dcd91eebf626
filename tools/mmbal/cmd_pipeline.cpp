// `mmbal pipeline`: simulate a pipeline schedule and reorder its micro-batches (docs/DESIGN.md
// §5.7), from per-stage times (--times) or from samples and a pipeline model (--input, --model).
//
// --times FILE: JSON {"forward": [[...], ...], "backward": [[...], ...]}, p rows (stages) of m
//   times (micro-batches in their given order), seconds.
// --model FILE (with --input W.jsonl --ranks D --micro-batches M): JSON
//   {"recompute": false,
//    "stages": [{"modules": [{"name": "vit", "kind": "encoder", "phase": "image",
//                             "cost": "attention:alpha=2e-7,beta=1e-11", "share": 1,
//                             "trainable": false}, ...]}, ...]}
//   per stage the modules it holds in forward order: `kind` encoder | llm | generator
//   (descriptive), `phase` "llm" (items = samples, LLM tokens) or a modality name (items = its
//   segments, encoder lengths), `cost` a cost spec (as --cost of `balance`), `share` (default 1)
//   multiplies the cost into seconds (e.g. the stage's fraction of the LLM layers divided by
//   the throughput), `trainable` (default true); backward = 0, 1 or 2 × forward by Cornstarch's
//   rule, +1 × with "recompute": true. Samples stay on their rank; each rank's samples are
//   split into M micro-batches by the existing split (LPT with --cost on LLM lengths).
#include <mmbal/pipeline/pipeline.hpp>
#include <mmbal/spec/cost.hpp>
#include <mmbal/spec/pipeline.hpp>
#include <mmbal/workload/jsonl.hpp>

#include "common.hpp"
#include "tool.hpp"
#include "workload_input.hpp"

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>

namespace {

using namespace mmbal::pipeline;

struct pipeline_options {
  std::string times, input, model, order = "all", schedule = "1f1b", cost = "tokens", svg;
  double hop = 0;
  std::uint32_t ranks = 0, micro_batches = 0;
  std::uint64_t max_evaluations = search_options{}.max_evaluations, seed = 0;
  bool json = false;
};

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) mmbal::detail::throw_invalid(path, ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().find_first_not_of(" \t\r\n") == std::string::npos) mmbal::detail::throw_invalid(path, ": empty file");
  try {
    return mmbal::detail::parse_json_strict(text.str());
  } catch (const mmbal::invalid_input& e) {
    mmbal::detail::throw_invalid(path, ": ", e.what());
  }
}

// Configuration files are ours, not data: a misspelt key ("trainble": false) must not be
// skipped as if absent, which would silently keep a frozen module trainable.
void check_keys(const nlohmann::json& object, std::initializer_list<const char*> known, const std::string& path,
                const std::string& at) {
  for (const auto& item : object.items()) {
    const std::string& key = item.key();
    if (std::find_if(known.begin(), known.end(), [&](const char* k) { return key == k; }) != known.end()) continue;
    std::string names;
    for (const char* k : known) names += std::string(names.empty() ? "" : ", ") + k;
    mmbal::detail::throw_invalid(path, ": ", at, "unknown key '", key, "' (expected ", names, ")");
  }
}

// One of "forward" / "backward": p rows of m non-negative numbers; `m` is fixed by the first row.
std::vector<std::vector<double>> read_matrix(const nlohmann::json& j, const std::string& path, const char* field) {
  if (!j.is_object() || !j.contains(field)) mmbal::detail::throw_invalid(path, ": missing field '", field, "'");
  const nlohmann::json& rows = j.at(field);
  if (!rows.is_array()) mmbal::detail::throw_invalid(path, ": ", field, " is not an array of stages");
  if (rows.empty()) mmbal::detail::throw_invalid(path, ": ", field, " has no stages");
  std::vector<std::vector<double>> out;
  for (std::size_t s = 0; s < rows.size(); ++s) {
    if (!rows[s].is_array()) mmbal::detail::throw_invalid(path, ": ", field, "[", s, "] is not an array of times");
    if (rows[s].empty()) mmbal::detail::throw_invalid(path, ": ", field, "[", s, "] has no micro-batches");
    if (s > 0 && rows[s].size() != out[0].size())
      mmbal::detail::throw_invalid(path, ": ", field, "[", s, "] has ", rows[s].size(), " times, ", field, "[0] has ",
                                   out[0].size(), " (ragged)");
    std::vector<double> row;
    for (std::size_t k = 0; k < rows[s].size(); ++k) {
      const nlohmann::json& x = rows[s][k];
      if (!x.is_number()) mmbal::detail::throw_invalid(path, ": ", field, "[", s, "][", k, "] is not a number");
      const double v = x.get<double>();
      if (!(std::isfinite(v) && v >= 0))
        mmbal::detail::throw_invalid(path, ": ", field, "[", s, "][", k, "] = ", v, " is not a finite time >= 0");
      row.push_back(v);
    }
    out.push_back(std::move(row));
  }
  return out;
}

stage_times read_times(const std::string& path) {
  const nlohmann::json j = read_json_file(path);
  const auto f = read_matrix(j, path, "forward"), b = read_matrix(j, path, "backward");
  check_keys(j, {"forward", "backward"}, path, "");
  if (f.size() != b.size() || f[0].size() != b[0].size())
    mmbal::detail::throw_invalid(path, ": forward is ", f.size(), " x ", f[0].size(), ", backward ", b.size(), " x ",
                                 b[0].size(), " (must match)");
  stage_times t(static_cast<std::uint32_t>(f.size()), mmbal::checked_count(f[0].size(), "micro-batches"));
  for (std::uint32_t s = 0; s < t.stages; ++s)
    for (std::uint32_t k = 0; k < t.micro_batches; ++k) t.forward_at(s, k) = f[s][k], t.backward_at(s, k) = b[s][k];
  try {
    validate(t);  // each time is checked above; this adds their sum
  } catch (const mmbal::invalid_input& e) {
    mmbal::detail::throw_invalid(path, ": ", e.what());
  }
  return t;
}

pipeline_model read_model(const std::string& path) {
  const nlohmann::json j = read_json_file(path);
  if (!j.is_object()) mmbal::detail::throw_invalid(path, ": not a JSON object");
  check_keys(j, {"stages", "recompute"}, path, "");
  pipeline_model m;
  if (j.contains("recompute")) {
    if (!j["recompute"].is_boolean()) mmbal::detail::throw_invalid(path, ": recompute is not true or false");
    m.recompute = j["recompute"].get<bool>();
  }
  if (!j.contains("stages") || !j["stages"].is_array() || j["stages"].empty())
    mmbal::detail::throw_invalid(path, ": stages must be a non-empty array");
  const nlohmann::json& stages = j["stages"];
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const std::string at = mmbal::detail::concat("stages[", s, "]");
    if (!stages[s].is_object() || !stages[s].contains("modules") || !stages[s]["modules"].is_array())
      mmbal::detail::throw_invalid(path, ": ", at, ".modules must be an array");
    check_keys(stages[s], {"modules"}, path, at + ": ");
    stage_model st;
    const nlohmann::json& mods = stages[s]["modules"];
    for (std::size_t k = 0; k < mods.size(); ++k) {
      const std::string mat = mmbal::detail::concat(at, ".modules[", k, "]");
      const nlohmann::json& x = mods[k];
      if (!x.is_object()) mmbal::detail::throw_invalid(path, ": ", mat, " is not an object");
      check_keys(x, {"name", "kind", "phase", "cost", "share", "trainable"}, path, mat + ": ");
      pipeline_module mod;
      auto text = [&](const char* key, std::string& dst) {
        if (!x.contains(key)) return;
        if (!x[key].is_string()) mmbal::detail::throw_invalid(path, ": ", mat, ".", key, " is not a string");
        dst = x[key].get<std::string>();
      };
      text("name", mod.name);
      std::string kind = "llm", cost = "tokens";
      text("kind", kind);
      if (kind == "encoder")
        mod.kind = module_kind::encoder;
      else if (kind == "llm")
        mod.kind = module_kind::llm;
      else if (kind == "generator")
        mod.kind = module_kind::generator;
      else
        mmbal::detail::throw_invalid(path, ": ", mat, ".kind '", kind, "' (expected encoder, llm or generator)");
      mod.phase = kind == "llm" ? "llm" : "";
      text("phase", mod.phase);
      if (mod.phase.empty()) mmbal::detail::throw_invalid(path, ": ", mat, ".phase missing (a modality name or llm)");
      text("cost", cost);
      try {
        mod.cost = mmbal::spec::erase(mmbal::spec::parse_cost(cost));
      } catch (const mmbal::invalid_input& e) {
        mmbal::detail::throw_invalid(path, ": ", mat, ".cost: ", e.what());
      }
      if (x.contains("share")) {
        if (!x["share"].is_number() || !(x["share"].get<double>() >= 0) || !std::isfinite(x["share"].get<double>()))
          mmbal::detail::throw_invalid(path, ": ", mat, ".share is not a number >= 0");
        mod.share = x["share"].get<double>();
      }
      if (x.contains("trainable")) {
        if (!x["trainable"].is_boolean()) mmbal::detail::throw_invalid(path, ": ", mat, ".trainable is not a boolean");
        mod.trainable = x["trainable"].get<bool>();
      }
      st.modules.push_back(std::move(mod));
    }
    m.stages.push_back(std::move(st));
  }
  return m;
}

// The orders asked for (identity always, for the "before" picture) with their makespans, and
// the chosen one: the requested order, or with `all` the best (ties: the first listed).
struct pipeline_result {
  std::vector<order_report> orders;
  std::size_t chosen = 0;
  double lower = 0;
};

pipeline_result run_orders(const stage_times& t, const pipeline_options& o, const schedule& sched) {
  std::vector<order_kind> kinds{order_kind::identity};
  if (o.order == "all") {
    kinds.assign(all_order_kinds.begin(), all_order_kinds.end());
  } else {
    const order_kind k = mmbal::spec::parse_order_kind(o.order);
    if (k != order_kind::identity) kinds.push_back(k);
  }
  pipeline_result r;
  r.orders = compute_orders(t, kinds, sched, o.hop, {o.max_evaluations, o.seed});
  if (o.order == "all") {
    for (std::size_t k = 1; k < r.orders.size(); ++k)
      if (r.orders[k].makespan < r.orders[r.chosen].makespan) r.chosen = k;
  } else {
    r.chosen = r.orders.size() - 1;
  }
  // The bound and the makespans sum the same times in different orders: rounding can put the
  // bound an ulp above the best makespan, a negative gap that no order has.
  r.lower = lower_bound(t, sched, o.hop);
  for (const order_report& x : r.orders) r.lower = std::min(r.lower, x.makespan);
  return r;
}

nlohmann::json result_json(const stage_times& t, const pipeline_result& r) {
  nlohmann::json orders = nlohmann::json::object();
  for (const order_report& x : r.orders) orders[std::string(to_string(x.kind))] = x.makespan;
  const order_report& c = r.orders[r.chosen];
  return {{"stages", t.stages},
          {"micro_batches", t.micro_batches},
          {"order", c.order},
          {"order_name", std::string(to_string(c.kind))},
          {"makespan", c.makespan},
          {"lower_bound", r.lower},
          {"gap_to_lower_bound", r.lower > 0 ? c.makespan / r.lower - 1 : 0.0},
          {"orders", std::move(orders)}};
}

// Time lines of the schedule before (identity) and after (chosen order), one panel each per
// rank: one row per stage, forwards blue, backwards green, labelled with the micro-batch id.
// About 200 bytes of SVG per operation: a drawing of the largest simulations (2^23
// operations) would take gigabytes, and no one could read it. Checked before simulating.
void check_drawable(const std::vector<stage_times>& times, const schedule& sched) {
  constexpr std::uint64_t max_drawn = std::uint64_t{1} << 16;
  const std::uint64_t v = sched.kind == schedule_kind::interleaved ? sched.chunks : 1;
  for (const stage_times& t : times)
    if (const std::uint64_t ops = 2 * std::uint64_t{t.stages} * t.micro_batches * v; ops > max_drawn)
      mmbal::detail::throw_invalid("--svg: a panel of ", t.stages, " stages x ", t.micro_batches, " micro-batches x ",
                                   v, " chunks has ", ops, " operations to draw (at most ", max_drawn, "); drop --svg");
}

void write_svg(const std::string& path, const std::vector<stage_times>& times, const std::vector<pipeline_result>& rs,
               const schedule& sched, double hop) {
  constexpr double width = 1100, left = 90, right = 20, row = 18, gap = 34;
  std::ostringstream s;
  double y = 10;
  std::ostringstream body;
  const std::size_t shown = std::min<std::size_t>(times.size(), 16);
  for (std::size_t r = 0; r < shown; ++r) {
    double span = 0;
    for (const order_report& x : rs[r].orders) span = std::max(span, x.makespan);
    const double scale = (width - left - right) / std::max(span, 1e-300);
    for (int panel = 0; panel < 2; ++panel) {
      const order_report& x = panel == 0 ? rs[r].orders[0] : rs[r].orders[rs[r].chosen];
      std::vector<operation> ops;
      simulate(times[r], x.order, sched, hop, &ops);
      body << "<text x=\"" << left << "\" y=\"" << y + 12 << "\" font-weight=\"bold\">"
           << (times.size() > 1 ? "rank " + std::to_string(r) + ", " : std::string())
           << (panel == 0 ? "before" : "after") << " (" << to_string(x.kind) << "): makespan " << x.makespan
           << ", lower bound " << rs[r].lower << "</text>\n";
      y += 18;
      for (std::uint32_t st = 0; st < times[r].stages; ++st)
        body << "<text x=\"" << left - 6 << "\" y=\"" << y + row * st + 13 << "\" text-anchor=\"end\">stage " << st
             << "</text>\n";
      for (const operation& op : ops) {
        const double x0 = left + op.start * scale, w = std::max(0.0, (op.end - op.start) * scale);
        const double y0 = y + row * op.stage;
        body << "<rect x=\"" << x0 << "\" y=\"" << y0 << "\" width=\"" << w << "\" height=\"" << row - 2 << "\" fill=\""
             << (op.backward ? "#38a169" : "#3182ce") << "\" stroke=\"white\" stroke-width=\"0.5\"/>";
        if (w > 14)
          body << "<text x=\"" << x0 + w / 2 << "\" y=\"" << y0 + 12
               << "\" text-anchor=\"middle\" fill=\"white\" font-size=\"10\">" << op.micro_batch << "</text>";
        body << '\n';
      }
      y += row * times[r].stages + gap;
    }
  }
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << y
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << body.str() << "</svg>\n";
  mmbal::tool::write_file("--svg", path, [&](std::ostream& out) { out << s.str(); });
}

// A module whose phase no sample carries costs 0 (a batch may lack a modality the model has),
// so a misspelt phase would silently drop the module's time: say so on stderr.
void warn_absent_phases(const pipeline_model& model, const mmbal::workload& w, const std::string& model_path,
                        const std::string& input_path) {
  for (std::size_t s = 0; s < model.stages.size(); ++s)
    for (std::size_t k = 0; k < model.stages[s].modules.size(); ++k) {
      const std::string& phase = model.stages[s].modules[k].phase;
      if (phase == "llm" || w.find_modality(phase)) continue;
      std::string known;
      for (const std::string& m : w.modalities) known += (known.empty() ? "" : ", ") + m;
      std::cerr << "mmbal: warning: " << model_path << ": stages[" << s << "].modules[" << k << "].phase '" << phase
                << "' is in no sample of " << input_path << " (its modalities: " << (known.empty() ? "none" : known)
                << "); the module costs 0\n";
    }
}

int run_pipeline(const pipeline_options& o) {
  const schedule sched = mmbal::spec::parse_schedule(o.schedule);
  if (!(std::isfinite(o.hop) && o.hop >= 0)) mmbal::detail::throw_invalid("--hop ", o.hop, ": must be >= 0");
  if (o.order != "all") (void)mmbal::spec::parse_order_kind(o.order);
  std::vector<stage_times> times;
  std::vector<std::vector<std::vector<std::uint32_t>>> samples;  // per rank, per micro-batch: sample ids
  if (!o.times.empty()) {
    if (!o.input.empty() || !o.model.empty()) mmbal::detail::throw_invalid("--times excludes --input and --model");
    times.push_back(read_times(o.times));
  } else {
    if (o.input.empty() || o.model.empty())
      mmbal::detail::throw_invalid("give --times FILE, or --input W.jsonl with --model MODEL.json");
    (void)mmbal::checked_ranks(o.ranks, "--ranks");
    if (o.micro_batches == 0) mmbal::detail::throw_invalid("--micro-batches: must be > 0");
    const pipeline_model model = read_model(o.model);
    const mmbal::workload w = mmbal::tool::read_workload(o.input, o.ranks);
    warn_absent_phases(model, w, o.model, o.input);
    // More micro-batches than samples are all empty but cost O(p·M²) to order (disttrain).
    if (o.micro_batches > w.samples.size())
      mmbal::detail::throw_invalid("--micro-batches = ", o.micro_batches, " exceeds the ", w.samples.size(),
                                   " samples of ", o.input);
    const auto split = std::visit([&](const auto& c) { return rank_micro_batches(w, o.ranks, o.micro_batches, c); },
                                  mmbal::spec::parse_cost(o.cost));
    for (const auto& mbs : split) {
      const std::size_t rank = times.size();
      try {
        times.push_back(stage_times_from_samples(model, w, mbs));
        validate(times.back());
      } catch (const mmbal::invalid_input& e) {
        mmbal::detail::throw_invalid(o.model, ": rank ", rank, " of ", o.input, ": ", e.what());
      }
      auto& ids = samples.emplace_back();
      for (const auto& mb : mbs) {
        auto& v = ids.emplace_back();
        for (std::uint32_t i : mb) v.push_back(static_cast<std::uint32_t>(w.samples[i].id));
      }
    }
  }
  if (!o.svg.empty()) check_drawable(times, sched);
  std::vector<pipeline_result> results;
  const double us = mmbal::tool::elapsed_us([&] {
    for (const stage_times& t : times) results.push_back(run_orders(t, o, sched));
  });
  if (!o.svg.empty()) write_svg(o.svg, times, results, sched, o.hop);

  if (o.json) {
    nlohmann::json j;
    if (samples.empty()) {
      j = result_json(times[0], results[0]);
    } else {
      // A step waits for its slowest data-parallel rank.
      double before = 0, after = 0, lower = 0;
      nlohmann::json per = nlohmann::json::array();
      for (std::size_t r = 0; r < times.size(); ++r) {
        nlohmann::json x = result_json(times[r], results[r]);
        x["rank"] = r;
        x["samples"] = samples[r];
        before = std::max(before, results[r].orders[0].makespan);
        after = std::max(after, results[r].orders[results[r].chosen].makespan);
        lower = std::max(lower, results[r].lower);
        per.push_back(std::move(x));
      }
      j = {{"ranks", times.size()},
           {"stages", times[0].stages},
           {"micro_batches", times[0].micro_batches},
           {"step_makespan_identity", before},
           {"step_makespan", after},
           {"step_lower_bound", lower},
           {"per_rank", std::move(per)}};
    }
    j["schedule"] = to_spec(sched);
    j["hop"] = o.hop;
    j["elapsed_us"] = us;
    mmbal::tool::print_json(j);
    return 0;
  }
  for (std::size_t r = 0; r < times.size(); ++r) {
    if (!samples.empty()) std::cout << "rank " << r << ": ";
    std::cout << times[r].stages << " stages x " << times[r].micro_batches << " micro-batches, " << to_spec(sched)
              << ", lower bound " << results[r].lower << '\n';
    for (std::size_t k = 0; k < results[r].orders.size(); ++k) {
      const order_report& x = results[r].orders[k];
      std::cout << "  " << std::setw(10) << to_string(x.kind) << "  makespan " << std::setw(12) << x.makespan
                << "  (lower bound x" << std::setprecision(4)
                << (results[r].lower > 0 ? x.makespan / results[r].lower : 1.0) << std::setprecision(6) << ")"
                << (k == results[r].chosen ? "  <- chosen" : "") << '\n';
    }
  }
  std::cout << "planning " << us << " us\n";
  return 0;
}

const bool registered = mmbal::tool::register_command(65, [](CLI::App& app) -> std::function<int()> {
  auto o = std::make_shared<pipeline_options>();
  auto* sub =
      app.add_subcommand("pipeline", "Simulate a 1F1B/interleaved/GPipe pipeline and reorder its micro-batches");
  sub->add_option("--times", o->times, "JSON {\"forward\": [[...]...], \"backward\": [[...]...]}: p stages x m times");
  sub->add_option("--input", o->input, "Workload file (JSON Lines); with --model, --ranks, --micro-batches");
  sub->add_option("--model", o->model, "Pipeline model JSON (stages, modules, cost, trainable; see cmd_pipeline.cpp)");
  sub->add_option("--ranks", o->ranks, "Data-parallel ranks D (samples stay on their rank)");
  sub->add_option("--micro-batches", o->micro_batches, "Micro-batches M per rank (at most the workload's samples)");
  sub->add_option("--cost", o->cost, "Cost spec used to split each rank's samples into micro-batches")
      ->capture_default_str();
  sub->add_option("--order", o->order, "identity, verl, disttrain, search, or all (report every order, pick the best)")
      ->capture_default_str();
  sub->add_option("--schedule", o->schedule, "1f1b, interleaved:V (1 <= V <= 1024) or gpipe")->capture_default_str();
  sub->add_option("--hop", o->hop, "Communication time per stage hop (seconds)")->capture_default_str();
  sub->add_option("--max-evaluations", o->max_evaluations,
                  "Simulations the search may run (0: as many as 3*2^21 simulated operations allow)")
      ->capture_default_str();
  sub->add_option("--seed", o->seed, "Seed of the search's perturbations")->capture_default_str();
  sub->add_option("--svg", o->svg, "Write the schedule before (identity) and after (chosen order) as SVG");
  sub->add_flag("--json", o->json, "Print one JSON object");
  return [o] { return run_pipeline(*o); };
});

}  // namespace
