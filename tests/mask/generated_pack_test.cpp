// Masks of the realistic long-context packs (docs/WORKLOADS.md (e)): per-token workloads equal
// the tool contract's formula (`token_workloads` of `mmbal mask`, docs/DESIGN.md §5.3), and the total area
// equals the reference generator's `mask_area`.
#include "mask_reference.hpp"

#include <mmbal/mask/mask.hpp>
#include <mmbal/workload/generators.hpp>
#include <mmbal/workload/length_data.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

using namespace mmbal;

namespace {

const length_data& data() {
  static const length_data d = load_length_data(MMBAL_DATA_DIR);
  return d;
}

// the reference generator (docs/WORKLOADS.md) mask_area: text attends every earlier token of its document and
// itself; a span attends itself (n²).
std::uint64_t reference_area(const workload& w) {
  std::uint64_t area = 0;
  for (const sample& s : w.samples) {
    std::uint64_t pos = 0;
    for (const segment& g : s.segments) {
      const std::uint64_t n = g.llm_tokens;
      area += g.modality == text_modality ? n * pos + n * (n + 1) / 2 : n * n;
      pos += n;
    }
  }
  return area;
}

}  // namespace

TEST_CASE("generated packs: token workloads follow the contract formula, area follows mask_area", "[mask]") {
  pack_options o;
  o.docs_per_refill = 2000;  // keeps the Debug/sanitizer run short; the sampler is unchanged otherwise
  const pack_layout layouts[] = {pack_layout::ep, pack_layout::ee, pack_layout::mp};
  for (pack_layout l : layouts)
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
      const workload w = generate_pack(l, 8192, seed, data(), o);
      INFO("layout " << static_cast<int>(l) << " seed " << seed);
      std::uint64_t tokens = 0;
      for (const sample& s : w.samples) tokens += s.llm_length();
      REQUIRE(tokens == 8192);
      for (bit_assignment m : {bit_assignment::span, bit_assignment::modality}) {
        const auto mask = build_bitfield_mask(std::span<const sample>(w.samples), m);
        REQUIRE(mask.size() == 8192);
        const auto tw = token_workloads(mask);
        REQUIRE(tw == mask_test::formula_workloads(w.samples, m == bit_assignment::span));
        if (m == bit_assignment::span) REQUIRE(total_area(mask) == reference_area(w));
        const auto bw = block_workloads(mask, 128);
        REQUIRE(bw == block_workloads(std::span<const std::uint32_t>(tw), 128));
      }
    }
}
