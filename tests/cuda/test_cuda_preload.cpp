// Loading the kernel modules at backend start (kernel_preload.hpp, CudaBackendOptions::
// preload_kernels): every kernel file's named kernel resolves on this device, again on a second
// call, and backends start with the preload on and off.
#include <catch2/catch.hpp>

#include "cuda/kernel_preload.hpp"
#include "cuda_test_util.hpp"

using namespace photon;
using namespace photon::test;

TEST_CASE("cuda kernel modules load at backend start, and loading them again succeeds", "[cuda]") {
  for (bool preload : {true, false}) {
    auto b = make_cuda_backend(CudaBackendOptions{.preload_kernels = preload});
    REQUIRE(b.has_value());
  }
  auto first = cuda::preload_kernel_modules();
  REQUIRE(first.has_value());
  auto again = cuda::preload_kernel_modules();
  REQUIRE(again.has_value());
}
