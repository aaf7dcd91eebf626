#pragma once
/// @file
/// Umbrella of `workload/` (docs/DESIGN.md §3, §6, §9): the sample model, JSONL reader and writer, realistic generators
/// and their length data.

#include <mmbal/workload/generators.hpp>
#include <mmbal/workload/jsonl.hpp>
#include <mmbal/workload/length_data.hpp>
#include <mmbal/workload/sample.hpp>
