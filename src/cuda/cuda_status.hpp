// CUDA / cuBLAS failures as photon errors. Host-only; included by both .cpp
// and .cu files of src/cuda (and by nothing outside it).
//
// Every CUDA runtime call in src/cuda goes through PHOTON_CUDA_TRY, which
// returns Errc::cuda_error with the failing expression, file and line; a
// kernel launch is followed by PHOTON_CUDA_CHECK_LAUNCH(). Nothing aborts.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "core/try.hpp"
#include "photon/result.hpp"

namespace photon::cuda {

// What every launcher and host helper of src/cuda returns.
using Status = Result<void>;

// Errc::cuda_error naming the call, the CUDA error and where it happened.
Unexpected cuda_failure(cudaError_t err, const char* expr, const char* file, int line);
// Errc::invalid_argument for a broken launch precondition of `what` (a kernel or op name).
Unexpected bad_launch(const char* what, const std::string& why);

}  // namespace photon::cuda

#define PHOTON_CUDA_TRY(expr)                                                     \
  do {                                                                            \
    const cudaError_t photon_cuda_err_ = (expr);                                  \
    if (photon_cuda_err_ != cudaSuccess)                                          \
      return ::photon::cuda::cuda_failure(photon_cuda_err_, #expr, __FILE__, __LINE__); \
  } while (0)

// After a <<<...>>> launch: a bad configuration or an earlier asynchronous
// fault surfaces here.
#define PHOTON_CUDA_CHECK_LAUNCH() PHOTON_CUDA_TRY(cudaGetLastError())
