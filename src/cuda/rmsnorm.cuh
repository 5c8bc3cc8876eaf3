// RMSNorm of the decoder layers (the residual add happens in the o and down
// projections' epilogues, matmul_add):
//   out[r, :] = x[r, :] * rsqrt(mean(x[r, :]^2) + eps) * w
// fp32 accumulation. Bandwidth model: reads 2*rows*H + writes 2*rows*H bytes;
// w (2 or 4 * H bytes) is read once per row from L2.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/cuda_status.hpp"

namespace photon::cuda {

struct RmsNormArgs {
  __nv_bfloat16* out = nullptr;       // [rows, H]; may alias x
  const __nv_bfloat16* x = nullptr;   // [rows, H]
  const void* weight = nullptr;       // [H], bf16, or f32 when weight_f32
  bool weight_f32 = false;
  int32_t rows = 0;
  int32_t hidden = 0;                 // H
  float eps = 1e-6f;
};

// Preconditions: rows >= 0, H > 0. Vectorized when H % 8 == 0 and every pointer is 16-byte aligned.
Status launch_rmsnorm(const RmsNormArgs& a, cudaStream_t stream);

}  // namespace photon::cuda
