// Row gather: out[r, :] = x[rows[r], :] (the logits rows of a step).
// Bandwidth model: reads and writes R*row_bytes each.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/cuda_status.hpp"

namespace photon::cuda {

struct GatherRowsArgs {
  void* out = nullptr;             // [R, row_bytes]
  const void* x = nullptr;         // [T, row_bytes]
  const int32_t* rows = nullptr;   // [R] device, each in [0, T); others give a zero row
  int32_t num_rows = 0;            // R
  int32_t num_src_rows = 0;        // T
  int64_t row_bytes = 0;           // a multiple of 2
};

Status launch_gather_rows(const GatherRowsArgs& a, cudaStream_t stream);

}  // namespace photon::cuda
