#pragma once
/// @file
/// Umbrella of `cost/` (docs/DESIGN.md §4): batch-length functions, metrics and lower bounds, cost specs.

#include <mmbal/cost/any_batch_cost.hpp>
#include <mmbal/cost/batch_stats.hpp>
#include <mmbal/cost/functions.hpp>
#include <mmbal/cost/metrics.hpp>
#include <mmbal/cost/validate.hpp>
