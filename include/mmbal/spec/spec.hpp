#pragma once
/// @file
/// Umbrella header of the spec layer (docs/DESIGN.md §2, §6): spec strings for costs,
/// algorithms, orchestrator policies, token distributors, pipeline schedules and orders. Only
/// the tool and the Python module include it; no other library header does (checked by the
/// `spec_layer_isolated` test).

#include <mmbal/spec/algorithm.hpp>
#include <mmbal/spec/context.hpp>
#include <mmbal/spec/cost.hpp>
#include <mmbal/spec/parse.hpp>
#include <mmbal/spec/pipeline.hpp>
#include <mmbal/spec/policy.hpp>
