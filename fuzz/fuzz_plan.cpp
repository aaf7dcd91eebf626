// Fuzz target: plan construction from arbitrary small assignments — rearrangement validation,
// `make_alltoall_plan`, loopback execution, `compose` and the encoder→LLM composition.
//
// Input: a mode byte, ranks (1..6), items (0..39). Mode bit 0 clear: every item's source and
// destination (rank, slot) come straight from the input (mostly invalid layouts, which must
// be rejected with invalid_input); set: both sides are built from a fuzzed rank per item and a
// fuzzed slot order (always valid). Then a size per item (0..4 bytes) and, for the
// composition, encoder items with a fuzzed sample (possibly out of range), segment index and
// encoder rank.
// Invariants: an accepted plan's counts, displacements and totals agree on every rank; the
// loopback run delivers every item's bytes exactly once to its destination slot, and the
// inverse brings them back; compose(r, r⁻¹) is the identity; the composed encoder→LLM plan
// is valid, puts every output on its sample's LLM rank, and equals its two hops composed.
#include "fuzz_support.hpp"

#include <mmbal/rearrange/alltoall_plan.hpp>
#include <mmbal/rearrange/composition.hpp>
#include <mmbal/rearrange/rearrangement.hpp>
#include <mmbal/transport/loopback.hpp>
#include <mmbal/workload/sample.hpp>

#include <cstddef>
#include <numeric>
#include <utility>
#include <vector>

