// The bitfield attention mask against a dense reference written from the attention
// semantics, on random small sequences in the EP, EE and MP layouts and both bit modes.
#include "mask_reference.hpp"

#include <mmbal/mask/mask.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

using namespace mmbal;
using mask_test::layout;

namespace {

const layout all_layouts[] = {layout::ep, layout::ee, layout::mp};
const bit_assignment all_modes[] = {bit_assignment::span, bit_assignment::modality};

struct instance {
  std::vector<sample> samples;
  bitfield_mask mask;
  std::vector<std::uint8_t> reference;  // dense, from the semantics
};

instance make_instance(std::uint64_t seed, layout l, bit_assignment mode) {
  rng_engine g = make_rng(seed, static_cast<std::uint64_t>(l), static_cast<std::uint64_t>(mode));
  instance x;
  x.samples = mask_test::random_documents(g, l);
  const bool prefixed = l == layout::ep;
  x.mask = build_bitfield_mask(std::span<const sample>(x.samples), mode,
                               prefixed ? span_layout::prefixed : span_layout::embedded);
  x.reference = mask_test::reference_dense(mask_test::tokens_of(x.samples, prefixed), mode == bit_assignment::span);
  return x;
}

std::string label(std::uint64_t seed, layout l, bit_assignment m) {
  return "seed " + std::to_string(seed) + " layout " + std::to_string(static_cast<int>(l)) + " mode " +
         std::to_string(static_cast<int>(m));
}

}  // namespace

TEST_CASE("predicate and dense mask equal the semantic reference", "[mask]") {
  for (std::uint64_t seed = 0; seed < 60; ++seed)
    for (layout l : all_layouts)
      for (bit_assignment m : all_modes) {
        INFO(label(seed, l, m));
        const instance x = make_instance(seed, l, m);
        const std::uint32_t t = x.mask.size();
        REQUIRE(x.reference.size() == std::size_t{t} * t);
        const auto dense = dense_mask(x.mask);
        REQUIRE(dense == x.reference);
        bool same = true;
        for (std::uint32_t q = 0; q < t; ++q)
          for (std::uint32_t k = 0; k < t; ++k) same = same && (x.mask.attends(q, k) == (x.reference[q * t + k] != 0));
        REQUIRE(same);
      }
}

TEST_CASE("bit patterns follow docs/DESIGN.md §5.3", "[mask]") {
  for (std::uint64_t seed = 0; seed < 30; ++seed)
    for (layout l : all_layouts)
      for (bit_assignment m : all_modes) {
        INFO(label(seed, l, m));
        const instance x = make_instance(seed, l, m);
        const auto tokens = mask_test::tokens_of(x.samples, l == layout::ep);
        REQUIRE(tokens.size() == x.mask.size());
        // the union of modality bits per document, from the span tokens
        std::vector<std::uint64_t> doc_bits(x.samples.size(), 0);
        for (std::size_t t = 0; t < tokens.size(); ++t)
          if (!tokens[t].text) doc_bits[tokens[t].doc] |= x.mask.bits()[t];
        for (std::size_t t = 0; t < tokens.size(); ++t) {
          const std::uint64_t b = x.mask.bits()[t];
          CHECK(x.mask.documents()[t] == tokens[t].doc);
          CHECK((b & reserved_bit) == 0);
          if (tokens[t].text) {
            CHECK(b == (text_bit | causal_bit | doc_bits[tokens[t].doc]));
          } else {
            CHECK(std::popcount(b) == 1);
            CHECK((b & modality_bits_mask) == b);
          }
        }
      }
}

TEST_CASE("per-token, per-block workloads and total area equal the dense mask's sums", "[mask]") {
  const std::uint32_t blocks[] = {1, 3, 7, 16, 128, 1000};
  for (std::uint64_t seed = 0; seed < 60; ++seed)
    for (layout l : all_layouts)
      for (bit_assignment m : all_modes) {
        INFO(label(seed, l, m));
        const instance x = make_instance(seed, l, m);
        const std::uint32_t t = x.mask.size();
        std::vector<std::uint32_t> rows(t, 0);
        std::uint64_t area = 0;
        for (std::uint32_t q = 0; q < t; ++q)
          for (std::uint32_t k = 0; k < t; ++k) rows[q] += x.reference[q * t + k];
        for (auto r : rows) area += r;
        REQUIRE(token_workloads(x.mask) == rows);
        REQUIRE(total_area(x.mask) == area);
        for (std::uint32_t b : blocks) {
          std::vector<std::uint64_t> expect((t + b - 1) / b, 0);
          for (std::uint32_t q = 0; q < t; ++q) expect[q / b] += rows[q];
          REQUIRE(block_workloads(x.mask, b) == expect);
          REQUIRE(block_workloads(std::span<const std::uint32_t>(rows), b) == expect);
        }
      }
}

