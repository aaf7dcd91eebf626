// Token distribution for context parallelism: every policy is a partition of the blocks,
// zigzag and contiguous exactly as defined, random seeded, LPT never worse than contiguous.
#include <mmbal/context/distribute.hpp>
#include <mmbal/mask/mask.hpp>
#include <mmbal/spec/context.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

using namespace mmbal;

namespace {

// A random mask of T tokens: random documents, random spans, both bit modes.
bitfield_mask random_mask(std::uint64_t seed, std::uint32_t t) {
  rng_engine g = make_rng(seed, 42);
  std::vector<document_layout> docs;
  std::uint32_t left = t;
  while (left > 0) {
    document_layout d;
    d.length = std::min<std::uint32_t>(left, static_cast<std::uint32_t>(uniform_int(g, 1, t)));
    std::uint32_t at = static_cast<std::uint32_t>(uniform_below(g, d.length / 2 + 1));
    while (d.spans.size() < 20 && at < d.length) {
      const auto len = std::min<std::uint32_t>(d.length - at, static_cast<std::uint32_t>(uniform_int(g, 1, 300)));
      d.spans.push_back({at, len, static_cast<modality_id>(uniform_int(g, 1, 3))});
      at += len + static_cast<std::uint32_t>(uniform_below(g, 400));
    }
    left -= d.length;
    docs.push_back(d);
  }
  return build_bitfield_mask(std::span<const document_layout>(docs),
                             seed % 2 ? bit_assignment::span : bit_assignment::modality);
}

void check_partition(const token_distribution& r, std::span<const std::uint64_t> w, std::uint64_t tokens,
                     std::uint32_t block, rank_t ranks) {
  const std::uint64_t n = (tokens + block - 1) / block;
  REQUIRE(r.rank_of_block.size() == n);
  REQUIRE(r.rank_offsets.size() == ranks);
  std::vector<int> seen(n, 0);
  std::uint64_t token_sum = 0, work_sum = 0;
  for (rank_t k = 0; k < ranks; ++k) {
    const auto& off = r.rank_offsets[k];
    REQUIRE(std::is_sorted(off.begin(), off.end()));
    REQUIRE(std::adjacent_find(off.begin(), off.end()) == off.end());
    std::uint64_t tok = 0, work = 0;
    for (std::uint64_t o : off) {
      REQUIRE(o % block == 0);
      REQUIRE(o / block < n);
      REQUIRE(r.rank_of_block[o / block] == k);
      ++seen[o / block];
      tok += std::min<std::uint64_t>(block, tokens - o);
      work += w[o / block];
    }
    REQUIRE(r.rank_tokens[k] == tok);
    REQUIRE(r.rank_workloads[k] == work);
    REQUIRE(r.token_indices(k).size() == tok);
    token_sum += tok;
    work_sum += work;
  }
  REQUIRE(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
  REQUIRE(token_sum == tokens);
  REQUIRE(work_sum == std::accumulate(w.begin(), w.end(), std::uint64_t{0}));
  REQUIRE(r.total_workload == work_sum);
}

}  // namespace

TEST_CASE("token_distributor conformance", "[context]") {
  struct no_call {};
  struct wrong_result {
    int operator()(std::span<const std::uint64_t>, rank_t) const { return 0; }
  };
  struct wrong_args {
    std::vector<rank_t> operator()(std::span<const double>, rank_t) const { return {}; }
  };
  STATIC_REQUIRE(token_distributor<lpt_distributor>);
  STATIC_REQUIRE(token_distributor<zigzag_distributor>);
  STATIC_REQUIRE(token_distributor<contiguous_distributor>);
  STATIC_REQUIRE(token_distributor<random_distributor>);
  STATIC_REQUIRE_FALSE(token_distributor<no_call>);
  STATIC_REQUIRE_FALSE(token_distributor<wrong_result>);
  STATIC_REQUIRE_FALSE(token_distributor<wrong_args>);
}

TEST_CASE("every policy partitions the blocks; offsets ascend; workloads sum to the area", "[context]") {
  const std::uint32_t blocks[] = {1, 64, 128, 1000};
  const rank_t group_sizes[] = {1, 2, 3, 8, 40};
  for (std::uint64_t seed = 0; seed < 12; ++seed) {
    const auto t = static_cast<std::uint32_t>(500 + 997 * seed);
    const bitfield_mask mask = random_mask(seed, t);
    for (std::uint32_t b : blocks) {
      const auto w = block_workloads(mask, b);
      for (rank_t g : group_sizes)
        for (const char* name : {"lpt", "zigzag", "contiguous", "random"}) {
          INFO("seed " << seed << " B " << b << " G " << g << " " << name);
          const auto d = spec::parse_distributor(name, seed);
          CHECK(spec::distributor_name(d) == name);
          const auto r = spec::distribute_tokens(w, t, b, g, d);
          check_partition(r, w, t, b, g);
          REQUIRE(r.total_workload == total_area(mask));
          REQUIRE(r.max_over_mean() >= 1.0);
        }
    }
  }
}

TEST_CASE("zigzag: 2G chunks, rank i takes chunks i and 2G-1-i", "[context]") {
  for (std::uint64_t n : {0, 1, 5, 16, 17, 100, 1023}) {
    for (rank_t g : {1u, 2u, 3u, 4u, 8u}) {
      const std::vector<std::uint64_t> w(n, 1);
      const auto out = zigzag_distributor{}(w, g);
      REQUIRE(out.size() == n);
      // chunk c = [floor(c n / 2G), floor((c+1) n / 2G)); found independently by search
      for (std::uint64_t b = 0; b < n; ++b) {
        std::uint64_t c = 0;
        while (!((c * n) / (2 * g) <= b && b < ((c + 1) * n) / (2 * g))) ++c;
        const rank_t expect = c < g ? static_cast<rank_t>(c) : static_cast<rank_t>(2 * g - 1 - c);
        REQUIRE(out[b] == expect);
      }
      if (n % (2 * g) == 0) {  // equal chunks: rank i holds exactly blocks of chunks i and 2G-1-i
        const std::uint64_t c = n / (2 * g);
        for (rank_t i = 0; i < g; ++i)
          for (std::uint64_t j = 0; j < c; ++j) {
            REQUIRE(out[i * c + j] == i);
            REQUIRE(out[(2 * g - 1 - i) * c + j] == i);
          }
      }
    }
  }
}

TEST_CASE("contiguous: G ordered ranges of floor/ceil(n/G) blocks", "[context]") {
  for (std::uint64_t n : {0, 1, 7, 64, 99}) {
    for (rank_t g : {1u, 3u, 8u}) {
      const std::vector<std::uint64_t> w(n, 5);
      const auto out = contiguous_distributor{}(w, g);
      REQUIRE(std::is_sorted(out.begin(), out.end()));
      std::vector<std::uint64_t> count(g, 0);
      for (rank_t r : out) ++count[r];
      for (std::uint64_t c : count) REQUIRE((c == n / g || c == (n + g - 1) / g));
    }
  }
}

TEST_CASE("random: seeded, deterministic, balanced block counts", "[context]") {
  const std::vector<std::uint64_t> w(1000, 1);
  const auto a = random_distributor{7}(w, 8), b = random_distributor{7}(w, 8), c = random_distributor{8}(w, 8);
  REQUIRE(a == b);
  REQUIRE(a != c);
  std::vector<int> count(8, 0);
  for (rank_t r : a) ++count[r];
  for (int x : count) REQUIRE(x == 125);
}

TEST_CASE("LPT is never worse than contiguous and meets Graham's bounds", "[context]") {
  for (std::uint64_t seed = 0; seed < 40; ++seed) {
    const auto t = static_cast<std::uint32_t>(2000 + 1531 * seed);
    const bitfield_mask mask = random_mask(seed + 100, t);
    for (rank_t g : {2u, 4u, 8u}) {
      const auto w = block_workloads(mask, 64);
      const auto lpt = distribute_tokens(w, t, 64, g, lpt_distributor{});
      const auto con = distribute_tokens(w, t, 64, g, contiguous_distributor{});
      INFO("seed " << seed << " G " << g);
      REQUIRE(lpt.max_workload() <= con.max_workload());
      const std::uint64_t biggest = w.empty() ? 0 : *std::max_element(w.begin(), w.end());
      REQUIRE(static_cast<double>(lpt.max_workload()) <= lpt.mean_workload() + static_cast<double>(biggest));
    }
  }
  // against the brute-force optimum on tiny inputs: max <= (4/3 - 1/(3G)) OPT
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    rng_engine g = make_rng(seed, 5);
    const auto n = static_cast<std::size_t>(uniform_int(g, 1, 9));
    const auto ranks = static_cast<rank_t>(uniform_int(g, 1, 3));
    std::vector<std::uint64_t> w(n);
    for (auto& x : w) x = uniform_below(g, 100);
    std::uint64_t opt = UINT64_MAX;
    std::vector<rank_t> a(n, 0);
    for (;;) {
      std::vector<std::uint64_t> load(ranks, 0);
      for (std::size_t i = 0; i < n; ++i) load[a[i]] += w[i];
      opt = std::min(opt, *std::max_element(load.begin(), load.end()));
      std::size_t i = 0;
      while (i < n && ++a[i] == ranks) a[i++] = 0;
      if (i == n) break;
    }
    const auto out = lpt_distributor{}(w, ranks);
    std::vector<std::uint64_t> load(ranks, 0);
    for (std::size_t i = 0; i < n; ++i) load[out[i]] += w[i];
    const double bound = (4.0 / 3.0 - 1.0 / (3.0 * ranks)) * static_cast<double>(opt);
    REQUIRE(static_cast<double>(*std::max_element(load.begin(), load.end())) <= bound + 1e-9);
  }
}

