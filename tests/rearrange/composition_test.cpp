// Subsequence assembly and encoder -> LLM composition: executing Π_E and then the composed
// plan must give exactly what Π_M gives on samples assembled from their segments.
#include <mmbal/rearrange/alltoall_plan.hpp>
#include <mmbal/rearrange/composition.hpp>
#include <mmbal/rearrange/pack.hpp>
#include <mmbal/workload/sample.hpp>

#include <catch2/catch.hpp>

#include "rearrange_helpers.hpp"

#include <algorithm>
#include <numeric>
#include <vector>

using mmbal::location;
using mmbal::rank_t;
using mmbal::rearrangement;

namespace {

mmbal::workload random_workload(mmbal::rng_engine& g, std::uint32_t samples, rank_t d) {
  mmbal::workload w;
  w.intern_modality("image");
  w.intern_modality("audio");
  for (std::uint32_t i = 0; i < samples; ++i) {
    mmbal::sample s;
    s.id = i;
    s.rank = static_cast<rank_t>(mmbal::uniform_below(g, d));
    const auto k = 1 + mmbal::uniform_below(g, 6);
    for (std::uint64_t j = 0; j < k; ++j) {
      mmbal::segment seg;
      seg.modality = static_cast<mmbal::modality_id>(mmbal::uniform_below(g, 3));
      seg.llm_tokens = static_cast<mmbal::length_t>(mmbal::uniform_below(g, 40));  // zero allowed
      seg.encoder_len = seg.llm_tokens * 4;
      s.segments.push_back(seg);
    }
    w.samples.push_back(s);
  }
  return w;
}

std::vector<std::vector<std::byte>> run(const rearrangement& r, std::span<const std::uint64_t> sizes,
                                        const std::vector<std::vector<std::byte>>& in) {
  return mmbal::exchange_in_process<std::byte>(mmbal::make_alltoall_plans(r, sizes), in);
}

}  // namespace

TEST_CASE("assembly layout: samples in LLM slot order, segments in sequence order", "[rearrange][compose]") {
  mmbal::workload w;
  const auto img = w.intern_modality("image");
  // sample 0 (rank 0): text, img, text, img ; sample 1 (rank 1): img ; sample 2 (rank 0): text only
  w.samples = {
      {0, 0, {}, {{0, 5, 5}, {img, 3, 3}, {0, 2, 2}, {img, 4, 4}}}, {1, 1, {}, {{img, 7, 7}}}, {2, 0, {}, {{0, 9, 9}}}};
  const auto enc = mmbal::encoder_phase_items(w, img);  // items: (s0,seg1), (s0,seg3), (s1,seg0)
  REQUIRE(enc.size() == 3);
  // LLM: sample 1 -> rank 0 slot 0, sample 0 -> rank 0 slot 1, sample 2 -> rank 1 slot 0.
  const rearrangement llm{2, {{0, 0}, {1, 0}, {0, 1}}, {{0, 1}, {0, 0}, {1, 0}}};
  const auto lay = mmbal::assembly_layout(enc, llm);
  const std::vector<location> expect{{0, 1}, {0, 2}, {0, 0}};
  CHECK(lay.where == expect);
  CHECK(lay.bins == 2);
  // The same items listed in reverse (a sample's segments out of sequence order): the layout
  // follows the segment index, not the item order.
  mmbal::phase_items reversed = enc;
  for (auto* v : {&reversed.weights, &reversed.origin, &reversed.sample_of, &reversed.segment_of})
    std::reverse(v->begin(), v->end());
  const std::vector<location> expect_reversed{expect[2], expect[1], expect[0]};
  CHECK(mmbal::assembly_layout(reversed, llm).where == expect_reversed);
  // Samples in order but one sample's two segments swapped: only the segment index is out of
  // order (the in-order shortcut must not apply).
  mmbal::phase_items swapped = enc;
  for (auto* v : {&swapped.weights, &swapped.origin, &swapped.sample_of, &swapped.segment_of})
    std::swap((*v)[0], (*v)[1]);
  const std::vector<location> expect_swapped{expect[1], expect[0], expect[2]};
  CHECK(mmbal::assembly_layout(swapped, llm).where == expect_swapped);
}

