// Concept conformance: one positive type and one negative type per requirement.
#include <mmbal/balance/constraints.hpp>
#include <mmbal/core/concepts.hpp>
#include <mmbal/cost/functions.hpp>

#include <catch2/catch.hpp>

#include <vector>

namespace {
using mmbal::length_t;

struct good_cost {
  using state = int;
  state empty() const { return 0; }
  state add(const state& s, length_t l) const { return s + static_cast<int>(l); }
  double value(const state& s) const { return s; }
};
struct no_state {
  int empty() const { return 0; }
  int add(const int& s, length_t) const { return s; }
  double value(const int& s) const { return s; }
};
struct irregular_state {
  struct state {
    state(int) {}
  };
  state empty() const { return {0}; }
  state add(const state& s, length_t) const { return s; }
  double value(const state&) const { return 0; }
};
struct no_empty {
  using state = int;
  state add(const state& s, length_t) const { return s; }
  double value(const state& s) const { return s; }
};
struct add_returns_void {
  using state = int;
  state empty() const { return 0; }
  void add(const state&, length_t) const {}
  double value(const state& s) const { return s; }
};
struct value_returns_int {
  using state = int;
  state empty() const { return 0; }
  state add(const state& s, length_t) const { return s; }
  int value(const state& s) const { return s; }
};
struct not_copyable : good_cost {
  not_copyable() = default;
  not_copyable(const not_copyable&) = delete;
};
struct good_additive : good_cost {
  double item(length_t l) const { return l; }
};
struct item_returns_int : good_cost {
  int item(length_t l) const { return static_cast<int>(l); }
};
struct good_padded : good_cost {
  double padded_value(std::uint64_t n, length_t m) const { return static_cast<double>(n) * m; }
};
struct padded_wrong_args : good_cost {
  double padded_value(const char*) const { return 0; }
};

struct good_distributor {
  std::vector<mmbal::rank_t> operator()(std::span<const std::uint64_t> w, mmbal::rank_t) const {
    return std::vector<mmbal::rank_t>(w.size(), 0);
  }
};
struct distributor_wrong_result {
  int operator()(std::span<const std::uint64_t>, mmbal::rank_t) const { return 0; }
};

struct good_partitioner {
  template <class C>
  mmbal::assignment operator()(std::span<const length_t> w, mmbal::rank_t bins, const C&,
                               const mmbal::balance::constraints&) const {
    return mmbal::assignment{bins, std::vector<mmbal::location>(w.size())};
  }
};
struct partitioner_returns_partition {
  template <class C>
  mmbal::partition operator()(std::span<const length_t>, mmbal::rank_t bins, const C&,
                              const mmbal::balance::constraints&) const {
    return {bins, {}};
  }
};
struct partitioner_without_constraints {
  template <class C>
  mmbal::assignment operator()(std::span<const length_t>, mmbal::rank_t bins, const C&) const {
    return {bins, {}};
  }
};
}  // namespace

TEST_CASE("batch_cost requirements") {
  STATIC_REQUIRE(mmbal::batch_cost<good_cost>);
  STATIC_REQUIRE_FALSE(mmbal::batch_cost<no_state>);
  STATIC_REQUIRE_FALSE(mmbal::batch_cost<irregular_state>);
  STATIC_REQUIRE_FALSE(mmbal::batch_cost<no_empty>);
  STATIC_REQUIRE_FALSE(mmbal::batch_cost<add_returns_void>);
  STATIC_REQUIRE_FALSE(mmbal::batch_cost<value_returns_int>);
  STATIC_REQUIRE_FALSE(mmbal::batch_cost<not_copyable>);
}

TEST_CASE("capability refinements") {
  STATIC_REQUIRE(mmbal::additive_cost<good_additive>);
  STATIC_REQUIRE_FALSE(mmbal::additive_cost<good_cost>);
  STATIC_REQUIRE_FALSE(mmbal::additive_cost<item_returns_int>);
  STATIC_REQUIRE(mmbal::padded_cost<good_padded>);
  STATIC_REQUIRE_FALSE(mmbal::padded_cost<good_cost>);
  STATIC_REQUIRE_FALSE(mmbal::padded_cost<padded_wrong_args>);
}

TEST_CASE("built-in costs model the concepts they claim") {
  using namespace mmbal::cost;
  STATIC_REQUIRE(mmbal::additive_cost<tokens>);
  STATIC_REQUIRE(mmbal::padded_cost<padded>);
  STATIC_REQUIRE_FALSE(mmbal::additive_cost<padded>);
  STATIC_REQUIRE(mmbal::additive_cost<attention>);
  STATIC_REQUIRE(mmbal::padded_cost<padded_attention>);
  STATIC_REQUIRE(mmbal::batch_cost<conv_attention>);
  STATIC_REQUIRE_FALSE(mmbal::additive_cost<conv_attention>);
  STATIC_REQUIRE_FALSE(mmbal::padded_cost<conv_attention>);
  STATIC_REQUIRE(mmbal::additive_cost<fitted>);
  STATIC_REQUIRE(mmbal::additive_cost<flops>);
}

TEST_CASE("token_distributor and partitioner requirements") {
  STATIC_REQUIRE(mmbal::token_distributor<good_distributor>);
  STATIC_REQUIRE_FALSE(mmbal::token_distributor<distributor_wrong_result>);
  STATIC_REQUIRE(mmbal::balance::partitioner<good_partitioner, good_cost>);
  STATIC_REQUIRE_FALSE(mmbal::balance::partitioner<good_partitioner, no_empty>);
  STATIC_REQUIRE_FALSE(mmbal::balance::partitioner<partitioner_returns_partition, good_cost>);
  STATIC_REQUIRE_FALSE(mmbal::balance::partitioner<partitioner_without_constraints, good_cost>);
}
