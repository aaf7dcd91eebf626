#pragma once
/// @file
/// Umbrella of `orchestrate/` (docs/DESIGN.md §5.5): the multi-phase orchestrator, its per-phase policies and the
/// prefetching planner.

#include <mmbal/orchestrate/orchestrator.hpp>
#include <mmbal/orchestrate/policy.hpp>
#include <mmbal/orchestrate/prefetch.hpp>