TEST_CASE("LPT: heap path (G > 32) equals the linear scan's choices", "[context]") {
  // Same rule (least load, ties lowest rank) in both paths: compare G = 40 against a simple
  // reimplementation.
  rng_engine g = make_rng(3, 3);
  std::vector<std::uint64_t> w(3000);
  for (auto& x : w) x = uniform_below(g, 50);  // many ties
  const auto out = lpt_distributor{}(w, 40);
  std::vector<std::size_t> order(w.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return w[a] > w[b]; });
  std::vector<std::uint64_t> load(40, 0);
  for (std::size_t i : order) {
    const auto r = static_cast<rank_t>(std::min_element(load.begin(), load.end()) - load.begin());
    REQUIRE(out[i] == r);
    load[r] += w[i];
  }
}

TEST_CASE("LPT: radix-sorted order equals a comparison sort's (desc workload, asc index)", "[context]") {
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    rng_engine g = make_rng(seed, 8);
    const auto n = static_cast<std::size_t>(uniform_int(g, 1000, 9000));
    // Wide values fill the radix sort's upper bytes; n · range stays below 2^64 (a larger total
    // is refused: the loads would wrap).
    const std::uint64_t range = seed % 3 == 0 ? 20 : seed % 3 == 1 ? 1u << 20 : UINT64_MAX / 16384;
    std::vector<std::uint64_t> w(n);
    for (auto& x : w) x = uniform_below(g, range);
    const auto out = lpt_distributor{}(w, 8);
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return w[a] > w[b]; });
    std::vector<std::uint64_t> load(8, 0);
    bool same = true;
    for (std::size_t i : order) {
      const auto r = static_cast<rank_t>(std::min_element(load.begin(), load.end()) - load.begin());
      same = same && out[i] == r;
      load[r] += w[i];
    }
    REQUIRE(same);
  }
}

