// rearrangement: validation, inverse, composition (identity, associativity, reference).
#include <mmbal/rearrange/rearrangement.hpp>

#include <catch2/catch.hpp>

#include "rearrange_helpers.hpp"

#include <vector>

using mmbal::location;
using mmbal::rearrangement;

TEST_CASE("rearrangement::validate accepts permutations and names bad locations", "[rearrange]") {
  const rearrangement ok{2, {{0, 0}, {0, 1}, {1, 0}}, {{1, 1}, {1, 0}, {0, 0}}};
  CHECK_NOTHROW(ok.validate());
  const rearrangement empty{3, {}, {}};
  CHECK_NOTHROW(empty.validate());

  rearrangement bad_rank = ok;
  bad_rank.destination[2] = {2, 0};
  CHECK_THROWS_WITH(bad_rank.validate(), Catch::Contains("rank 2 >= ranks 2"));
  rearrangement dup = ok;
  dup.source[1] = {0, 0};
  CHECK_THROWS_WITH(dup.validate(), Catch::Contains("source of item 1"));
  rearrangement gap = ok;
  gap.destination[0] = {1, 2};
  CHECK_THROWS_WITH(gap.validate(), Catch::Contains("slot 2"));
  rearrangement short_side = ok;
  short_side.destination.pop_back();
  CHECK_THROWS_AS(short_side.validate(), mmbal::invalid_input);
}

TEST_CASE("inverse swaps sides and is an involution", "[rearrange]") {
  auto g = mmbal::make_rng(7);
  for (int t = 0; t < 20; ++t) {
    const auto r = rearrange_test::random_rearrangement(g, 50, 5);
    const auto inv = r.inverse();
    CHECK(inv.source == r.destination);
    CHECK(inv.destination == r.source);
    CHECK(inv.inverse() == r);
  }
}

TEST_CASE("compose with the inverse is the identity", "[rearrange]") {
  auto g = mmbal::make_rng(11);
  for (int t = 0; t < 30; ++t) {
    const auto n = static_cast<std::uint32_t>(mmbal::uniform_below(g, 80));
    const auto d = static_cast<mmbal::rank_t>(1 + mmbal::uniform_below(g, 9));
    const auto r = rearrange_test::random_rearrangement(g, n, d);
    const auto id = mmbal::compose(r, r.inverse());
    CHECK(id.source == r.source);
    CHECK(id.destination == r.source);
    CHECK(id.is_identity());
    const auto id2 = mmbal::compose(r.inverse(), r);
    CHECK(id2.is_identity());
    CHECK(id2.source == r.destination);
  }
}

TEST_CASE("compose matches a location-lookup reference and is associative", "[rearrange]") {
  auto g = mmbal::make_rng(13);
  for (int t = 0; t < 30; ++t) {
    const std::uint32_t n = 60;
    const mmbal::rank_t d = 6;
    const auto a = rearrange_test::random_rearrangement(g, n, d);
    // b and c take whatever sits at a's destinations: same layout, items relabeled randomly.
    auto relabel_side = [&](const std::vector<location>& from) {
      std::vector<std::uint32_t> perm(n);
      for (std::uint32_t i = 0; i < n; ++i) perm[i] = i;
      mmbal::shuffle(std::span<std::uint32_t>(perm), g);
      std::vector<location> src(n);
      for (std::uint32_t i = 0; i < n; ++i) src[perm[i]] = from[i];
      return src;
    };
    const rearrangement b{d, relabel_side(a.destination), rearrange_test::random_layout(g, n, d, 0.2)};
    const rearrangement c{d, relabel_side(b.destination), rearrange_test::random_layout(g, n, d, 0.2)};
    const auto ab = mmbal::compose(a, b);
    // Reference: quadratic search for the item of b that starts where a's item ends.
    for (std::uint32_t i = 0; i < n; ++i) {
      std::uint32_t j = 0;
      while (b.source[j] != a.destination[i]) ++j;
      CHECK(ab.destination[i] == b.destination[j]);
      CHECK(ab.source[i] == a.source[i]);
    }
    CHECK(mmbal::compose(ab, c) == mmbal::compose(a, mmbal::compose(b, c)));
  }
}

TEST_CASE("compose rejects mismatched layouts", "[rearrange]") {
  const rearrangement a{2, {{0, 0}, {0, 1}}, {{1, 0}, {1, 1}}};
  const rearrangement b{2, {{0, 0}, {0, 1}}, {{1, 0}, {1, 1}}};  // takes from rank 0, a leaves rank 1
  CHECK_THROWS_WITH(mmbal::compose(a, b), Catch::Contains("on rank 0"));
  const rearrangement c{3, {{0, 0}, {0, 1}}, {{1, 0}, {1, 1}}};
  CHECK_THROWS_AS(mmbal::compose(a, c), mmbal::invalid_input);
}

TEST_CASE("from_origin lays items out rank-major in id order", "[rearrange]") {
  const std::vector<mmbal::rank_t> origin{1, 0, 1, 1, 0};
  const mmbal::assignment to{2, {{0, 0}, {0, 1}, {1, 0}, {0, 2}, {1, 1}}};
  const auto r = rearrangement::from_origin(origin, to);
  const std::vector<location> expect{{1, 0}, {0, 0}, {1, 1}, {1, 2}, {0, 1}};
  CHECK(r.source == expect);
  CHECK(r.destination == to.where);
  const std::vector<mmbal::rank_t> bad{1, 0, 2, 1, 0};
  CHECK_THROWS_WITH(rearrangement::from_origin(bad, to), Catch::Contains("item 2 is rank 2"));
  const mmbal::assignment other{3, to.where};
  CHECK_THROWS_AS(rearrangement::between(mmbal::assignment{2, r.source}, other), mmbal::invalid_input);
  CHECK_THROWS_WITH((rearrangement{mmbal::rank_t{1} << 31, r.source, r.destination}.validate()),
                    Catch::Contains("ranks = 2147483648 exceeds"));
}