// The layout against its definition, dealt out slot by slot: on every LLM rank, the samples in
// slot order, each sample's outputs in segment order (ties by item); the items in generated
// order (the in-order shortcut) and shuffled; samples without outputs, idle ranks.
TEST_CASE("assembly layout equals dealing the outputs out slot by slot", "[rearrange][compose]") {
  auto g = mmbal::make_rng(47);
  for (int t = 0; t < 40; ++t) {
    const rank_t d = 1 + static_cast<rank_t>(mmbal::uniform_below(g, 12));
    const auto samples = static_cast<std::uint32_t>(1 + mmbal::uniform_below(g, 80));
    const mmbal::workload w = random_workload(g, samples, d);
    const rearrangement llm = rearrange_test::random_rearrangement(g, samples, d, 0.3);
    mmbal::phase_items enc = mmbal::encoder_phase_items(w, *w.find_modality("image"));
    if (t % 2 == 1) {  // shuffled items: the sorting path
      std::vector<std::size_t> perm(enc.size());
      std::iota(perm.begin(), perm.end(), std::size_t{0});
      mmbal::shuffle(std::span<std::size_t>(perm), g);
      mmbal::phase_items s = enc;
      for (std::size_t k = 0; k < perm.size(); ++k) {
        s.weights[k] = enc.weights[perm[k]];
        s.origin[k] = enc.origin[perm[k]];
        s.sample_of[k] = enc.sample_of[perm[k]];
        s.segment_of[k] = enc.segment_of[perm[k]];
      }
      enc = std::move(s);
    }
    INFO("instance " << t << " d " << d << " samples " << samples << " outputs " << enc.size());
    std::vector<location> expect(enc.size());
    for (rank_t r = 0; r < d; ++r) {
      std::vector<std::pair<std::uint32_t, std::uint32_t>> slot_sample;  // (slot, sample) on r
      for (std::uint32_t s = 0; s < samples; ++s)
        if (llm.destination[s].rank == r) slot_sample.emplace_back(llm.destination[s].slot, s);
      std::sort(slot_sample.begin(), slot_sample.end());
      std::uint32_t next = 0;
      for (const auto& [slot, s] : slot_sample) {
        std::vector<std::pair<std::uint32_t, std::size_t>> outputs;  // (segment, item)
        for (std::size_t i = 0; i < enc.size(); ++i)
          if (enc.sample_of[i] == s) outputs.emplace_back(enc.segment_of[i], i);
        std::sort(outputs.begin(), outputs.end());
        for (const auto& o : outputs) expect[o.second] = location{r, next++};
      }
    }
    CHECK(mmbal::assembly_layout(enc, llm).where == expect);
  }
}

