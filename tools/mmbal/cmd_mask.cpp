// `mmbal mask`: the bitfield attention mask of one packed sequence (the file's samples are
// its consecutive documents) and its context-parallel token distribution (docs/DESIGN.md §5.3,
// §5.4, §6; Cornstarch §4.3).
#include "tool.hpp"
#include "workload_input.hpp"

#include <mmbal/context/distribute.hpp>
#include <mmbal/mask/mask.hpp>
#include <mmbal/spec/context.hpp>

#include <cstdint>
#include <iomanip>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace {

struct mask_state {
  std::string input;
  std::uint32_t cp = 0;
  std::uint32_t block = 128;
  std::string distribute = "lpt";
  std::string bits = "modality";  // as mmbal.bitfield_mask's default; span bits run out past 61 spans
  std::uint64_t seed = 0;
  bool json = false;
  bool emit_workloads = false;
};

mmbal::bit_assignment parse_bits(const std::string& s) {
  if (s == "span") return mmbal::bit_assignment::span;
  if (s == "modality") return mmbal::bit_assignment::modality;
  mmbal::detail::throw_invalid("--bits '", s, "': expected modality or span");
}

int run_mask(const mask_state& s) {
  (void)mmbal::checked_ranks(s.cp, "--cp (context-parallel group size G)");
  if (s.block == 0) mmbal::detail::throw_invalid("--block 0: blocks need at least one token (B = 0)");
  const mmbal::bit_assignment bits = parse_bits(s.bits);
  const mmbal::spec::any_distributor policy = mmbal::spec::parse_distributor(s.distribute, s.seed);
  const mmbal::workload w = mmbal::tool::read_workload(s.input, 0);

  mmbal::bitfield_mask mask;
  std::vector<mmbal::workload_run> runs;
  std::vector<std::uint64_t> blocks;
  mmbal::token_distribution dist;
  const double us = mmbal::tool::elapsed_us([&] {
    try {
      mask = mmbal::build_bitfield_mask(std::span<const mmbal::sample>(w.samples), bits);
    } catch (const mmbal::invalid_input& e) {  // documents are the file's samples in order
      mmbal::detail::throw_invalid(s.input, ": --bits ", s.bits, ": ", e.what());
    }
    runs = mmbal::workload_runs(mask);
    blocks = mmbal::block_workloads(runs, mask.size(), s.block);
    dist = mmbal::spec::distribute_tokens(blocks, mask.size(), s.block, s.cp, policy);
  });

  if (!s.json) {
    std::cout << "tokens " << mask.size() << ", documents " << w.samples.size() << ", cp " << s.cp << ", block "
              << s.block << ", policy " << s.distribute << ", bits " << s.bits << '\n';
    std::cout << std::setw(6) << "rank" << std::setw(12) << "tokens" << std::setw(20) << "workload" << '\n';
    for (mmbal::rank_t r = 0; r < s.cp; ++r)
      std::cout << std::setw(6) << r << std::setw(12) << dist.rank_tokens[r] << std::setw(20) << dist.rank_workloads[r]
                << '\n';
    std::cout << "total area " << dist.total_workload << ", max/mean " << dist.max_over_mean() << ", "
              << std::setprecision(1) << std::fixed << us << " us\n";
    return 0;
  }
  nlohmann::json j;
  j["tokens"] = mask.size();
  j["documents"] = w.samples.size();
  j["cp"] = s.cp;
  j["block"] = s.block;
  j["policy"] = s.distribute;
  j["rank_tokens"] = dist.rank_tokens;
  j["rank_workloads"] = dist.rank_workloads;
  j["max_over_mean"] = dist.max_over_mean();
  j["total_area"] = dist.total_workload;
  j["elapsed_us"] = us;
  if (s.emit_workloads) {
    std::vector<std::uint32_t> tw(mask.size());
    for (const mmbal::workload_run& r : runs)
      for (std::uint32_t i = 0; i < r.length; ++i) tw[r.begin + i] = r.first + r.step * i;
    j["token_workloads"] = tw;
  }
  mmbal::tool::print_json(j);
  return 0;
}

const bool registered = mmbal::tool::register_command(50, [](CLI::App& app) -> std::function<int()> {
  auto state = std::make_shared<mask_state>();
  auto* sub = app.add_subcommand("mask",
                                 "Bitfield attention mask of one packed sequence (the file's samples are its "
                                 "consecutive documents) and its context-parallel token distribution "
                                 "(Cornstarch 4.3).");
  sub->add_option("--input", state->input, "JSONL workload; each line is one document of the sequence, in order")
      ->required();
  sub->add_option("--cp", state->cp, "context-parallel group size G (>= 1)")->required();
  sub->add_option("--block", state->block, "tokens per distribution block B (default 128)");
  sub->add_option("--distribute", state->distribute,
                  "lpt (workload-balanced), zigzag (2G chunks, rank i takes i and 2G-1-i), contiguous (naive "
                  "ring) or random (seeded) (default lpt)");
  sub->add_option("--bits", state->bits,
                  "modality bits per span (span: a span attends itself) or per modality (modality: all spans "
                  "of a modality in a document attend each other) (default modality, as mmbal.bitfield_mask)");
  sub->add_option("--seed", state->seed, "seed of --distribute random (default 0)");
  sub->add_flag("--json", state->json, "print one JSON object");
  sub->add_flag("--emit-workloads", state->emit_workloads,
                "with --json: add token_workloads (keys attended by every token, in sequence order)");
  return [state] { return run_mask(*state); };
});

}  // namespace
