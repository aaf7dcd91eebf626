// Fuzz target: the JSONL workload reader (workload/jsonl.hpp) and what the tool derives from a
// workload it accepted. Input byte 0 = rank count (0 = unknown), the rest = the file.
// Invariants: the reader's fast path reads a line as nlohmann-json does, or leaves it to it;
// ranks < the rank count; write_jsonl reads back to the same workload; every phase's
// items, bytes and group ids are derivable or rejected with invalid_input.
#include "fuzz_support.hpp"

#include <mmbal/workload/jsonl.hpp>
#include <mmbal/workload/sample.hpp>

#include <sstream>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mmbal;
  fuzz::input in(data, size);
  const rank_t ranks = in.byte() % 17;
  const std::string text(in.rest());
  // Differential: a line the fast path reads, nlohmann-json reads alike.
  std::istringstream lines{text};
  detail::jsonl_fields fast, slow;
  nlohmann::json doc;
  for (std::string line; std::getline(lines, line);) {
    if (!detail::jsonl_fields_fast(line, fast)) continue;
    fuzz::require(fuzz::accepts([&] {
                    detail::jsonl_fields_of(line, {"fuzz.jsonl", 1}, doc, slow);
                  }),
                  "nlohmann-json reads a line the fast path reads");
    fuzz::require(fast == slow, "the fast path reads what nlohmann-json reads");
  }
  std::istringstream file{text};
  workload w;
  if (!fuzz::accepts([&] { w = read_jsonl(file, "fuzz.jsonl", ranks); })) return 0;

  fuzz::require(!w.samples.empty(), "an accepted workload has samples");
  fuzz::require(!w.modalities.empty() && w.modalities[0] == "text", "modality 0 is text");
  for (const sample& s : w.samples) {
    fuzz::require(ranks == 0 || s.rank < ranks, "rank below the rank count");
    fuzz::require(!s.segments.empty(), "a sample has segments");
    for (const segment& g : s.segments) fuzz::require(g.modality < w.modalities.size(), "modality is named");
  }
  std::ostringstream out;
  write_jsonl(out, w);
  std::istringstream again(out.str());
  fuzz::require(read_jsonl(again, "again", ranks) == w, "write_jsonl reads back to the same workload");

  for (std::size_t m = 0; m < w.modalities.size(); ++m) {
    const std::string phase = m == 0 ? std::string("llm") : w.modalities[m];
    phase_items items;
    fuzz::accepts([&] {
      items = phase_items_of(w, phase);
      fuzz::require(items.origin.size() == items.size() && items.sample_of.size() == items.size(),
                    "phase item vectors agree");
      for (std::size_t i = 0; i < items.size(); ++i)
        fuzz::require(items.sample_of[i] < w.samples.size(), "item names a sample");
      (void)phase_item_bytes(items, 7168, phase);
      (void)phase_group_ids(items, phase);
    });
  }
  return 0;
}
