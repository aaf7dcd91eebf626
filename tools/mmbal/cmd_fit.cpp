// `mmbal fit`: fit LoongForge's per-sample cost c(L) = x L² + y L + z (x, y, z ≥ 0) to measured
// step times (cost/fit.hpp) and print it as a `--cost` spec.
//
// Input: JSON Lines, one step a line: {"ranks": [[len, len, ...], ...], "step_time": seconds}.
// Blank lines are skipped; line numbers in messages are 1-based physical lines.
#include <mmbal/cost/fit.hpp>
#include <mmbal/spec/cost.hpp>
#include <mmbal/workload/jsonl.hpp>

#include "tool.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace {

struct fit_cli_options {
  std::string steps;
  double temperature = mmbal::cost::fit_options{}.temperature;
  std::int64_t window = 0;  // 0 = every step (signed: a negative value is named, not wrapped)
  bool json = false;
};

/// One parsed step and the line it came from.
struct step_line {
  mmbal::cost::observed_step step;
  std::uint64_t line = 0;
};

/// Reads the steps file; throws `invalid_input` naming file, line and field.
std::vector<step_line> read_steps(const std::string& path) {
  using mmbal::detail::throw_jsonl;
  std::ifstream in(path);
  if (!in) mmbal::detail::throw_invalid(path, ": cannot open steps file");
  mmbal::detail::jsonl_where at{path, 0};
  std::vector<step_line> out;
  std::string text;
  while (std::getline(in, text)) {
    ++at.line;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (text.find_first_not_of(" \t") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = mmbal::detail::parse_json_strict(text);
    } catch (const mmbal::invalid_input& e) {
      throw_jsonl(at, "", e.what());
    }
    if (!j.is_object()) throw_jsonl(at, "", "expected a JSON object, got ", j.type_name());
    step_line s;
    s.line = at.line;
    const auto ranks = j.find("ranks");
    if (ranks == j.end()) throw_jsonl(at, "ranks", "missing");
    if (!ranks->is_array()) throw_jsonl(at, "ranks", "must be an array of arrays, got ", ranks->type_name());
    if (ranks->empty()) throw_jsonl(at, "ranks", "empty (a step needs at least one rank)");
    bool any = false;
    for (std::size_t r = 0; r < ranks->size(); ++r) {
      const nlohmann::json& lengths = (*ranks)[r];
      const auto field = mmbal::detail::jsonl_field::element("ranks", r);
      if (!lengths.is_array())
        throw_jsonl(at, field, "must be an array of lengths, got ", lengths.type_name(), " ", lengths.dump());
      auto& dst = s.step.ranks.emplace_back();
      dst.reserve(lengths.size());
      for (std::size_t i = 0; i < lengths.size(); ++i)
        dst.push_back(static_cast<mmbal::length_t>(
            mmbal::detail::jsonl_unsigned(lengths[i], at, mmbal::detail::jsonl_field::element("ranks", r, i), "length",
                                          std::numeric_limits<mmbal::length_t>::max())));
      any = any || !dst.empty();
    }
    if (!any) throw_jsonl(at, "ranks", "no rank holds a sample");
    const auto time = j.find("step_time");
    if (time == j.end()) throw_jsonl(at, "step_time", "missing");
    if (!time->is_number()) throw_jsonl(at, "step_time", "must be a number, got ", time->type_name());
    s.step.step_time = time->get<double>();
    if (!std::isfinite(s.step.step_time) || !(s.step.step_time > 0))
      throw_jsonl(at, "step_time", time->dump(), " must be finite and > 0");
    out.push_back(std::move(s));
  }
  if (in.bad()) mmbal::detail::throw_invalid(path, ": read error after line ", at.line);
  if (out.empty()) mmbal::detail::throw_invalid(path, ": no steps (empty file, ", at.line, " lines)");
  return out;
}

int run_fit(const fit_cli_options& o) {
  using namespace mmbal;
  const std::vector<step_line> lines = read_steps(o.steps);
  std::vector<cost::observed_step> steps;
  steps.reserve(lines.size());
  for (const step_line& l : lines) steps.push_back(l.step);
  cost::fit_options options;
  options.temperature = o.temperature;
  cost::fit_result r{cost::fitted{}, cost::fitted{}, {}, 0, 0};
  double us = 0;
  if (o.window < 0) mmbal::detail::throw_invalid("--window = ", o.window, " must be >= 0");
  const auto window = static_cast<std::size_t>(o.window);
  if (window > 0) {
    // The online refit: every step enters the window in file order; the model is fitted to the
    // last `window` of them, as a trainer refitting during training would see it.
    cost::online_fit online(window, options);
    for (const auto& s : steps) online.add_step(s);
    us = tool::elapsed_us([&] { r = online.fit(); });
  } else {
    us = tool::elapsed_us([&] { r = cost::fit_cost(steps, options); });
  }
  const std::size_t fitted_steps = window > 0 ? std::min(window, steps.size()) : steps.size();
  const std::string spec = spec::to_spec(spec::any_cost{r.model});
  if (o.json) {
    nlohmann::json j;
    j["x"] = r.model.x();
    j["y"] = r.model.y();
    j["z"] = r.model.z();
    j["error_mean"] = r.error.mean;
    j["error_max"] = r.error.max;
    j["steps"] = fitted_steps;
    j["window"] = o.window;
    j["cost"] = spec;
    j["initial"] = {{"x", r.initial.x()}, {"y", r.initial.y()}, {"z", r.initial.z()}};
    j["objective"] = r.objective;
    j["iterations"] = r.iterations;
    j["temperature"] = o.temperature;
    j["elapsed_us"] = us;
    tool::print_json(j);
    return 0;
  }
  std::cout << "fitted c(L) = x L^2 + y L + z on " << fitted_steps << " steps: x = " << r.model.x()
            << ", y = " << r.model.y() << ", z = " << r.model.z() << "\n"
            << "relative error of the predicted step times: mean " << r.error.mean << ", max " << r.error.max << "\n"
            << "cost spec: " << spec << "\n"
            << "fitting " << us << " us (" << r.iterations << " Gauss-Newton iterations)\n";
  return 0;
}

const bool registered = mmbal::tool::register_command(75, [](CLI::App& app) -> std::function<int()> {
  auto o = std::make_shared<fit_cli_options>();
  auto* sub = app.add_subcommand("fit", "Fit the cost c(L) = x L^2 + y L + z to measured step times (LoongForge)");
  sub->add_option("--steps", o->steps,
                  "Steps file (JSON Lines): {\"ranks\": [[len, ...], ...], \"step_time\": seconds} per line")
      ->required();
  sub->add_option("--temperature", o->temperature,
                  "Relative log-sum-exp temperature of the smoothed max over ranks (bias <= t ln R)")
      ->capture_default_str();
  sub->add_option("--window", o->window,
                  "Fit only the last W steps of the file (the online refit's window); 0 = all steps")
      ->capture_default_str();
  sub->add_flag("--json", o->json, "Print one JSON object");
  return [o] { return run_fit(*o); };
});

}  // namespace