TEST_CASE("workloads equal the contract formula (text p + 1, span length or modality total)", "[mask]") {
  for (std::uint64_t seed = 0; seed < 100; ++seed)
    for (bit_assignment m : all_modes) {
      rng_engine g = make_rng(seed, 77);
      const auto samples = mask_test::random_documents(g, layout::mp);
      const auto mask = build_bitfield_mask(std::span<const sample>(samples), m);
      REQUIRE(token_workloads(mask) == mask_test::formula_workloads(samples, m == bit_assignment::span));
    }
}

TEST_CASE("non-empty tile counts equal a direct count on the dense mask", "[mask]") {
  const tile_shape shapes[] = {{128, 32}, {4, 3}, {5, 7}, {1, 1}, {16, 64}};
  const std::uint32_t blocks[] = {8, 13, 128};
  for (std::uint64_t seed = 0; seed < 40; ++seed)
    for (layout l : all_layouts)
      for (bit_assignment m : all_modes) {
        INFO(label(seed, l, m));
        const instance x = make_instance(seed, l, m);
        const std::uint64_t t = x.mask.size();
        for (tile_shape s : shapes)
          for (std::uint32_t b : blocks) {
            std::vector<std::uint64_t> expect((t + b - 1) / b, 0);
            for (std::uint64_t blk = 0; blk < expect.size(); ++blk) {
              const std::uint64_t end = std::min(t, (blk + 1) * b);
              for (std::uint64_t q0 = blk * b; q0 < end; q0 += s.rows)
                for (std::uint64_t k0 = 0; k0 < t; k0 += s.cols) {
                  bool any = false;
                  for (std::uint64_t q = q0; q < std::min(end, q0 + s.rows); ++q)
                    for (std::uint64_t k = k0; k < std::min(t, k0 + s.cols); ++k) any = any || x.reference[q * t + k];
                  expect[blk] += any ? 1 : 0;
                }
            }
            INFO("tile " << s.rows << "x" << s.cols << " block " << b);
            REQUIRE(block_tile_counts(x.mask, b, s) == expect);
          }
      }
}

