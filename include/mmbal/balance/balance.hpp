#pragma once
/// @file
/// Umbrella of `balance/` (docs/DESIGN.md §5.1): the DP post-balancing partitioners, constraints, refine, migrate, the
/// micro-batch split, and the spec layer (`solve`).

#include <mmbal/balance/constraints.hpp>
#include <mmbal/balance/conv_lpt.hpp>
#include <mmbal/balance/greedy_ascending.hpp>
#include <mmbal/balance/karmarkar_karp.hpp>
#include <mmbal/balance/lpt.hpp>
#include <mmbal/balance/micro_batches.hpp>
#include <mmbal/balance/migrate.hpp>
#include <mmbal/balance/padded_binary_search.hpp>
#include <mmbal/balance/problem.hpp>
#include <mmbal/balance/refine.hpp>
#include <mmbal/balance/tolerance_lpt.hpp>
