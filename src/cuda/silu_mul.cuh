// SwiGLU activation: out[t, i] = silu(gate_up[t, i]) * gate_up[t, I + i].
// Bandwidth model: reads T*2I*2 bytes, writes T*I*2 bytes.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/cuda_status.hpp"

namespace photon::cuda {

struct SiluMulArgs {
  __nv_bfloat16* out = nullptr;            // [T, I]
  const __nv_bfloat16* gate_up = nullptr;  // [T, 2I]: gate columns, then up columns
  int32_t num_tokens = 0;                  // T
  int32_t inter = 0;                       // I
};

// Vectorized when I % 8 == 0 and both pointers are 16-byte aligned.
Status launch_silu_mul(const SiluMulArgs& a, cudaStream_t stream);

}  // namespace photon::cuda
