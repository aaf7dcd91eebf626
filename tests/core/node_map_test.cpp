// The rank -> node table of the traffic and relabeling passes.
#include <mmbal/core/detail/node_map.hpp>

#include <catch2/catch.hpp>

#include <cstdint>

TEST_CASE("node_map: rank / ranks_per_node for every rank, inside and beyond the table") {
  for (const mmbal::rank_t per_node : {1u, 2u, 3u, 7u, 8u, 64u}) {
    for (const mmbal::rank_t ranks : {0u, 1u, 5u, 24u, 100u}) {
      const mmbal::detail::node_map node(ranks, per_node);
      for (mmbal::rank_t q = 0; q < ranks + 50; ++q) CHECK(node(q) == q / per_node);  // partial last node included
      CHECK(node(4'000'000'000u) == 4'000'000'000u / per_node);                       // far beyond: divided
    }
  }
  // 0 ranks per node = one node.
  const mmbal::detail::node_map one(16, 0);
  for (mmbal::rank_t q : {0u, 5u, 15u, 16u, 1'000'000u}) CHECK(one(q) == 0);
}
