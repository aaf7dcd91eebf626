// Compiles and links the NCCL transport and its CUDA pack/unpack kernels with nvcc. With a
// GPU, runs a one-rank round trip (device pack → grouped ncclSend/ncclRecv → unpack) and
// checks every byte against the host reference; without one, prints a visible SKIP and
// exits 0. The host-side plan logic it uses (copy lists) is tested in tests/transport.
#include "../transport/random_plans.hpp"

#include <mmbal/rearrange/alltoall_plan.hpp>
#include <mmbal/transport/concepts.hpp>
#include <mmbal/transport/nccl.hpp>
#include <mmbal/transport/nccl_pack.cuh>

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <vector>

static_assert(mmbal::transport::transport<mmbal::transport::nccl_transport>);
static_assert(mmbal::transport::reducing_transport<mmbal::transport::nccl_transport>);
static_assert(mmbal::transport::device_transport<mmbal::transport::nccl_transport>);

namespace {

int run_on_device() {
  using namespace mmbal::transport;
  ncclComm_t comm = nullptr;
  int dev = 0;
  MMBAL_NCCL_CHECK(ncclCommInitAll(&comm, 1, &dev));
  cudaStream_t stream = nullptr;
  MMBAL_CUDA_CHECK(cudaStreamCreate(&stream));
  int failures = 0;
  {
    nccl_transport t(comm, stream);
    nccl_device_executor exec(t);
    for (std::uint64_t seed = 0; seed < 8; ++seed) {
      auto g = mmbal::make_rng(seed, 12);
      const auto r = mmbal_test::random_rearrangement(g, 300, 1);
      const auto sizes = mmbal_test::random_sizes(g, 300, 500.0);
      const auto plan = mmbal::make_alltoall_plan(r, sizes, 0);
      const auto in = mmbal_test::layout_buffer(r.source, sizes, 0, seed);
      const auto expected = mmbal_test::layout_buffer(r.destination, sizes, 0, seed);
      device_bytes d_in(in.size()), d_out(expected.size());
      if (!in.empty())
        MMBAL_CUDA_CHECK(cudaMemcpyAsync(d_in.data(), in.data(), in.size(), cudaMemcpyHostToDevice, stream));
      exec.all_to_all_device(plan, d_in.data(), d_out.data());
      std::vector<std::byte> out(expected.size());
      if (!out.empty())
        MMBAL_CUDA_CHECK(cudaMemcpyAsync(out.data(), d_out.data(), out.size(), cudaMemcpyDeviceToHost, stream));
      MMBAL_CUDA_CHECK(cudaStreamSynchronize(stream));
      if (out != expected) ++failures;
      std::vector<std::byte> host_out(expected.size());
      t.all_to_all(plan, in, host_out);  // host staging path
      if (host_out != expected) ++failures;
    }
    const auto all = t.all_gather(std::vector<std::uint32_t>{1, 2, 3});
    if (all.words != std::vector<std::uint32_t>{1, 2, 3}) ++failures;
    std::vector<std::uint64_t> v{5, 9};
    t.all_reduce_max(v);
    if (v != std::vector<std::uint64_t>{5, 9}) ++failures;
  }
  MMBAL_CUDA_CHECK(cudaStreamDestroy(stream));
  MMBAL_NCCL_CHECK(ncclCommDestroy(comm));
  std::printf("nccl transport on one GPU: %s\n", failures == 0 ? "all bytes verified" : "FAILED");
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main() {
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device (%s); the NCCL transport and its kernels compiled and linked\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 0;
  }
  try {
    return run_on_device();
  } catch (const mmbal::error& err) {
    std::printf("FAILED: %s\n", err.message());
    return 1;
  }
}
