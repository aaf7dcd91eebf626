// The one radix sort (core/detail/radix_sort.hpp) and the index orders built on it
// (core/detail/order.hpp) against std::stable_sort on random keys.

#include <mmbal/core/detail/order.hpp>
#include <mmbal/core/detail/radix_sort.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

namespace {

struct record {
  std::uint64_t key;
  std::uint32_t id;
  friend bool operator==(const record&, const record&) = default;
};

// Random keys in [0, 2^bits) with many ties when `distinct` is small.
std::vector<record> random_records(std::size_t n, int bits, std::uint64_t distinct, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  // At most n distinct keys can occur: a larger `distinct` means (almost) no ties.
  std::vector<std::uint64_t> pool(std::clamp<std::uint64_t>(distinct, 1, std::max<std::size_t>(n, 1)));
  for (auto& k : pool) k = bits == 64 ? g() : (g() & ((std::uint64_t{1} << bits) - 1));
  std::vector<record> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = record{pool[g() % pool.size()], static_cast<std::uint32_t>(i)};
  return out;
}

template <int Digit>
void check_against_stable_sort(std::vector<record> v, int bits, std::size_t cutoff = mmbal::detail::radix_sort_cutoff) {
  std::vector<record> expect = v;
  std::stable_sort(expect.begin(), expect.end(), [](const record& a, const record& b) { return a.key < b.key; });
  std::vector<record> spare;
  mmbal::detail::stable_radix_sort<Digit>(
      v, spare, [](const record& r) { return r.key; }, bits, cutoff);
  REQUIRE(v == expect);
}

}  // namespace

TEST_CASE("stable_radix_sort equals std::stable_sort (ties, empty, one record, 64-bit keys)", "[radix]") {
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{1023}, std::size_t{1024},
                              std::size_t{5000}, std::size_t{40000}})
    for (const int bits : {1, 7, 11, 12, 22, 33, 63, 64})
      for (const std::uint64_t distinct :
           {std::uint64_t{1}, std::uint64_t{3}, std::uint64_t{100}, std::uint64_t{1} << 40}) {
        CAPTURE(n, bits, distinct);
        const auto v = random_records(n, bits, distinct, n * 131 + static_cast<std::uint64_t>(bits) * 7 + distinct);
        check_against_stable_sort<11>(v, bits);
        check_against_stable_sort<8>(v, bits);
      }
}

TEST_CASE("stable_radix_sort with a small cutoff: short lists take the radix path (migrate's)", "[radix]") {
  for (const std::size_t n :
       {std::size_t{2}, std::size_t{31}, std::size_t{32}, std::size_t{33}, std::size_t{60}, std::size_t{257}})
    for (const int bits : {1, 8, 9, 17, 32, 64})
      for (const std::uint64_t distinct : {std::uint64_t{1}, std::uint64_t{3}, std::uint64_t{1} << 40}) {
        CAPTURE(n, bits, distinct);
        const auto v = random_records(n, bits, distinct, n * 17 + static_cast<std::uint64_t>(bits) * 5 + distinct);
        check_against_stable_sort<8>(v, bits, 32);
        check_against_stable_sort<11>(v, bits, 2);
      }
  // Packed (key << 32 | id) words with ascending ids, as migrate sorts them: the full sort.
  std::mt19937_64 g(3);
  for (const std::size_t n : {std::size_t{5}, std::size_t{31}, std::size_t{32}, std::size_t{90}}) {
    std::vector<std::uint64_t> words(n), spare;
    std::uint64_t any = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t key = g() % 700;
      any |= key;
      words[i] = (key << 32) | i;
    }
    auto expect = words;
    std::sort(expect.begin(), expect.end());
    mmbal::detail::sort_packed<8>(words, spare, any, 32);
    CHECK(words == expect);
  }
}

TEST_CASE("stable_radix_sort sorts only the named key bits", "[radix]") {
  // Keys below 2^5 sorted with key_bits = 5; with key_bits = 0 nothing moves.
  auto v = random_records(3000, 5, 32, 9);
  const auto original = v;
  std::vector<record> spare;
  mmbal::detail::stable_radix_sort(
      v, spare, [](const record& r) { return r.key; }, 0);
  CHECK(v == original);
  check_against_stable_sort<11>(v, 5);
}

TEST_CASE("index orders: weight descending or ascending, ties by ascending index", "[radix]") {
  std::mt19937_64 g(42);
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{700}, std::size_t{20000}}) {
    for (const std::uint64_t range : {std::uint64_t{4}, std::uint64_t{1} << 20, ~std::uint64_t{0}}) {
      std::vector<std::uint64_t> w64(n);
      std::vector<mmbal::length_t> w32(n);
      for (std::size_t i = 0; i < n; ++i) {
        w64[i] = range == ~std::uint64_t{0} ? g() : g() % range;
        w32[i] = static_cast<mmbal::length_t>(w64[i]);
      }
      std::vector<std::uint32_t> idx(n);
      std::iota(idx.begin(), idx.end(), 0u);
      auto by = [&](const auto& w, bool descending) {
        std::vector<std::uint32_t> e = idx;
        std::stable_sort(e.begin(), e.end(),
                         [&](std::uint32_t a, std::uint32_t b) { return descending ? w[a] > w[b] : w[a] < w[b]; });
        return e;
      };
      CAPTURE(n, range);
      CHECK(mmbal::detail::descending_order(std::span<const std::uint64_t>(w64)) == by(w64, true));
      CHECK(mmbal::detail::ascending_order(std::span<const std::uint64_t>(w64)) == by(w64, false));
      CHECK(mmbal::detail::descending_order(std::span<const mmbal::length_t>(w32)) == by(w32, true));
      CHECK(mmbal::detail::ascending_order(std::span<const mmbal::length_t>(w32)) == by(w32, false));
    }
  }
}
