// Tests of the multi-phase orchestrator (docs/DESIGN.md §5.5): every property is recomputed here
// from the workload and the returned rearrangements with simple reference code.
#include "orchestrate/support.hpp"

using namespace orchestrate_test;

TEST_CASE("orchestrator: every phase is valid and its report matches the plan", "[orchestrate]") {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    for (const auto& [d, c] : std::vector<std::pair<mmbal::rank_t, mmbal::rank_t>>{{8, 4}, {12, 4}, {16, 8}, {10, 3}}) {
      const std::uint64_t bpt = 1 + seed % 3;
      const auto w = omni(d * 12, d, seed * 7 + d);
      const auto o = make(d, c, bpt).plan(w);
      INFO("seed " << seed << " d " << d << " c " << c);
      REQUIRE(o.ranks == d);
      REQUIRE(o.samples == w.samples.size());
      REQUIRE(o.phases.back().name == "llm");
      REQUIRE(o.phases.size() == orchestrator::phase_names(w).size());
      REQUIRE(o.composed.size() + 1 == o.phases.size());
      for (const auto& p : o.phases) check_phase(w, o, p, bpt);
    }
  }
}

TEST_CASE("orchestrator: phases are llm plus every modality present, with OrchMLLM's default policies",
          "[orchestrate]") {
  mmbal::workload w;
  const auto image = w.intern_modality("image");
  w.intern_modality("video");  // named but without segments: no phase
  const auto audio = w.intern_modality("audio");
  for (std::uint32_t i = 0; i < 12; ++i) {
    mmbal::sample s;
    s.id = i;
    s.rank = i % 4;
    s.segments.push_back({mmbal::text_modality, 10 + i, 10 + i});
    if (i % 2 == 0) s.segments.push_back({image, 100 + 7 * i, 400 + 28 * i});
    if (i % 3 == 0) s.segments.push_back({audio, 50 + i, 100 + 2 * i});
    w.samples.push_back(s);
  }
  const auto names = orchestrator::phase_names(w);
  REQUIRE(names == std::vector<std::string>{"image", "audio", "llm"});
  const auto o = make(4, 2).plan(w);
  REQUIRE(o.phase("image").report.cost == "tokens");
  REQUIRE(o.phase("image").report.algorithm == "lpt+refine");
  REQUIRE(o.phase("audio").report.cost == "padded");
  REQUIRE(o.phase("audio").report.algorithm == "padded");
  REQUIRE(o.phase("llm").report.cost.rfind("attention:", 0) == 0);
  REQUIRE(o.phase("llm").report.algorithm == "lpt+refine");
  REQUIRE(o.phase("image").report.items == 6);
  REQUIRE(o.phase("audio").report.items == 4);
  REQUIRE(o.phase("llm").report.items == 12);
  REQUIRE_THROWS_AS(o.phase("video"), mmbal::invalid_input);
  for (const auto& p : o.phases) check_phase(w, o, p, 1);
}