TEST_CASE("distribution rejects bad input", "[context]") {
  using Catch::Matchers::Contains;
  const std::vector<std::uint64_t> w(4, 1);
  REQUIRE_THROWS_WITH(lpt_distributor{}(w, 0), Contains("G = 0"));
  REQUIRE_THROWS_WITH(distribute_tokens(w, 512, 128, 0, zigzag_distributor{}), Contains("G = 0"));
  REQUIRE_THROWS_WITH(lpt_distributor{}(w, rank_t{1} << 31), Contains("G = 2147483648 exceeds"));
  REQUIRE_THROWS_WITH(distribute_tokens(w, 512, 0, 2, zigzag_distributor{}), Contains("B = 0"));
  REQUIRE_THROWS_WITH(distribute_tokens(w, 600, 128, 2, zigzag_distributor{}), Contains("expected 5"));
  // ⌈T/B⌉ near 2^64 used to wrap to 0 blocks: an empty list passed and the tokens vanished.
  REQUIRE_THROWS_WITH(distribute_tokens({}, ~std::uint64_t{0}, 2, 1, zigzag_distributor{}),
                      Contains("expected 9223372036854775808"));
  const std::vector<std::uint64_t> wrapping{std::uint64_t{1} << 63, std::uint64_t{1} << 63};
  REQUIRE_THROWS_WITH(distribute_tokens(wrapping, 4, 2, 2, lpt_distributor{}), Contains("more than 2^64 - 1 (block 1"));
  // Called directly, lpt_distributor wrapped its loads: {2^63, 2^63, 2^63, 1} on 2 ranks put
  // the last block on rank 0 (real load 2^64) instead of rank 1.
  const std::uint64_t half = std::uint64_t{1} << 63;
  REQUIRE_THROWS_WITH(lpt_distributor{}(std::vector<std::uint64_t>{half, half, half, 1}, 2),
                      Contains("lpt_distributor: the blocks' total workload exceeds 2^64 - 1"));
  CHECK(lpt_distributor{}(std::vector<std::uint64_t>{half, half - 2, 1}, 2) == std::vector<rank_t>{0, 1, 1});
  REQUIRE_THROWS_WITH(spec::parse_distributor("ring"), Contains("'ring'"));
  struct bad {
    std::vector<rank_t> operator()(std::span<const std::uint64_t> x, rank_t) const {
      return std::vector<rank_t>(x.size(), 9);
    }
  };
  REQUIRE_THROWS_WITH(distribute_tokens(w, 512, 128, 2, bad{}), Contains("rank 9"));
}

