// Bad parameters give invalid_input errors that name the offending value (docs/DESIGN.md §5.1).

#include <mmbal/spec/algorithm.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

using namespace mmbal;
using namespace mmbal::balance;
using namespace mmbal::spec;

namespace {

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const invalid_input& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("errors: zero bins", "[balance][errors]") {
  const std::vector<length_t> w{3, 1, 2};
  for (const char* spec : {"lpt", "greedy-ascending", "padded", "tolerance:v=1", "conv", "kk"}) {
    INFO(spec);
    CHECK_THAT(error_of([&] {
                 (void)solve(parse_algorithm(spec), cost::padded{}, problem{w, 0});
               }),
               Catch::Contains("bins = 0"));
  }
  CHECK_THAT(error_of([&] { (void)lpt{}(w, 0, cost::tokens{}); }), Catch::Contains("bins = 0"));
  CHECK_THAT(error_of([&] { (void)karmarkar_karp{}(w, 0, cost::tokens{}); }), Catch::Contains("bins = 0"));
  CHECK_THAT(error_of([&] { (void)padded_binary_search{}(w, 0, cost::padded{}); }), Catch::Contains("bins = 0"));
}

// Above `max_ranks` (2^24) every partitioner used to allocate its per-bin state first: 2^31
// bins asked for tens of GiB (an OOM kill from Python, `bad_alloc` in the tool).
TEST_CASE("errors: more bins than max_ranks, named before any allocation", "[balance][errors]") {
  const std::vector<length_t> w{3, 1, 2};
  const std::vector<rank_t> origin{0, 1, 0};
  for (const std::uint64_t bins : {std::uint64_t{max_ranks} + 1, std::uint64_t{1} << 31, std::uint64_t{0xffffffff}}) {
    const auto d = static_cast<rank_t>(bins);
    for (const char* spec : {"lpt", "greedy-ascending", "padded", "tolerance:v=1", "conv", "kk", "lpt+refine",
                             "kk+refine", "migrate:eps=0.1"}) {
      INFO(spec << " with " << bins << " bins");
      problem p{w, d};
      p.origin = origin;
      CHECK_THAT(error_of([&] { (void)solve(parse_algorithm(spec), cost::padded{}, p); }),
                 Catch::Contains(std::to_string(bins) + " exceeds 16777216"));
    }
    CHECK_THAT(error_of([&] { (void)lpt{}(w, d, cost::tokens{}); }), Catch::Contains("lpt: bins = "));
    CHECK_THAT(error_of([&] { (void)karmarkar_karp{}(w, d, cost::tokens{}); }), Catch::Contains("exceeds"));
    CHECK_THAT(error_of([&] {
                 (void)refine(w, assignment{d, {{0, 0}, {0, 1}, {0, 2}}}, cost::tokens{}, constraints{});
               }),
               Catch::Contains("exceeds"));
  }
  // The largest count is accepted (one item per bin in the first bins).
  const assignment a = lpt{}(w, max_ranks, cost::tokens{});
  CHECK(a.bins == max_ranks);
  CHECK_NOTHROW(a.validate());
}

TEST_CASE("errors: tolerance v negative or NaN", "[balance][errors]") {
  const std::vector<length_t> w{3, 1, 2};
  CHECK_THAT(error_of([&] { (void)tolerance_lpt{-1.0}(w, 2, cost::tokens{}); }), Catch::Contains("-1"));
  CHECK_THAT(error_of([&] { (void)tolerance_lpt{std::nan("")}(w, 2, cost::tokens{}); }), Catch::Contains("nan"));
  CHECK_THAT(error_of([&] { (void)tolerance_lpt{std::numeric_limits<double>::infinity()}(w, 2, cost::tokens{}); }),
             Catch::Contains("inf"));
  CHECK_THAT(error_of([&] { (void)parse_algorithm("tolerance:v=-3"); }), Catch::Contains("-3"));
}

TEST_CASE("errors: infeasible count cap names the numbers", "[balance][errors]") {
  const std::vector<length_t> w(10, 5);
  constraints limits;
  limits.counts.kind = count_cap::mode::fixed;
  limits.counts.cap = 3;  // 3 × 3 bins = 9 < 10 items
  for (const char* spec : {"lpt", "greedy-ascending", "tolerance:v=0", "padded"}) {
    INFO(spec);
    const std::string e = error_of([&] { (void)solve(parse_algorithm(spec), cost::padded{}, problem{w, 3, limits}); });
    CHECK_THAT(e, Catch::Contains("count cap 3") && Catch::Contains("10 items"));
  }
  limits.counts.cap = 4;  // 12 ≥ 10: feasible
  const assignment a = lpt{}(w, 3, cost::tokens{}, limits);
  for (const auto s : a.to_partition().bin_sizes()) CHECK(s <= 4);
}

TEST_CASE("errors: an item above the capacity is named with its weight", "[balance][errors]") {
  const std::vector<length_t> w{10, 20, 999, 30};
  constraints limits;
  limits.capacity = 500.0;
  for (const char* spec : {"lpt", "greedy-ascending", "tolerance:v=0"}) {
    INFO(spec);
    const std::string e = error_of([&] { (void)solve(parse_algorithm(spec), cost::tokens{}, problem{w, 2, limits}); });
    CHECK_THAT(e, Catch::Contains("item 2") && Catch::Contains("999") && Catch::Contains("500"));
  }
  // Padded: the item's cost alone (1 · 999) is above the cap.
  CHECK_THAT(error_of([&] { (void)padded_binary_search{}(w, 2, cost::padded{}, limits); }),
             Catch::Contains("item 2") && Catch::Contains("999"));
  // Feasible items but not enough room in total: an error naming the item that does not fit.
  limits.capacity = 40.0;
  const std::vector<length_t> v{30, 30, 30};
  CHECK_THAT(error_of([&] { (void)lpt{}(v, 2, cost::tokens{}, limits); }),
             Catch::Contains("item") && Catch::Contains("capacity"));
  // Bad capacity values.
  limits.capacity = -1.0;
  CHECK_THAT(error_of([&] { (void)lpt{}(v, 2, cost::tokens{}, limits); }), Catch::Contains("capacity = -1"));
  limits.capacity = std::nan("");
  CHECK_THAT(error_of([&] { (void)lpt{}(v, 2, cost::tokens{}, limits); }), Catch::Contains("capacity = nan"));
}

TEST_CASE("errors: groups of the wrong length", "[balance][errors]") {
  const std::vector<length_t> w{1, 2, 3};
  const std::vector<std::uint64_t> groups{1, 1};
  constraints limits;
  limits.groups = groups;
  CHECK_THAT(error_of([&] { (void)lpt{}(w, 2, cost::tokens{}, limits); }),
             Catch::Contains("groups has 2") && Catch::Contains("3 items"));
}

TEST_CASE("errors: unsupported constraints are named, never ignored", "[balance][errors]") {
  const std::vector<length_t> w{4, 3, 2, 1};
  constraints equal;
  equal.counts.kind = count_cap::mode::equal;
  constraints fixed;
  fixed.counts.kind = count_cap::mode::fixed;
  fixed.counts.cap = 2;
  constraints cap;
  cap.capacity = 100.0;
  const std::vector<std::uint64_t> g{1, 1, 2, 2};
  constraints grouped;
  grouped.groups = g;
  CHECK_THAT(error_of([&] { (void)padded_binary_search{}(w, 2, cost::padded{}, equal); }),
             Catch::Contains("count_cap equal"));
  CHECK_THAT(error_of([&] { (void)padded_binary_search{}(w, 2, cost::padded{}, grouped); }), Catch::Contains("groups"));
  CHECK_THAT(error_of([&] { (void)conv_lpt{}(w, 2, cost::conv_attention{0.1}, cap); }), Catch::Contains("capacity"));
  CHECK_THAT(error_of([&] { (void)conv_lpt{}(w, 2, cost::conv_attention{0.1}, grouped); }), Catch::Contains("groups"));
  CHECK_THAT(error_of([&] { (void)conv_lpt{}(w, 2, cost::conv_attention{0.1}, equal); }),
             Catch::Contains("count_cap equal"));
  CHECK_THAT(error_of([&] { (void)karmarkar_karp{}(w, 2, cost::tokens{}, fixed); }),
             Catch::Contains("count_cap fixed"));
  CHECK_THAT(error_of([&] { (void)karmarkar_karp{}(w, 2, cost::tokens{}, cap); }), Catch::Contains("capacity"));
  constraints both = equal;
  both.groups = g;
  CHECK_THAT(error_of([&] { (void)lpt{}(w, 2, cost::tokens{}, both); }),
             Catch::Contains("count_cap equal with groups"));
}
