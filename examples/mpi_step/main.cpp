// One training step's data movement with mmbal over MPI (run on 4 ranks:
//   mpiexec --allow-run-as-root --oversubscribe -np 4 build/<dir>/examples/mpi_step/mpi_step).
//
//  1. every rank generates its own samples from (seed, rank) (realistic omni family);
//  2. metadata all-gather: every rank holds the same global batch (lengths only);
//  3. plan with the orchestrator (default per-phase policies: image/video lpt+refine on tokens, audio
//     padded, LLM attention cost on the full interleaved length; node-wise relabeling with 2
//     ranks per node), giving Π_E per encoder, Π_M, and per encoder the composed encoder→LLM
//     plan Π_M ∘ Π_E⁻¹; the plan fingerprint is all-reduced once before any payload moves;
//  4. encoder dispatch (Π_E) of the encoder inputs;
//  5. a deterministic stand-in "encode": output bytes are a function of the segment and of the
//     input bytes the rank actually received;
//  6. the composed move of encoder outputs straight to their samples' LLM ranks, and Π_M for
//     the text embeddings;
//  7. assembly of every sample's sequence in segment order on its LLM rank;
//  8. backward: gradients (stand-in: bitwise NOT of the forward bytes) go back with the
//     inverse plans — composed⁻¹ to the encoder ranks, Π_M⁻¹ and Π_E⁻¹ to the origin.
// Every payload byte is a pure function of (seed, segment, byte index), so every rank verifies
// every byte it receives without extra communication. Every exchange goes through
// `transport::execute`, which first all-reduces the plan fingerprint (all ranks throw if
// they disagree). Byte sizes (the orchestrator's `bytes_per_token` = 4): encoder inputs 4 bytes
// per encoder unit (patch, frame), encoder outputs and text embeddings 4 bytes per LLM token —
// stand-ins small enough for a laptop.
#include <mmbal/core/rng.hpp>
#include <mmbal/orchestrate/orchestrator.hpp>
#include <mmbal/rearrange/alltoall_plan.hpp>
#include <mmbal/rearrange/composition.hpp>
#include <mmbal/rearrange/rearrangement.hpp>
#include <mmbal/transport/concepts.hpp>
#include <mmbal/transport/mpi.hpp>
#include <mmbal/workload/generators.hpp>
#include <mmbal/workload/length_data.hpp>
#include <mmbal/workload/sample.hpp>

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <vector>

