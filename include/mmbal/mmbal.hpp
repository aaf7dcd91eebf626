#pragma once
/// @file
/// Umbrella header: every host-only public header of mmbal (no MPI, CUDA or NCCL).

#include <mmbal/balance/constraints.hpp>
#include <mmbal/balance/micro_batches.hpp>
#include <mmbal/balance/migrate.hpp>
#include <mmbal/balance/refine.hpp>
#include <mmbal/context/distribute.hpp>
#include <mmbal/core/concepts.hpp>
#include <mmbal/core/error.hpp>
#include <mmbal/core/rng.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/cost/functions.hpp>
#include <mmbal/cost/metrics.hpp>
#include <mmbal/cost/spec.hpp>
#include <mmbal/mask/mask.hpp>
#include <mmbal/orchestrate/orchestrator.hpp>
#include <mmbal/orchestrate/policy.hpp>
#include <mmbal/rearrange/rearrange.hpp>
#include <mmbal/sampling/grouping.hpp>
#include <mmbal/sampling/isf.hpp>
#include <mmbal/transport/loopback.hpp>
#include <mmbal/workload/generators.hpp>
#include <mmbal/workload/jsonl.hpp>
#include <mmbal/workload/length_data.hpp>
#include <mmbal/workload/sample.hpp>