TEST_CASE("empty sequences: no blocks, zero loads, max/mean 1", "[context]") {
  const bitfield_mask empty;
  REQUIRE(token_workloads(empty).empty());
  REQUIRE(block_workloads(empty, 128).empty());
  REQUIRE(total_area(empty) == 0);
  const std::vector<document_layout> zero{{0, {}}, {0, {}}};
  const bitfield_mask built = build_bitfield_mask(std::span<const document_layout>(zero), bit_assignment::span);
  REQUIRE(built.size() == 0);
  REQUIRE(built.document_count() == 0);
  for (const char* name : {"lpt", "zigzag", "contiguous", "random"}) {
    const auto r = spec::distribute_tokens(std::vector<std::uint64_t>{}, 0, 128, 4, spec::parse_distributor(name));
    REQUIRE(r.rank_tokens == std::vector<std::uint64_t>(4, 0));
    REQUIRE(r.rank_workloads == std::vector<std::uint64_t>(4, 0));
    REQUIRE(r.max_over_mean() == 1.0);
  }
}

TEST_CASE("distribution is deterministic: the same input gives the same plan", "[context]") {
  const bitfield_mask mask = random_mask(5, 20000);
  const auto w = block_workloads(mask, 128);
  for (const char* name : {"lpt", "zigzag", "contiguous", "random"}) {
    const auto a = spec::distribute_tokens(w, mask.size(), 128, 8, spec::parse_distributor(name, 3));
    const auto b = spec::distribute_tokens(w, mask.size(), 128, 8, spec::parse_distributor(name, 3));
    REQUIRE(a.rank_of_block == b.rank_of_block);
    REQUIRE(a.rank_offsets == b.rank_offsets);
  }
}