TEST_CASE("orchestrator: composed plans deliver every encoder output to its LLM rank in segment order",
          "[orchestrate]") {
  for (std::uint64_t seed = 11; seed <= 13; ++seed) {
    const mmbal::rank_t d = 8 + static_cast<mmbal::rank_t>(seed % 3) * 2, c = 4;
    const std::uint64_t bpt = 2;
    const auto w = omni(d * 10, d, seed);
    const auto o = make(d, c, bpt).plan(w);
    const phase_plan& llm = o.llm();
    std::uint64_t composed_total = 0, two_hop_total = 0;
    for (std::size_t k = 0; k < o.composed.size(); ++k) {
      const auto& cp = o.composed[k];
      const phase_plan& enc = o.phases[k];
      INFO("seed " << seed << " modality " << cp.modality);
      REQUIRE(cp.modality == enc.name);
      const auto& composed = cp.composed;
      REQUIRE_NOTHROW(composed.validate());
      // It starts where the encoder phase left the outputs.
      REQUIRE(composed.source == enc.forward.destination);
      // Simulated buffers: on every encoder rank, the outputs in encoder slot order.
      std::vector<std::vector<std::byte>> inputs(d);
      {
        std::vector<std::vector<std::size_t>> by_slot(d);
        for (std::size_t i = 0; i < enc.items.size(); ++i) {
          const auto l = enc.forward.destination[i];
          if (by_slot[l.rank].size() <= l.slot) by_slot[l.rank].resize(l.slot + 1);
          by_slot[l.rank][l.slot] = i;
        }
        for (mmbal::rank_t r = 0; r < d; ++r)
          for (std::size_t i : by_slot[r]) {
            const auto s = enc.items.sample_of[i], g = enc.items.segment_of[i];
            const std::uint64_t len = std::uint64_t{w.samples[s].segments[g].llm_tokens} * bpt;
            REQUIRE(cp.item_bytes[i] == len);
            for (std::uint64_t b = 0; b < len; ++b) inputs[r].push_back(payload(s, g, b));
          }
      }
      const auto plans = mmbal::make_alltoall_plans(composed, cp.item_bytes);
      const auto outputs = mmbal::exchange_in_process<std::byte>(plans, inputs);
      // Expected on LLM rank r: the samples Π_M puts there in slot order, each with its
      // segments of this modality in segment order.
      std::vector<std::vector<std::size_t>> samples_on(d);
      for (std::size_t s = 0; s < w.samples.size(); ++s) {
        const auto l = llm.forward.destination[s];
        if (samples_on[l.rank].size() <= l.slot) samples_on[l.rank].resize(l.slot + 1);
        samples_on[l.rank][l.slot] = s;
      }
      for (mmbal::rank_t r = 0; r < d; ++r) {
        std::vector<std::byte> expected;
        for (std::size_t s : samples_on[r])
          for (std::size_t g = 0; g < w.samples[s].segments.size(); ++g) {
            const auto& seg = w.samples[s].segments[g];
            if (w.modalities[seg.modality] != cp.modality) continue;
            for (std::uint64_t b = 0; b < std::uint64_t{seg.llm_tokens} * bpt; ++b)
              expected.push_back(payload(s, g, b));
          }
        REQUIRE(outputs[r] == expected);
      }
      // The backward plan returns every output to its encoder rank.
      const auto back =
          mmbal::exchange_in_process<std::byte>(mmbal::make_alltoall_plans(composed.inverse(), cp.item_bytes), outputs);
      REQUIRE(back == inputs);
      // Traffic: composed ≤ two hops, both recomputed here.
      std::uint64_t one = 0, two = 0;
      for (std::size_t i = 0; i < enc.items.size(); ++i) {
        const auto e = enc.forward.destination[i].rank, org = enc.items.origin[i];
        const auto m = llm.forward.destination[enc.items.sample_of[i]].rank;
        if (e != m) one += cp.item_bytes[i];
        if (e != org) two += cp.item_bytes[i];
        if (org != m) two += cp.item_bytes[i];
      }
      REQUIRE(cp.traffic.composed.moved_bytes == one);
      REQUIRE(cp.traffic.two_hop.moved_bytes == two);
      REQUIRE(one <= two);
      composed_total += one;
      two_hop_total += two;
    }
    REQUIRE(o.composed_bytes == composed_total);
    REQUIRE(o.two_hop_bytes == two_hop_total);
    REQUIRE(o.composed_bytes <= o.two_hop_bytes);
  }
}

TEST_CASE("orchestrator: relabeling keeps the loads and never raises the inter-node maximum", "[orchestrate]") {
  for (std::uint64_t seed = 21; seed <= 24; ++seed) {
    const mmbal::rank_t d = 16, c = 4;
    const auto w = omni(d * 8, d, seed);
    const auto with = make(d, c, 1, true).plan(w);
    const auto without = make(d, c, 1, false).plan(w);
    REQUIRE(with.phases.size() == without.phases.size());
    for (std::size_t k = 0; k < with.phases.size(); ++k) {
      const auto& a = with.phases[k];
      const auto& b = without.phases[k];
      INFO("phase " << a.name);
      REQUIRE(b.relabel.is_identity());
      REQUIRE(b.report.inter_node_max_relabeled == b.report.inter_node_max_identity);
      REQUIRE(a.report.inter_node_max_identity == b.report.inter_node_max_identity);
      REQUIRE(a.report.inter_node_max_relabeled <= b.report.inter_node_max_relabeled);
      // Same batches, permuted over ranks: the sorted loads agree, the maximum is the same.
      auto la = a.report.loads_after, lb = b.report.loads_after;
      std::sort(la.begin(), la.end());
      std::sort(lb.begin(), lb.end());
      REQUIRE(la == lb);
      REQUIRE(a.report.max_after == b.report.max_after);
      // σ maps batch j to its rank: item i's rank is σ(balanced rank).
      for (std::size_t i = 0; i < a.forward.size(); ++i)
        REQUIRE(a.forward.destination[i].rank == a.relabel.rank_of_batch[a.balanced.where[i].rank]);
    }
  }
}