namespace {

using namespace mmbal;
using bytes = std::vector<std::byte>;

constexpr std::uint64_t seed = 2026;
constexpr std::uint64_t samples_per_rank = 16;
constexpr std::uint64_t bytes_per_token = 4;  // encoder input per unit; encoder output / text per LLM token
constexpr rank_t ranks_per_node = 2;
enum tag : std::uint64_t { encoder_input = 1, encoder_output = 2, text_embedding = 3 };

/// Payload byte j of the `what` data of segment `key`: a pure function, the same on every rank.
std::byte byte_at(std::uint64_t what, std::uint64_t key, std::uint64_t j) {
  return static_cast<std::byte>(splitmix64(seed ^ (what << 60) ^ (key * 0x9E3779B97F4A7C15ULL) ^ (j << 20) ^ j) >> 56);
}

/// Segment k of sample s (global index) as a payload key.
std::uint64_t segment_key(const workload& w, std::size_t s, std::size_t k) { return w.samples[s].id * 1024 + k; }

/// The stand-in encoder: output byte j mixes the segment's own stream with input byte j mod |input|.
std::byte encode_byte(std::uint64_t key, std::uint64_t j, std::span<const std::byte> input) {
  const std::byte b = byte_at(encoder_output, key, j);
  return input.empty() ? b : b ^ input[j % input.size()];
}

/// Items of `rank` in a layout, in slot order.
std::vector<std::size_t> items_in_slot_order(std::span<const location> where, rank_t rank) {
  std::vector<std::size_t> on;
  for (std::size_t i = 0; i < where.size(); ++i)
    if (where[i].rank == rank) on.push_back(i);
  std::sort(on.begin(), on.end(), [&](std::size_t a, std::size_t b) { return where[a].slot < where[b].slot; });
  return on;
}

/// A rank's buffer for a layout: its items in slot order, each item's bytes from `append`.
bytes layout_bytes(std::span<const location> where, rank_t rank,
                   const std::function<void(std::size_t, bytes&)>& append) {
  bytes out;
  for (std::size_t i : items_in_slot_order(where, rank)) append(i, out);
  return out;
}

struct counters {
  std::uint64_t verified = 0;  // bytes compared with their expected value
  std::uint64_t wrong = 0;     // of which differed
  void check(const bytes& got, const bytes& expected) {
    const std::size_t n = std::min(got.size(), expected.size());
    verified += std::max(got.size(), expected.size());
    wrong += std::max(got.size(), expected.size()) - n;
    for (std::size_t j = 0; j < n; ++j) wrong += got[j] != expected[j];
  }
};

bytes inverted(bytes b) {
  for (std::byte& x : b) x = ~x;
  return b;
}

int run(transport::mpi_transport& t) {
  const rank_t d = t.size();
  const rank_t me = t.rank();

  // 1. Local samples from (seed, rank); ids unique across ranks.
  generator_options o;
  o.samples = samples_per_rank;
  o.ranks = 1;
  o.seed = splitmix64(seed ^ (std::uint64_t{me} << 32));
  workload local = generate(family::omni, o, default_length_data());
  for (std::size_t i = 0; i < local.samples.size(); ++i) local.samples[i].id = std::uint64_t{me} * 1000000 + i;

  // 2. Metadata all-gather.
  const workload w = transport::gather_workload(t, local);

  // 3. Plans (identical on every rank), checked collectively once before any payload moves.
  orchestrate::orchestrator_options options;
  options.ranks = d;
  options.ranks_per_node = ranks_per_node;
  options.bytes_per_token = bytes_per_token;
  const orchestrate::orchestration plan = orchestrate::orchestrator(options).plan(w);
  transport::check_agreement(t, plan.fingerprint);
  const rearrangement& pi_m = plan.llm().forward;
  struct encoder_phase {
    std::string name;
    const phase_items& items;
    const rearrangement& pi_e;
    const rearrangement& composed;
    const std::vector<std::uint64_t>& in_sizes;   // encoder_len × bytes_per_token
    const std::vector<std::uint64_t>& out_sizes;  // llm_tokens × bytes_per_token
  };
  std::vector<encoder_phase> encoders;
  for (std::size_t k = 0; k + 1 < plan.phases.size(); ++k) {
    const auto& ph = plan.phases[k];
    const auto& c = plan.composed[k];
    encoders.push_back({ph.name, ph.items, ph.forward, c.composed, ph.item_bytes, c.item_bytes});
  }
  std::vector<std::uint64_t> text_sizes(w.samples.size(), 0);
  for (std::size_t s = 0; s < w.samples.size(); ++s)
    for (const segment& g : w.samples[s].segments)
      if (g.modality == text_modality) text_sizes[s] += std::uint64_t{g.llm_tokens} * bytes_per_token;

  // Expected contents, from metadata alone.
  const auto input_of = [&](const encoder_phase& e, std::size_t i, bytes& out) {
    const std::uint64_t key = segment_key(w, e.items.sample_of[i], e.items.segment_of[i]);
    for (std::uint64_t j = 0; j < e.in_sizes[i]; ++j) out.push_back(byte_at(encoder_input, key, j));
  };
  const auto output_of = [&](const encoder_phase& e, std::size_t i, bytes& out) {
    bytes in;
    input_of(e, i, in);
    const std::uint64_t key = segment_key(w, e.items.sample_of[i], e.items.segment_of[i]);
    for (std::uint64_t j = 0; j < e.out_sizes[i]; ++j) out.push_back(encode_byte(key, j, in));
  };
  const auto text_of = [&](std::size_t s, bytes& out) {
    const auto& segs = w.samples[s].segments;
    for (std::size_t k = 0; k < segs.size(); ++k)
      if (segs[k].modality == text_modality)
        for (std::uint64_t j = 0; j < std::uint64_t{segs[k].llm_tokens} * bytes_per_token; ++j)
          out.push_back(byte_at(text_embedding, segment_key(w, s, k), j));
  };

  counters c;
  std::uint64_t moved_here = 0;
  std::vector<bytes> assembled_outputs(encoders.size());  // per modality, assembly layout on this LLM rank
  std::vector<bytes> encoder_outputs(encoders.size());    // per modality, on this encoder rank

  // 4–6. Encoder dispatch, encode, composed move.
  for (std::size_t k = 0; k < encoders.size(); ++k) {
    const encoder_phase& e = encoders[k];
    const bytes origin_in = layout_bytes(e.pi_e.source, me, [&](std::size_t i, bytes& b) { input_of(e, i, b); });
    bytes enc_in(make_alltoall_plan(e.pi_e, e.in_sizes, me).output_bytes);
    transport::execute(t, e.pi_e, e.in_sizes, origin_in, enc_in);
    c.check(enc_in, layout_bytes(e.pi_e.destination, me, [&](std::size_t i, bytes& b) { input_of(e, i, b); }));
    moved_here += enc_in.size();

    bytes& out = encoder_outputs[k];  // encode what was received, in encoder slot order
    std::uint64_t at = 0;
    for (std::size_t i : items_in_slot_order(e.pi_e.destination, me)) {
      const std::span<const std::byte> in(enc_in.data() + at, e.in_sizes[i]);
      const std::uint64_t key = segment_key(w, e.items.sample_of[i], e.items.segment_of[i]);
      for (std::uint64_t j = 0; j < e.out_sizes[i]; ++j) out.push_back(encode_byte(key, j, in));
      at += e.in_sizes[i];
    }
    bytes& arrived = assembled_outputs[k];
    arrived.resize(make_alltoall_plan(e.composed, e.out_sizes, me).output_bytes);
    transport::execute(t, e.composed, e.out_sizes, out, arrived);
    c.check(arrived, layout_bytes(e.composed.destination, me, [&](std::size_t i, bytes& b) { output_of(e, i, b); }));
    moved_here += arrived.size();
  }
  const bytes origin_text = layout_bytes(pi_m.source, me, [&](std::size_t s, bytes& b) { text_of(s, b); });
  bytes llm_text(make_alltoall_plan(pi_m, text_sizes, me).output_bytes);
  transport::execute(t, pi_m, text_sizes, origin_text, llm_text);
  moved_here += llm_text.size();

  // 7. Assembly in segment order: text from llm_text, modality outputs from the composed buffers
  // (their layout lists, per LLM slot, the sample's segments of that modality in order).
  std::vector<std::uint64_t> at_modality(encoders.size(), 0);
  std::vector<int> phase_of(w.modalities.size(), -1);
  for (std::size_t k = 0; k < encoders.size(); ++k) phase_of[*w.find_modality(encoders[k].name)] = static_cast<int>(k);
  std::uint64_t at_text = 0;
  std::vector<bytes> sequences;
  const std::vector<std::size_t> my_samples = items_in_slot_order(pi_m.destination, me);
  for (std::size_t s : my_samples) {
    bytes seq, expected;
    const auto& segs = w.samples[s].segments;
    for (std::size_t k = 0; k < segs.size(); ++k) {
      const std::uint64_t n = std::uint64_t{segs[k].llm_tokens} * bytes_per_token;
      const std::uint64_t key = segment_key(w, s, k);
      if (segs[k].modality == text_modality) {
        seq.insert(seq.end(), llm_text.begin() + static_cast<std::ptrdiff_t>(at_text),
                   llm_text.begin() + static_cast<std::ptrdiff_t>(at_text + n));
        at_text += n;
        for (std::uint64_t j = 0; j < n; ++j) expected.push_back(byte_at(text_embedding, key, j));
      } else {
        const auto p = static_cast<std::size_t>(phase_of[segs[k].modality]);
        const bytes& src = assembled_outputs[p];
        seq.insert(seq.end(), src.begin() + static_cast<std::ptrdiff_t>(at_modality[p]),
                   src.begin() + static_cast<std::ptrdiff_t>(at_modality[p] + n));
        at_modality[p] += n;
        bytes in;
        for (std::uint64_t j = 0; j < std::uint64_t{segs[k].encoder_len} * bytes_per_token; ++j)
          in.push_back(byte_at(encoder_input, key, j));
        for (std::uint64_t j = 0; j < n; ++j) expected.push_back(encode_byte(key, j, in));
      }
    }
    c.check(seq, expected);
    sequences.push_back(std::move(seq));
  }

  // 8. Backward: gradient of every sequence = NOT of it; split it back into text and
  // per-modality gradients (same layouts as forward) and send them with the inverse plans.
  bytes text_grad;
  std::vector<bytes> modality_grad(encoders.size());
  for (std::size_t q = 0; q < my_samples.size(); ++q) {
    const std::size_t s = my_samples[q];
    std::uint64_t at = 0;
    for (const segment& g : w.samples[s].segments) {
      const std::uint64_t n = std::uint64_t{g.llm_tokens} * bytes_per_token;
      bytes& dst =
          g.modality == text_modality ? text_grad : modality_grad[static_cast<std::size_t>(phase_of[g.modality])];
      for (std::uint64_t j = 0; j < n; ++j) dst.push_back(~sequences[q][at + j]);
      at += n;
    }
  }
  bytes text_back(origin_text.size());
  transport::execute(t, pi_m.inverse(), text_sizes, text_grad, text_back);
  c.check(text_back, inverted(origin_text));
  for (std::size_t k = 0; k < encoders.size(); ++k) {
    const encoder_phase& e = encoders[k];
    bytes out_grad(encoder_outputs[k].size());
    transport::execute(t, e.composed.inverse(), e.out_sizes, modality_grad[k], out_grad);
    c.check(out_grad, inverted(encoder_outputs[k]));
    // Stand-in encoder backward: the input gradient is the NOT of the input; back to origin.
    const bytes in_grad =
        inverted(layout_bytes(e.pi_e.destination, me, [&](std::size_t i, bytes& b) { input_of(e, i, b); }));
    bytes origin_grad(make_alltoall_plan(e.pi_e, e.in_sizes, me).input_bytes);
    transport::execute(t, e.pi_e.inverse(), e.in_sizes, in_grad, origin_grad);
    c.check(origin_grad,
            inverted(layout_bytes(e.pi_e.source, me, [&](std::size_t i, bytes& b) { input_of(e, i, b); })));
  }

  // Summary (rank 0), with global sums.
  std::uint64_t sums[3] = {c.verified, c.wrong, moved_here};
  MPI_Allreduce(MPI_IN_PLACE, sums, 3, MPI_UINT64_T, MPI_SUM, t.comm());
  if (me == 0) {
    std::printf("mmbal mpi_step: %u ranks (%u per node), %zu samples (omni), %zu encoder phases\n", d, ranks_per_node,
                w.samples.size(), encoders.size());
    for (const auto& ph : plan.phases) {
      const auto& r = ph.report;
      std::printf("  %-6s %3llu items  max %7.0f -> %7.0f (lower bound %7.0f)  moved %7llu B  [%s / %s]\n",
                  r.name.c_str(), static_cast<unsigned long long>(r.items), r.max_before, r.max_after, r.lower_bound,
                  static_cast<unsigned long long>(r.moved_bytes), r.cost.c_str(), r.algorithm.c_str());
    }
    std::printf("  encoder outputs to the LLM ranks: composed %llu B vs two hops %llu B\n",
                static_cast<unsigned long long>(plan.composed_bytes),
                static_cast<unsigned long long>(plan.two_hop_bytes));
    std::printf("  plan fingerprint %016llx (agreed by all ranks)\n",
                static_cast<unsigned long long>(plan.fingerprint));
    std::printf("  forward bytes received (all ranks, incl. self): %llu\n", static_cast<unsigned long long>(sums[2]));
    std::printf("  verified %llu bytes forward and backward: %s\n", static_cast<unsigned long long>(sums[0]),
                sums[1] == 0 ? "all correct" : "MISMATCHES");
  }
  return sums[1] == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  // No options (mpiexec gives every rank the same arguments, so every rank leaves here alike).
  if (argc > 1) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const bool help = std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0;
    if (rank == 0)
      std::fprintf(help ? stdout : stderr,
                   "%susage: mpiexec -np R mpi_step (no options): one training step's data movement with mmbal over "
                   "MPI,\nevery byte checked (see the comment at the top of examples/mpi_step/main.cpp)\n",
                   help ? "" : "mpi_step: takes no arguments\n");
    MPI_Finalize();
    return help ? 0 : 2;
  }
  int status = 0;
  try {
    transport::mpi_transport t;
    status = run(t);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpi_step: %s\n", e.what());
    status = 1;
    MPI_Abort(MPI_COMM_WORLD, 1);  // a rank that failed alone must not leave the others waiting
  }
  MPI_Finalize();
  return status;
}
