#pragma once
/// @file
/// Umbrella of the host-only part of `transport/` (docs/DESIGN.md §5.6): transport concepts, the loopback transport,
/// metadata encoding and plan copies. MPI and NCCL have their own headers (`transport/mpi.hpp`, `transport/nccl.hpp`)
/// because they need those libraries.

#include <mmbal/transport/concepts.hpp>
#include <mmbal/transport/loopback.hpp>
#include <mmbal/transport/metadata.hpp>
#include <mmbal/transport/plan_copies.hpp>