TEST_CASE("orchestrator: the composed plan and its traffic equal compose_encoder_to_llm's", "[orchestrate]") {
  const mmbal::rank_t d = 12, c = 4;
  const auto w = omni(d * 10, d, 9);
  const auto o = make(d, c, 3).plan(w);
  for (std::size_t k = 0; k < o.composed.size(); ++k) {
    const auto& e = o.phases[k];
    const auto reference = mmbal::compose_encoder_to_llm(e.items, e.forward, o.llm().forward);
    REQUIRE(o.composed[k].composed == reference.composed);
    const auto t = mmbal::compare_composition(reference, o.composed[k].item_bytes, c);
    REQUIRE(o.composed[k].traffic.composed.moved_bytes == t.composed.moved_bytes);
    REQUIRE(o.composed[k].traffic.two_hop.moved_items == t.two_hop.moved_items);
    REQUIRE(o.composed[k].traffic.two_hop.moved_bytes == t.two_hop.moved_bytes);
    REQUIRE(o.composed[k].traffic.two_hop.inter_node_bytes == t.two_hop.inter_node_bytes);
  }
}

TEST_CASE("orchestrator: traffic and fingerprints counted in one pass equal the standalone functions",
          "[orchestrate]") {
  for (const mmbal::rank_t c : {0u, 3u, 4u}) {
    const mmbal::rank_t d = 12;
    const auto w = omni(d * 10, d, 17 + c);
    const auto o = make(d, c, 5).plan(w);
    INFO("ranks per node " << c);
    for (const auto& p : o.phases) {
      INFO("phase " << p.name);
      REQUIRE(p.fingerprint == mmbal::fingerprint(p.forward, p.item_bytes));
      const auto t = mmbal::rearrangement_traffic(p.forward, p.item_bytes, c);
      REQUIRE(p.report.moved_items == t.moved_items);
      REQUIRE(p.report.moved_bytes == t.moved_bytes);
      REQUIRE(p.report.inter_node_bytes == t.inter_node_bytes);
    }
    for (const auto& k : o.composed) {
      REQUIRE(k.fingerprint == mmbal::fingerprint(k.composed, k.item_bytes));
      REQUIRE(k.traffic.composed.moved_items == mmbal::rearrangement_traffic(k.composed, k.item_bytes, c).moved_items);
    }
  }
}

TEST_CASE("orchestrator: the fingerprint is reproducible and tracks plans and policies", "[orchestrate]") {
  const mmbal::rank_t d = 12, c = 4;
  const auto w = omni(d * 10, d, 5);
  const auto a = make(d, c).plan(w);
  const auto b = make(d, c).plan(w);
  REQUIRE(a.fingerprint == b.fingerprint);
  REQUIRE(a.fingerprint == orchestrator::plan_fingerprint(a));
  for (std::size_t k = 0; k < a.phases.size(); ++k) REQUIRE(a.phases[k].forward == b.phases[k].forward);

  auto changed_llm = make(d, c);
  changed_llm.set_policy("llm", mmbal::spec::policy_from_specs("llm", "tokens", "greedy-ascending"));
  REQUIRE(changed_llm.plan(w).fingerprint != a.fingerprint);
  auto changed_image = make(d, c);
  changed_image.set_policy("image", mmbal::spec::policy_from_specs("image", "attention:alpha=1,beta=0.001", ""));
  REQUIRE(changed_image.plan(w).fingerprint != a.fingerprint);
  REQUIRE(make(d, c, 3).plan(w).fingerprint != a.fingerprint);  // sizes change
  auto moved = w;
  moved.samples[0].rank = (moved.samples[0].rank + 1) % d;  // one origin changes
  REQUIRE(make(d, c).plan(moved).fingerprint != a.fingerprint);
}

