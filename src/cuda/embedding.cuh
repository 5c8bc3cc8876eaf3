// Embedding gather: out[t, :] = table[ids[t], :].
// Bandwidth model: reads T*H*2 bytes of table rows and writes T*H*2 bytes.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/cuda_status.hpp"

namespace photon::cuda {

struct EmbeddingArgs {
  __nv_bfloat16* out = nullptr;          // [T, H]
  const __nv_bfloat16* table = nullptr;  // [V, H]
  const int32_t* ids = nullptr;          // [T] device; ids outside [0, V) give a NaN row
  int32_t num_tokens = 0;                // T
  int32_t hidden = 0;                    // H
  int32_t vocab = 0;                     // V
};

// Preconditions: T >= 0, H > 0. Vectorized when H % 8 == 0 and pointers are 16-byte aligned.
Status launch_embedding(const EmbeddingArgs& a, cudaStream_t stream);

}  // namespace photon::cuda