TEST_CASE("FlexAttention block mask classifies every block pair like the dense mask", "[mask]") {
  const std::pair<std::uint32_t, std::uint32_t> sizes[] = {{128, 128}, {4, 4}, {3, 5}, {8, 2}, {1, 1}};
  for (std::uint64_t seed = 0; seed < 40; ++seed)
    for (layout l : all_layouts)
      for (bit_assignment m : all_modes) {
        INFO(label(seed, l, m));
        const instance x = make_instance(seed, l, m);
        const std::uint64_t t = x.mask.size();
        for (auto [qs, ks] : sizes) {
          INFO("blocks " << qs << "x" << ks);
          const block_mask bm = make_block_mask(x.mask, qs, ks);
          REQUIRE(bm.num_q_blocks == (t + qs - 1) / qs);
          REQUIRE(bm.num_kv_blocks == (t + ks - 1) / ks);
          REQUIRE(bm.kv_indices.size() == std::size_t{bm.num_q_blocks} * bm.num_kv_blocks);
          for (std::uint32_t qb = 0; qb < bm.num_q_blocks; ++qb) {
            std::vector<std::uint32_t> partial, full;
            for (std::uint32_t kb = 0; kb < bm.num_kv_blocks; ++kb) {
              std::uint64_t on = 0, cells = 0;
              for (std::uint64_t q = qb * std::uint64_t{qs}; q < std::min(t, (qb + 1) * std::uint64_t{qs}); ++q)
                for (std::uint64_t k = kb * std::uint64_t{ks}; k < std::min(t, (kb + 1) * std::uint64_t{ks}); ++k) {
                  on += x.reference[q * t + k];
                  ++cells;
                }
              if (on == cells)
                full.push_back(kb);
              else if (on > 0)
                partial.push_back(kb);
              const block_kind expect = on == 0       ? block_kind::empty
                                        : on == cells ? block_kind::full
                                                      : block_kind::partial;
              REQUIRE(bm.kind(qb, kb) == expect);
            }
            const std::size_t row = std::size_t{qb} * bm.num_kv_blocks;
            REQUIRE(bm.kv_num_blocks[qb] == partial.size());
            REQUIRE(bm.full_kv_num_blocks[qb] == full.size());
            REQUIRE(
                std::equal(partial.begin(), partial.end(), bm.kv_indices.begin() + static_cast<std::ptrdiff_t>(row)));
            REQUIRE(
                std::equal(full.begin(), full.end(), bm.full_kv_indices.begin() + static_cast<std::ptrdiff_t>(row)));
          }
          // the transposed lists (backward pass): per key block, the query blocks by kind
          for (std::uint32_t kb = 0; kb < bm.num_kv_blocks; ++kb) {
            std::vector<std::uint32_t> partial, full;
            for (std::uint32_t qb = 0; qb < bm.num_q_blocks; ++qb) {
              const block_kind k = bm.kind(qb, kb);
              if (k == block_kind::partial) partial.push_back(qb);
              if (k == block_kind::full) full.push_back(qb);
            }
            const auto row = static_cast<std::ptrdiff_t>(std::size_t{kb} * bm.num_q_blocks);
            REQUIRE(bm.q_num_blocks[kb] == partial.size());
            REQUIRE(bm.full_q_num_blocks[kb] == full.size());
            REQUIRE(std::equal(partial.begin(), partial.end(), bm.q_indices.begin() + row));
            REQUIRE(std::equal(full.begin(), full.end(), bm.full_q_indices.begin() + row));
          }
        }
      }
}

TEST_CASE("dense tiles are windows of the dense mask, zero past T", "[mask]") {
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    const instance x = make_instance(seed, layout::mp, bit_assignment::span);
    const std::uint64_t t = x.mask.size();
    rng_engine g = make_rng(seed, 99);
    for (int rep = 0; rep < 10; ++rep) {
      const std::uint64_t q0 = mmbal::uniform_below(g, t + 5), k0 = mmbal::uniform_below(g, t + 5);
      const auto rows = static_cast<std::uint32_t>(mmbal::uniform_int(g, 1, 40));
      const auto cols = static_cast<std::uint32_t>(mmbal::uniform_int(g, 1, 40));
      const auto tile = dense_tile(x.mask, q0, rows, k0, cols);
      REQUIRE(tile.size() == std::size_t{rows} * cols);
      for (std::uint64_t i = 0; i < rows; ++i)
        for (std::uint64_t j = 0; j < cols; ++j) {
          const std::uint8_t expect = (q0 + i < t && k0 + j < t) ? x.reference[(q0 + i) * t + k0 + j] : 0;
          REQUIRE(tile[i * cols + j] == expect);
        }
    }
  }
}