TEST_CASE("Π_E then composed == Π_M on assembled samples; two hops agree; backward restores", "[rearrange][compose]") {
  auto g = mmbal::make_rng(31);
  for (int t = 0; t < 25; ++t) {
    const auto d = static_cast<rank_t>(1 + mmbal::uniform_below(g, 8));
    const auto w = random_workload(g, static_cast<std::uint32_t>(mmbal::uniform_below(g, 60)), d);
    const auto llm_items = mmbal::llm_phase_items(w);
    const auto pi_m = rearrangement::from_origin(
        llm_items.origin,
        mmbal::assignment{d, rearrange_test::random_layout(g, static_cast<std::uint32_t>(llm_items.size()), d, 0.2)});
    for (mmbal::modality_id m = 1; m <= 2; ++m) {
      const auto enc = mmbal::encoder_phase_items(w, m);
      const auto n = static_cast<std::uint32_t>(enc.size());
      const auto pi_e =
          rearrangement::from_origin(enc.origin, mmbal::assignment{d, rearrange_test::random_layout(g, n, d, 0.3)});
      const auto plans = mmbal::compose_encoder_to_llm(enc, pi_e, pi_m);
      plans.composed.validate();

      std::vector<std::uint64_t> sizes(n);  // encoder output bytes: 2 per LLM token
      for (std::uint32_t i = 0; i < n; ++i)
        sizes[i] = 2ULL * w.samples[enc.sample_of[i]].segments[enc.segment_of[i]].llm_tokens;

      // Path A: origin -> encoder ranks (Π_E) -> LLM ranks (composed).
      const auto at_origin = rearrange_test::buffers_for(pi_e.source, d, sizes);
      const auto at_encoder = run(pi_e, sizes, at_origin);
      const auto a = run(plans.composed, sizes, at_encoder);

      // Path B: assemble each sample's outputs (segment order) at the origin, apply Π_M.
      std::vector<std::uint64_t> sample_bytes(llm_items.size(), 0);
      std::vector<std::vector<std::byte>> sample_payload(llm_items.size());
      for (std::uint32_t i = 0; i < n; ++i) {  // encoder items are in (sample, segment) order
        sample_bytes[enc.sample_of[i]] += sizes[i];
        for (std::uint64_t k = 0; k < sizes[i]; ++k)
          sample_payload[enc.sample_of[i]].push_back(rearrange_test::payload(i, k));
      }
      std::vector<std::vector<std::byte>> origin_samples(d);
      {
        const mmbal::detail::layout_index idx(pi_m.source, d);
        for (rank_t r = 0; r < d; ++r)
          for (std::uint32_t s = 0; s < idx.count(r); ++s) {
            const auto& p = sample_payload[idx.at({r, s})];
            origin_samples[r].insert(origin_samples[r].end(), p.begin(), p.end());
          }
      }
      const auto b = run(pi_m, sample_bytes, origin_samples);
      for (rank_t r = 0; r < d; ++r) CHECK(a[r] == b[r]);

      // Two-hop reference delivers the same and composes to the same plan.
      const auto hop1 = run(plans.back_to_origin, sizes, at_encoder);
      for (rank_t r = 0; r < d; ++r) CHECK(hop1[r] == at_origin[r]);
      const auto hop2 = run(plans.origin_to_llm, sizes, hop1);
      for (rank_t r = 0; r < d; ++r) CHECK(hop2[r] == a[r]);
      CHECK(mmbal::compose(plans.back_to_origin, plans.origin_to_llm) == plans.composed);
      CHECK(mmbal::compose(plans.composed, plans.composed.inverse()).is_identity());

      // Backward: gradients return to the encoder ranks.
      const auto back = run(plans.composed.inverse(), sizes, a);
      for (rank_t r = 0; r < d; ++r) CHECK(back[r] == at_encoder[r]);

      // Traffic: direct reference counts, and composition never moves more than two hops.
      const rank_t rpn = 1 + static_cast<rank_t>(mmbal::uniform_below(g, 4));
      const auto tr = mmbal::compare_composition(plans, sizes, rpn);
      std::uint64_t direct = 0, first = 0, second = 0, direct_inter = 0;
      for (std::uint32_t i = 0; i < n; ++i) {
        const rank_t e = pi_e.destination[i].rank, o = enc.origin[i];
        const rank_t l = pi_m.destination[enc.sample_of[i]].rank;
        if (e != l) direct += sizes[i];
        if (e / rpn != l / rpn) direct_inter += sizes[i];
        if (e != o) first += sizes[i];
        if (o != l) second += sizes[i];
      }
      CHECK(tr.composed.moved_bytes == direct);
      CHECK(tr.composed.inter_node_bytes == direct_inter);
      CHECK(tr.two_hop.moved_bytes == first + second);
      CHECK(tr.composed.moved_bytes <= tr.two_hop.moved_bytes);
      CHECK(tr.composed.inter_node_bytes <= tr.two_hop.inter_node_bytes);
    }
  }
}

TEST_CASE("compose_encoder_to_llm rejects inconsistent inputs", "[rearrange][compose]") {
  mmbal::workload w;
  const auto img = w.intern_modality("image");
  w.samples = {{0, 0, {}, {{img, 3, 3}}}, {1, 1, {}, {{img, 2, 2}}}};
  const auto enc = mmbal::encoder_phase_items(w, img);
  const rearrangement pi_m{2, {{0, 0}, {1, 0}}, {{1, 0}, {0, 0}}};
  const rearrangement wrong_origin{2, {{1, 0}, {0, 0}}, {{0, 0}, {1, 0}}};
  CHECK_THROWS_WITH(mmbal::compose_encoder_to_llm(enc, wrong_origin, pi_m),
                    Catch::Contains("compose_to_llm: encoder item 0"));
  const rearrangement three{3, {{0, 0}, {1, 0}}, {{0, 0}, {1, 0}}};
  CHECK_THROWS_WITH(mmbal::compose_encoder_to_llm(enc, three, pi_m),
                    Catch::Contains("compose_to_llm: encoder plan has 3 ranks"));
  const rearrangement one_sample{2, {{0, 0}}, {{0, 0}}};
  CHECK_THROWS_WITH(mmbal::assembly_layout(enc, one_sample), Catch::Contains("sample 1"));

  // plan_validation::trusted skips only the validation; checked rejects what trusted lets through.
  const rearrangement pi_e{2, {{0, 0}, {1, 0}}, {{1, 0}, {0, 0}}};
  // Consistent plans: both modes give the same plan (composed = Π_M ∘ Π_E⁻¹).
  rearrangement trusted;
  mmbal::compose_to_llm(enc, pi_e, pi_m, mmbal::plan_validation::trusted, trusted);
  CHECK(trusted == mmbal::compose_to_llm(enc, pi_e, pi_m));
  CHECK(trusted.source == pi_e.destination);
  // Π_M sends sample 0 to rank 1 and sample 1 to rank 0, each alone: so do their images.
  CHECK(trusted.destination == std::vector<location>{{1, 0}, {0, 0}});
  // A segment that does not start on its sample's origin: only the checked mode notices.
  rearrangement out;
  CHECK_NOTHROW(mmbal::compose_to_llm(enc, wrong_origin, pi_m, mmbal::plan_validation::trusted, out));
  CHECK_THROWS_AS(mmbal::compose_to_llm(enc, wrong_origin, pi_m, mmbal::plan_validation::checked, out),
                  mmbal::invalid_input);
  // Shape mismatches are rejected in both modes.
  CHECK_THROWS_WITH(mmbal::compose_to_llm(enc, three, pi_m, mmbal::plan_validation::trusted, out),
                    Catch::Contains("compose_to_llm: encoder plan has 3 ranks"));
}

