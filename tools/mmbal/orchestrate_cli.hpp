#pragma once
// Shared by `mmbal orchestrate` and `mmbal simulate`: the per-phase policy flags
// (--cost-<phase>, --algorithm-<phase>) and the report printers.
//
// CLI11 needs every option declared before parsing, so the flags exist for the phases
// `llm`, `image`, `audio` and `video`; a workload phase without flags (or any other modality)
// runs with its default policy (`mmbal::orchestrate::default_policy`, or the caller's).

#include <mmbal/orchestrate/orchestrator.hpp>
#include <mmbal/spec/policy.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mmbal::tool {

/// The phases that get their own --cost-<phase> / --algorithm-<phase> flags.
inline constexpr std::array<std::string_view, 4> flag_phases{"llm", "image", "audio", "video"};

/// Spec strings given on the command line; empty = not given.
struct phase_flags {
  std::array<std::string, flag_phases.size()> cost;
  std::array<std::string, flag_phases.size()> algorithm;
  std::vector<std::string> keep_groups;  ///< phases whose items keep the file's `group` together

  /// Declares --cost-<phase> and --algorithm-<phase> for every phase of `flag_phases`.
  void add_to(CLI::App* sub, std::string_view defaults_note) {
    for (std::size_t k = 0; k < flag_phases.size(); ++k) {
      const std::string phase(flag_phases[k]);
      sub->add_option("--cost-" + phase, cost[k],
                      "cost spec of the " + phase +
                          " phase (tokens, padded, attention:alpha=..,beta=.., "
                          "padded-attention:.., conv:lambda=.., fitted:x=..,y=..,z=.., flops:...); " +
                          std::string(defaults_note));
      sub->add_option("--algorithm-" + phase, algorithm[k],
                      "algorithm spec of the " + phase +
                          " phase (lpt, greedy-ascending, padded, tolerance:v=.., conv, "
                          "kk, migrate:eps=.., optionally +refine); with --cost-" +
                          phase + " alone: that cost's default (padded for a padded cost, else lpt+refine)");
    }
    sub->add_option("--keep-groups", keep_groups,
                    "phases (llm, image, audio, video) whose items of samples with the same JSONL group stay on one "
                    "rank, as balance does (default none: groups are ignored)")
        ->delimiter(',');
  }

  /// Sets on `o` the policy of every phase for which a flag was given, starting from `base`
  /// (the phase's default policy when a flag leaves the other half unset).
  template <class BaseFn>
  void apply(orchestrate::orchestrator& o, BaseFn&& base) const {
    for (std::size_t k = 0; k < flag_phases.size(); ++k) {
      const std::string phase(flag_phases[k]);
      orchestrate::phase_policy p;
      try {
        p = spec::with_specs(base(phase), cost[k], algorithm[k]);
      } catch (const invalid_input& e) {
        detail::throw_invalid("--", cost[k].empty() ? "algorithm-" : "cost-", phase, ": ", e.what());
      }
      p.keep_groups = std::find(keep_groups.begin(), keep_groups.end(), phase) != keep_groups.end();
      o.set_policy(phase, std::move(p));
    }
    for (const std::string& phase : keep_groups)
      if (std::find(flag_phases.begin(), flag_phases.end(), phase) == flag_phases.end())
        detail::throw_invalid("--keep-groups: phase '", phase, "' (expected llm, image, audio or video)");
  }
};

/// A 64-bit fingerprint as 16 hexadecimal digits (JSON numbers above 2^53 lose digits in
/// many parsers).
inline std::string hex64(std::uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

/// Bytes in human units (B, KiB, MiB, GiB).
inline std::string human_bytes(std::uint64_t b) {
  const char* unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  std::ostringstream out;
  out << std::fixed << std::setprecision(u == 0 ? 0 : 1) << v << ' ' << unit[u];
  return out.str();
}

/// The orchestrator settings `orchestrate` and `simulate` share, with their flags. The caller
/// sets its own defaults before `add_to` (they differ per subcommand).
struct orchestrator_flags {
  std::uint32_t ranks_per_node = 0;
  std::uint64_t bytes_per_token = 1;
  bool no_relabel = false;
  unsigned threads = 0;

  /// Registers --ranks-per-node and --bytes-per-token (with the caller's help texts, which
  /// name its defaults), --no-relabel and --threads.
  void add_to(CLI::App* sub, const std::string& ranks_per_node_help, const std::string& bytes_per_token_help) {
    sub->add_option("--ranks-per-node", ranks_per_node, ranks_per_node_help);
    sub->add_option("--bytes-per-token", bytes_per_token, bytes_per_token_help);
    sub->add_flag("--no-relabel", no_relabel, "keep the partitioners' batch order (no node-wise relabeling)");
    sub->add_option("--threads", threads,
                    "threads that plan the phases concurrently; 0 = hardware concurrency (default 0); the plan is "
                    "identical for every value");
  }

  /// The orchestrator options for `ranks` ranks. Throws `invalid_input` for --bytes-per-token 0.
  [[nodiscard]] orchestrate::orchestrator_options options(rank_t ranks) const {
    if (bytes_per_token == 0) mmbal::detail::throw_invalid("--bytes-per-token 0: must be > 0");
    orchestrate::orchestrator_options opt;
    opt.ranks = ranks;
    opt.ranks_per_node = ranks_per_node;
    opt.bytes_per_token = bytes_per_token;
    opt.relabel = !no_relabel;
    opt.threads = threads;
    return opt;
  }
};

/// The per-phase fields of docs/DESIGN.md §6's `orchestrate` JSON.
inline constexpr std::array<std::string_view, 13> orchestrate_report_keys{"name",
                                                                          "cost",
                                                                          "algorithm",
                                                                          "items",
                                                                          "max_before",
                                                                          "max_after",
                                                                          "mean",
                                                                          "lower_bound",
                                                                          "moved_items",
                                                                          "moved_bytes",
                                                                          "inter_node_bytes",
                                                                          "inter_node_max_identity",
                                                                          "inter_node_max_relabeled"};

/// The per-phase fields `simulate`'s JSON adds to those of `orchestrate`: the imbalance.
inline constexpr std::array<std::string_view, 3> simulate_extra_keys{"mean_before", "imbalance_before",
                                                                     "imbalance_after"};

/// The JSON object of a phase report with the fields named in `keys` (the library's field
/// names, `orchestrate::for_each_field`): the tool's one JSON serializer of a phase report.
inline nlohmann::json phase_report_json(const orchestrate::phase_report& r,
                                        std::span<const std::string_view> keys = orchestrate_report_keys) {
  nlohmann::json j = nlohmann::json::object();
  orchestrate::for_each_field(r, [&](std::string_view key, const auto& value) {
    if (std::find(keys.begin(), keys.end(), key) != keys.end()) j[std::string(key)] = value;
  });
  return j;
}

}  // namespace mmbal::tool
