// Reading the JSONL workload format (`read_jsonl`, docs/DESIGN.md §6): the step every
// subcommand of the `mmbal` tool starts with. Inputs: the omni step of 2,560 ranks × 60 samples
// and its image-heavy variant (bench/omni_step.hpp, written by `write_jsonl` once per process).
// Same-run baselines on the same text: `std::getline` over its lines alone (the I/O floor) and
// one bare `nlohmann::json::parse` per line (the parser the reader validates on top of).
// Counters: MB of input, samples, MB/s.
#include "omni_step.hpp"

#include <mmbal/workload/jsonl.hpp>

#include <benchmark/benchmark.h>

#include <sstream>
#include <string>

namespace {

enum mix : int { omni_mix = 0, image_mix = 1 };

const std::string& step_text(mix m) {
  static std::string text[2];
  if (text[m].empty()) {
    std::ostringstream out;
    mmbal::write_jsonl(out, mmbal::bench::omni_step(2560, 60, m == image_mix));
    text[m] = std::move(out).str();
  }
  return text[m];
}

void set_counters(benchmark::State& state, const std::string& text, std::size_t samples) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
  state.counters["MB"] = static_cast<double>(text.size()) / 1e6;
  state.counters["samples"] = static_cast<double>(samples);
}

// Arg: 0 omni, 1 image-heavy.
void BM_read_jsonl(benchmark::State& state) {
  const std::string& text = step_text(static_cast<mix>(state.range(0)));
  std::size_t samples = 0;
  for (auto _ : state) {
    std::istringstream in(text);
    const mmbal::workload w = mmbal::read_jsonl(in, "step.jsonl", 2560);
    samples = w.samples.size();
    benchmark::DoNotOptimize(w.samples.data());
  }
  set_counters(state, text, samples);
}

// The baselines' loop: `per_line` on every line of the step's text, split by `std::getline`
// as `read_jsonl` splits it.
template <class PerLine>
void each_line(benchmark::State& state, PerLine per_line) {
  const std::string& text = step_text(static_cast<mix>(state.range(0)));
  std::size_t lines = 0;
  for (auto _ : state) {
    std::istringstream in(text);
    std::string line;
    lines = 0;
    while (std::getline(in, line)) {
      per_line(line);
      ++lines;
    }
  }
  set_counters(state, text, lines);
}

void BM_getline_only(benchmark::State& state) {
  each_line(state, [](const std::string& line) { benchmark::DoNotOptimize(line.data()); });
}

void BM_bare_json_parse(benchmark::State& state) {
  each_line(state, [](const std::string& line) {
    const nlohmann::json j = nlohmann::json::parse(line);
    benchmark::DoNotOptimize(j.size());
  });
}

}  // namespace

BENCHMARK(BM_read_jsonl)->Arg(omni_mix)->Arg(image_mix)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_getline_only)->Arg(omni_mix)->Arg(image_mix)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_bare_json_parse)->Arg(omni_mix)->Arg(image_mix)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