TEST_CASE("move_traffic and rearrangement_traffic count node crossings against a division reference",
          "[rearrange][compose]") {
  auto g = mmbal::make_rng(140);
  for (int t = 0; t < 200; ++t) {
    const auto d = static_cast<rank_t>(1 + mmbal::uniform_below(g, 40));
    const auto c = static_cast<rank_t>(mmbal::uniform_below(g, 10));  // 0 = one node
    const std::size_t n = mmbal::uniform_below(g, 60);
    std::vector<location> from(n), to(n);
    std::vector<std::uint64_t> bytes(n);
    mmbal::traffic expect;
    for (std::size_t i = 0; i < n; ++i) {
      from[i] = {static_cast<rank_t>(mmbal::uniform_below(g, d)), 0};
      to[i] = {static_cast<rank_t>(mmbal::uniform_below(g, d)), 0};
      bytes[i] = mmbal::uniform_below(g, 100);
      if (from[i].rank == to[i].rank) continue;
      ++expect.moved_items;
      expect.moved_bytes += bytes[i];
      if (c > 0 && from[i].rank / c != to[i].rank / c) expect.inter_node_bytes += bytes[i];
    }
    const auto same = [](const mmbal::traffic& a, const mmbal::traffic& b) {
      return a.moved_items == b.moved_items && a.moved_bytes == b.moved_bytes &&
             a.inter_node_bytes == b.inter_node_bytes;
    };
    CHECK(same(mmbal::move_traffic(from, to, bytes, c), expect));
    // rearrangement_traffic's table covers `ranks`; ranks beyond it (an unvalidated plan) still count.
    const rearrangement r{d / 2 + 1, from, to};
    CHECK(same(mmbal::rearrangement_traffic(r, bytes, c), expect));
  }
  // Ranks far beyond any table.
  const std::vector<location> from{{4'000'000'000u, 0}}, to{{7, 0}};
  const std::vector<std::uint64_t> bytes{5};
  CHECK(mmbal::move_traffic(from, to, bytes, 8).inter_node_bytes == 5);
  CHECK(mmbal::move_traffic(from, to, bytes, 4'000'000'000u).inter_node_bytes == 5);
  CHECK_THROWS_WITH(mmbal::move_traffic(from, to, std::vector<std::uint64_t>{}, 8),
                    Catch::Contains("move_traffic") && Catch::Contains("0 item_bytes"));
  // Byte totals beyond 2^64 - 1 are refused, not wrapped: in one count, and in the sum of the
  // composition's two hops (each hop alone fits).
  const std::uint64_t half = std::uint64_t{1} << 63;
  const std::vector<location> a{{0, 0}, {0, 0}}, b{{1, 0}, {1, 0}};
  CHECK_THROWS_WITH(mmbal::move_traffic(a, b, std::vector<std::uint64_t>{half, half}, 0),
                    Catch::Contains("moved bytes exceeds 2^64 - 1"));
  const rearrangement composed{2, std::vector<location>{{0, 0}}, std::vector<location>{{1, 0}}};
  CHECK(mmbal::compare_composition(composed, std::vector<location>{{0, 0}}, std::vector<std::uint64_t>{half}, 0)
            .two_hop.moved_bytes == half);  // home = source: one hop moves, the other does not
  const std::vector<location> third{{2, 0}};
  const rearrangement wide{3, composed.source, composed.destination};
  CHECK_THROWS_WITH(mmbal::compare_composition(wide, third, std::vector<std::uint64_t>{half}, 0),
                    Catch::Contains("two hops' bytes exceeds 2^64 - 1"));
}