TEST_CASE("general bit patterns: workloads, tiles and block masks agree with the predicate", "[mask]") {
  // Patterns the builders never make (text tokens with only some modality bits, multi-bit
  // modality tokens, text without the causal bit): the run-based algorithms must still agree
  // with the rule applied pair by pair.
  for (std::uint64_t seed = 0; seed < 80; ++seed) {
    rng_engine g = make_rng(seed, 1234);
    const auto t = static_cast<std::uint32_t>(mmbal::uniform_int(g, 0, 90));
    std::vector<std::uint64_t> bits(t);
    std::vector<std::uint32_t> docs(t);
    std::uint32_t doc = 0;
    for (std::uint32_t i = 0; i < t; ++i) {
      if (mmbal::uniform_below(g, 12) == 0) doc += static_cast<std::uint32_t>(mmbal::uniform_int(g, 1, 3));
      docs[i] = doc;
      std::uint64_t b;
      do {
        b = mmbal::uniform_below(g, 16);  // bits 0..3
        if (mmbal::uniform_below(g, 2) == 0) b |= causal_bit;
      } while ((b & ~control_bits) == 0);
      // runs of equal patterns, as real masks have
      bits[i] = (i > 0 && mmbal::uniform_below(g, 3) != 0 && docs[i] == docs[i - 1]) ? bits[i - 1] : b;
    }
    const bitfield_mask mask(bits, docs);
    std::vector<std::uint32_t> rows(t, 0);
    for (std::uint32_t q = 0; q < t; ++q)
      for (std::uint32_t k = 0; k < t; ++k)
        rows[q] += bitfield_attends(q, k, bits[q], bits[k], docs[q], docs[k]) ? 1 : 0;
    REQUIRE(token_workloads(mask) == rows);
    const auto dense = t > 0 ? dense_mask(mask) : std::vector<std::uint8_t>{};
    for (std::uint32_t q = 0; q < t; ++q) {
      std::uint32_t s = 0;
      for (std::uint32_t k = 0; k < t; ++k) s += dense[std::size_t{q} * t + k];
      REQUIRE(s == rows[q]);
    }
    const block_mask bm = make_block_mask(mask, 6, 4);
    for (std::uint32_t qb = 0; qb < bm.num_q_blocks; ++qb)
      for (std::uint32_t kb = 0; kb < bm.num_kv_blocks; ++kb) {
        std::uint32_t on = 0, cells = 0;
        for (std::uint32_t q = qb * 6; q < std::min(t, qb * 6 + 6); ++q)
          for (std::uint32_t k = kb * 4; k < std::min(t, kb * 4 + 4); ++k) {
            on += dense[std::size_t{q} * t + k];
            ++cells;
          }
        REQUIRE(bm.kind(qb, kb) == (on == 0       ? block_kind::empty
                                    : on == cells ? block_kind::full
                                                  : block_kind::partial));
      }
    const auto tiles = block_tile_counts(mask, 10, {5, 3});
    for (std::uint32_t blk = 0; blk < tiles.size(); ++blk) {
      std::uint64_t expect = 0;
      for (std::uint32_t q0 = blk * 10; q0 < std::min(t, blk * 10 + 10); q0 += 5)
        for (std::uint32_t k0 = 0; k0 < t; k0 += 3) {
          bool any = false;
          for (std::uint32_t q = q0; q < std::min({t, q0 + 5, blk * 10 + 10}); ++q)
            for (std::uint32_t k = k0; k < std::min(t, k0 + 3); ++k) any = any || dense[std::size_t{q} * t + k];
          expect += any;
        }
      REQUIRE(tiles[blk] == expect);
    }
  }
}

TEST_CASE("layouts: EP prefixes spans, EE keeps positions, MP keeps documents apart", "[mask]") {
  sample s;
  s.segments = {{0, 3, 3}, {1, 2, 2}, {0, 1, 1}, {2, 4, 4}};
  const document_layout ee = ee_document(s);
  CHECK(ee.length == 10);
  CHECK(ee.spans == std::vector<placed_span>{{3, 2, 1}, {6, 4, 2}});
  const document_layout ep = ep_document(s);
  CHECK(ep.length == 10);
  CHECK(ep.spans == std::vector<placed_span>{{0, 2, 1}, {2, 4, 2}});
  // two documents: the second's text does not see the first
  const std::vector<sample> two{s, s};
  const auto mask = build_bitfield_mask(std::span<const sample>(two), bit_assignment::span);
  CHECK(mask.size() == 20);
  CHECK(mask.document_count() == 2);
  CHECK_FALSE(mask.attends(10, 9));
  CHECK(mask.attends(10, 10));
  CHECK(mask.attends(15, 10));        // text at document position 5 sees the document start
  CHECK_FALSE(mask.attends(19, 10));  // an audio token sees only its span [16, 20)
  CHECK(mask.attends(19, 16));
  CHECK(mask.attends(16, 19));  // spans are bidirectional
  const auto w = token_workloads(mask);
  CHECK(w[5] == 6);   // text at position 5: 5 earlier tokens and itself
  CHECK(w[3] == 2);   // image span of 2
  CHECK(w[19] == 4);  // audio span of 4
}