TEST_CASE("orchestrator: edge cases (one rank, one node, no media, no samples)", "[orchestrate]") {
  const auto w = omni(40, 1, 3);
  const auto one = make(1, 1).plan(w);
  for (const auto& p : one.phases) {
    REQUIRE(p.report.moved_bytes == 0);
    REQUIRE(p.report.max_after == Approx(p.report.max_before).epsilon(1e-12));
    for (const auto& l : p.forward.destination) REQUIRE(l.rank == 0);
  }
  REQUIRE(one.composed_bytes == 0);

  const auto w8 = omni(64, 8, 4);
  const auto single_node = make(8, 0).plan(w8);
  for (const auto& p : single_node.phases) {
    REQUIRE(p.report.inter_node_bytes == 0);
    REQUIRE(p.report.inter_node_max_identity == 0);
    check_phase(w8, single_node, p, 1);
  }

  mmbal::workload text;
  for (std::uint32_t i = 0; i < 9; ++i) {
    mmbal::sample s;
    s.id = i;
    s.rank = 0;  // all on rank 0: balancing must spread them
    s.segments.push_back({mmbal::text_modality, 100 * (i + 1), 100 * (i + 1)});
    text.samples.push_back(s);
  }
  const auto t = make(3, 1).plan(text);
  REQUIRE(t.phases.size() == 1);
  REQUIRE(t.composed.empty());
  REQUIRE(t.composed_bytes == 0);
  check_phase(text, t, t.llm(), 1);
  REQUIRE(t.llm().report.max_after < t.llm().report.max_before);

  const auto none = make(4, 2).plan(mmbal::workload{});
  REQUIRE(none.phases.size() == 1);
  REQUIRE(none.llm().report.items == 0);
  REQUIRE(none.llm().report.max_after == 0);
}

TEST_CASE("orchestrator: bad configuration and input are rejected with a clear error", "[orchestrate]") {
  REQUIRE_THROWS_WITH(make(0, 1), Catch::Contains("ranks = 0"));
  REQUIRE_THROWS_WITH(make(mmbal::max_ranks + 1, 1), Catch::Contains("ranks = 16777217 exceeds 16777216"));
  REQUIRE_THROWS_WITH(make(4, 2, 0), Catch::Contains("bytes_per_token = 0"));
  auto o = make(4, 2);
  REQUIRE_THROWS_WITH(o.set_policy("text", {}), Catch::Contains("'text'"));
  REQUIRE_THROWS_WITH(o.set_policy("", {}), Catch::Contains("empty phase"));
  phase_policy nan_cap;
  nan_cap.capacity = std::nan("");
  REQUIRE_THROWS_WITH(o.set_policy("llm", nan_cap), Catch::Contains("capacity"));
  REQUIRE_THROWS_WITH(mmbal::spec::policy_from_specs("audio", "nonsense", ""),
                      Catch::Contains("audio") && Catch::Contains("nonsense"));
  REQUIRE_THROWS_WITH(mmbal::spec::policy_from_specs("image", "", "lpt+shuffle"),
                      Catch::Contains("image") && Catch::Contains("shuffle"));

  auto w = omni(40, 4, 9);
  w.samples[7].rank = 4;  // rank out of range
  REQUIRE_THROWS_WITH(o.plan(w), Catch::Contains("rank 4") && Catch::Contains(">= ranks 4"));

  // An infeasible constraint: at most 1 sample per rank with 40 samples on 4 ranks.
  const auto ok = omni(40, 4, 9);
  phase_policy capped;
  capped.counts = {mmbal::balance::count_cap::mode::fixed, 1};
  auto o2 = make(4, 2);
  o2.set_policy("llm", capped);
  REQUIRE_THROWS_WITH(o2.plan(ok), Catch::Contains("phase 'llm'"));
  // Policies for phases the workload does not have are ignored.
  auto o3 = make(4, 2);
  o3.set_policy("speech", {});
  REQUIRE_NOTHROW(o3.plan(ok));
}
