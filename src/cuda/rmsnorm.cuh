// RMSNorm and the fused residual-add + RMSNorm of the decoder layers.
//   plain:  out[r, :] = x[r, :] * rsqrt(mean(x[r, :]^2) + eps) * w
//   fused:  residual[r, :] += x[r, :] (rounded to bf16); out[r, :] = rmsnorm(residual[r, :]) * w
// fp32 accumulation; the fused form normalizes the bf16-rounded sum it stores.
// Bandwidth model: plain reads 2*rows*H + writes 2*rows*H bytes; fused reads
// 4*rows*H (x, residual) and writes 4*rows*H (residual, out); w is cached.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/cuda_status.hpp"

namespace photon::cuda {

struct RmsNormArgs {
  __nv_bfloat16* out = nullptr;       // [rows, H]; may alias x or residual
  const __nv_bfloat16* x = nullptr;   // [rows, H]
  __nv_bfloat16* residual = nullptr;  // [rows, H] or null (plain RMSNorm)
  const void* weight = nullptr;       // [H], bf16, or f32 when weight_f32
  bool weight_f32 = false;
  int32_t rows = 0;
  int32_t hidden = 0;                 // H
  float eps = 1e-6f;
};

// Preconditions: rows >= 0, H > 0. Vectorized when H % 8 == 0 and every pointer is 16-byte aligned.
Status launch_rmsnorm(const RmsNormArgs& a, cudaStream_t stream);

}  // namespace photon::cuda