TEST_CASE("bad input is rejected with the offending value named", "[mask]") {
  using Catch::Matchers::Contains;
  // overlapping segments
  const std::vector<document_layout> overlap{{10, {{0, 4, 1}, {3, 2, 2}}}};
  REQUIRE_THROWS_WITH(build_bitfield_mask(std::span<const document_layout>(overlap), bit_assignment::span),
                      Contains("overlapping segments [0, 4) and [3, 5)"));
  const std::vector<document_layout> outside{{5, {{3, 4, 1}}}};
  REQUIRE_THROWS_AS(build_bitfield_mask(std::span<const document_layout>(outside), bit_assignment::span),
                    invalid_input);
  const std::vector<document_layout> text_span{{5, {{0, 2, 0}}}};
  REQUIRE_THROWS_AS(build_bitfield_mask(std::span<const document_layout>(text_span), bit_assignment::span),
                    invalid_input);
  // more than 61 modality bits: 62 spans in one document, or 62 modalities
  document_layout many{200, {}};
  for (std::uint32_t i = 0; i < 62; ++i) many.spans.push_back({i * 3, 2, static_cast<modality_id>(1 + i)});
  const std::vector<document_layout> many_docs{many};
  REQUIRE_THROWS_WITH(build_bitfield_mask(std::span<const document_layout>(many_docs), bit_assignment::span),
                      Contains("62 modality spans"));
  REQUIRE_THROWS_WITH(build_bitfield_mask(std::span<const document_layout>(many_docs), bit_assignment::modality),
                      Contains("62 distinct modalities"));
  many.spans.pop_back();  // 61 is fine
  const std::vector<document_layout> ok_docs{many};
  REQUIRE_NOTHROW(build_bitfield_mask(std::span<const document_layout>(ok_docs), bit_assignment::span));
  REQUIRE_NOTHROW(build_bitfield_mask(std::span<const document_layout>(ok_docs), bit_assignment::modality));
  // B = 0, tile and block sizes of 0
  const bitfield_mask mask({text_bit | causal_bit, text_bit | causal_bit}, {0, 0});
  REQUIRE_THROWS_WITH(block_workloads(mask, 0), Contains("B = 0"));
  REQUIRE_THROWS_AS(block_tile_counts(mask, 0), invalid_input);
  REQUIRE_THROWS_AS(block_tile_counts(mask, 4, {0, 32}), invalid_input);
  REQUIRE_THROWS_AS(make_block_mask(mask, 0, 4), invalid_input);
  // more cells than max_block_mask_cells (2^28): 16,385² 1-token blocks, refused before any allocation
  const bitfield_mask long_mask(std::vector<std::uint64_t>(16385, text_bit), std::vector<std::uint32_t>(16385, 0));
  REQUIRE_THROWS_WITH(make_block_mask(long_mask, 1, 1), Contains("16385 x 16385 blocks of 1 x 1 tokens exceed 2^28"));
  REQUIRE(make_block_mask(long_mask, 128, 128).num_q_blocks == 129);
  // raw bitfields
  REQUIRE_THROWS_WITH(bitfield_mask({text_bit, reserved_bit | text_bit}, {0, 0}), Contains("token 1"));
  REQUIRE_THROWS_WITH(bitfield_mask({text_bit, causal_bit}, {0, 0}), Contains("token 1"));
  REQUIRE_THROWS_WITH(bitfield_mask({text_bit, text_bit}, {1, 0}), Contains("decreases at token 1"));
  REQUIRE_THROWS_AS(bitfield_mask({text_bit}, {0, 0}), invalid_input);
  // dense materialization is for small T
  const std::vector<document_layout> big{{dense_mask_max_tokens + 1, {}}};
  REQUIRE_THROWS_WITH(dense_mask(build_bitfield_mask(std::span<const document_layout>(big), bit_assignment::span)),
                      Contains("32769"));
}

TEST_CASE("block_workloads from runs refuses runs past T and block counts past 32 bits", "[mask]") {
  using Catch::Matchers::Contains;
  // Both wrote past the result before (a run beyond T; ⌈T/B⌉ narrowed to 32 bits).
  const std::vector<workload_run> beyond{{10, 5, 1, 1}};
  REQUIRE_THROWS_WITH(block_workloads(std::span<const workload_run>(beyond), 5, 1),
                      Contains("run [10, 15) exceeds T = 5"));
  const std::vector<workload_run> small{{0, 5, 1, 1}};
  REQUIRE_THROWS_WITH(block_workloads(std::span<const workload_run>(small), (std::uint64_t{1} << 32) + 2, 1),
                      Contains("above 2^32 - 1"));
  REQUIRE(block_workloads(std::span<const workload_run>(small), 5, 2) == std::vector<std::uint64_t>{3, 7, 5});
}
