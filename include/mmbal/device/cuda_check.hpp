#pragma once
/// @file
/// The one CUDA error check of mmbal: `MMBAL_CUDA_CHECK(call)` throws `mmbal::runtime_failure`
/// naming the call, the file and the line when a CUDA runtime call fails (docs/DESIGN.md §5.6).
/// Host C++ that needs only the CUDA runtime headers; used by the device kernels (`device/`)
/// and the NCCL transport (`transport/nccl.hpp`, which adds `MMBAL_NCCL_CHECK`).

#include <mmbal/core/error.hpp>

#include <cuda_runtime.h>

namespace mmbal::device::detail {

/// Throws `runtime_failure`: "<file>:<line>: <call> failed: <error name>: <error string>".
[[noreturn]] inline void throw_cuda(cudaError_t e, const char* call, const char* file, int line) {
  mmbal::detail::throw_runtime(file, ":", line, ": ", call, " failed: ", cudaGetErrorName(e), ": ",
                               cudaGetErrorString(e));
}

}  // namespace mmbal::device::detail

/// Checks a CUDA runtime call; throws `mmbal::runtime_failure` naming the call, file and line.
#define MMBAL_CUDA_CHECK(call)                                                            \
  do {                                                                                    \
    const cudaError_t mmbal_cuda_status_ = (call);                                        \
    if (mmbal_cuda_status_ != cudaSuccess)                                                \
      ::mmbal::device::detail::throw_cuda(mmbal_cuda_status_, #call, __FILE__, __LINE__); \
  } while (0)
