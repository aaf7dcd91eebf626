#pragma once
/// @file
/// Umbrella of `orchestrate/` (docs/DESIGN.md §5.5): the multi-phase orchestrator and its per-phase policies.

#include <mmbal/orchestrate/orchestrator.hpp>
#include <mmbal/orchestrate/policy.hpp>