namespace {

using namespace mmbal;

/// A valid layout: item i on `rank_of[i]`, slots on each rank in a fuzzed order.
std::vector<location> fuzzed_layout(fuzz::input& in, std::size_t n, rank_t ranks) {
  std::vector<rank_t> rank_of(n);
  for (auto& r : rank_of) r = in.byte() % ranks;
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  for (std::size_t i = n; i > 1; --i) std::swap(order[i - 1], order[in.byte() % i]);
  std::vector<std::uint32_t> next(ranks, 0);
  std::vector<location> where(n);
  for (std::size_t i : order) where[i] = location{rank_of[i], next[rank_of[i]]++};
  return where;
}

/// The byte `k` of item `i`'s payload.
std::byte payload(std::size_t i, std::uint64_t k) { return static_cast<std::byte>(i * 31 + k * 7 + 1); }

/// Every rank's buffer for `where`: the items on it in slot order, each its payload.
std::vector<std::vector<std::byte>> buffers(const std::vector<location>& where, const std::vector<std::uint64_t>& sizes,
                                            rank_t ranks) {
  std::vector<std::vector<std::size_t>> by_slot(ranks);
  for (std::size_t i = 0; i < where.size(); ++i) {
    auto& v = by_slot[where[i].rank];
    if (v.size() <= where[i].slot) v.resize(where[i].slot + std::size_t{1});
    v[where[i].slot] = i;
  }
  std::vector<std::vector<std::byte>> out(ranks);
  for (rank_t r = 0; r < ranks; ++r)
    for (std::size_t i : by_slot[r])
      for (std::uint64_t k = 0; k < sizes[i]; ++k) out[r].push_back(payload(i, k));
  return out;
}

void check_plans(const rearrangement& r, const std::vector<std::uint64_t>& sizes) {
  const std::vector<alltoall_plan> plans = make_alltoall_plans(r, sizes);
  for (rank_t p = 0; p < r.ranks; ++p) {
    const alltoall_plan& a = plans[p];
    fuzz::require(a.input_bytes == a.send_bytes && a.recv_bytes == a.output_bytes, "plan totals");
    std::uint64_t send = 0, recv = 0;
    for (rank_t q = 0; q < r.ranks; ++q) {
      fuzz::require(a.send_displs[q] == send && a.recv_displs[q] == recv, "displacements are prefix sums");
      send += a.send_counts[q];
      recv += a.recv_counts[q];
      fuzz::require(a.send_counts[q] == plans[q].recv_counts[p], "p sends to q what q receives from p");
    }
    fuzz::require(send == a.send_bytes && recv == a.recv_bytes, "counts sum to the totals");
  }
  const auto inputs = buffers(r.source, sizes, r.ranks);
  const auto outputs = transport::run_rearrangement(r, sizes, inputs);
  fuzz::require(outputs == buffers(r.destination, sizes, r.ranks), "every item delivered once, byte-exact");
  fuzz::require(transport::run_rearrangement(r.inverse(), sizes, outputs) == inputs, "the inverse restores inputs");
  const rearrangement round = compose(r, r.inverse());
  fuzz::require(round.source == r.source && round.destination == r.source, "compose(r, r^-1) is the identity");
  fuzz::require(fingerprint(r, sizes) == fingerprint(rearrangement(r), sizes), "fingerprint is a function");
  fuzz::require(rearrangement::between(assignment{r.ranks, r.source}, assignment{r.ranks, r.destination}) == r,
                "between() rebuilds the rearrangement");
}

void check_composition(fuzz::input& in, const rearrangement& llm) {
  const std::size_t samples = llm.size();
  const std::size_t m = in.byte() % 24;
  phase_items encoder;
  std::vector<location> encoder_destination;
  std::vector<rank_t> encoder_rank(m);
  for (std::size_t i = 0; i < m; ++i) {
    encoder.weights.push_back(in.byte());
    encoder.sample_of.push_back(in.byte() % (samples + 1));  // == samples: out of range
    encoder.segment_of.push_back(in.byte() % 3);
    encoder.origin.push_back(encoder.sample_of.back() < samples ? llm.source[encoder.sample_of.back()].rank : 0);
    encoder_rank[i] = in.byte() % llm.ranks;
  }
  rearrangement encoder_plan;
  if (!fuzz::accepts([&] {
        encoder_plan =
            rearrangement::from_origin(encoder.origin, assignment::from_partition({llm.ranks, encoder_rank}));
      }))
    return;
  encoder_to_llm_plans plans;
  if (!fuzz::accepts([&] { plans = compose_encoder_to_llm(encoder, encoder_plan, llm); })) return;
  plans.composed.validate();
  for (std::size_t i = 0; i < m; ++i)
    fuzz::require(plans.composed.destination[i].rank == llm.destination[encoder.sample_of[i]].rank,
                  "an encoder output lands on its sample's LLM rank");
  fuzz::require(compose(plans.back_to_origin, plans.origin_to_llm) == plans.composed, "composed == two hops");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::input in(data, size);
  const std::uint8_t mode = in.byte();
  const rank_t ranks = 1 + in.byte() % 6;
  const std::size_t n = in.byte() % 40;
  rearrangement r{ranks, {}, {}};
  if (mode & 1) {
    r.source = fuzzed_layout(in, n, ranks);
    r.destination = fuzzed_layout(in, n, ranks);
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      r.source.push_back(location{in.byte() % (ranks + 1u), in.byte() % (static_cast<std::uint32_t>(n) + 1)});
      r.destination.push_back(location{in.byte() % (ranks + 1u), in.byte() % (static_cast<std::uint32_t>(n) + 1)});
    }
  }
  std::vector<std::uint64_t> sizes(n);
  for (auto& s : sizes) s = in.byte() % 5;

  const bool source_ok = fuzz::accepts([&] { assignment{ranks, r.source}.validate(); });
  const bool valid = fuzz::accepts([&] { r.validate(); });
  fuzz::require(!valid || source_ok, "a valid rearrangement has a valid source assignment");
  fuzz::require(!(mode & 1) || valid, "layouts built from ranks and slot orders are valid");
  if (!valid) {
    // Everything that builds on an invalid rearrangement must reject it, never use it.
    fuzz::require(!fuzz::accepts([&] { (void)make_alltoall_plan(r, sizes, 0); }), "plan of an invalid layout");
    fuzz::require(!fuzz::accepts([&] { (void)compose(r, r.inverse()); }), "compose of an invalid layout");
    return 0;
  }
  check_plans(r, sizes);
  check_composition(in, r);
  return 0;
}
