// rope_qkv: from the packed qkv projection of each token, optional per-head
// RMSNorm of q and k (Qwen3's q_norm / k_norm), rotate-half RoPE of q and k
// at the token's position, q written out and k, v written into the paged KV
// cache at the token's slot. One fused pass.
// Bandwidth model: reads T*(nq + 2 nkv)*hd*2 bytes, writes the same amount
// (q to q_out, k and v to the cache); norm weights and inv_freq are cached.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/cuda_status.hpp"

namespace photon::cuda {

struct RopeQkvArgs {
  __nv_bfloat16* q_out = nullptr;        // [T, nq, hd]
  const __nv_bfloat16* qkv = nullptr;    // [T, (nq + 2 nkv) * hd]: q heads, then k heads, then v heads
  __nv_bfloat16* k_cache = nullptr;      // [num_blocks, block_size, nkv, hd] rows, blocks kv_block_stride apart
  __nv_bfloat16* v_cache = nullptr;      // same shape
  const int32_t* positions = nullptr;    // [T]
  const int32_t* slot_mapping = nullptr; // [T]; a negative slot (batch padding) writes no K/V
  const float* inv_freq = nullptr;       // [hd / 2]
  const void* q_norm = nullptr;          // [hd] or null; bf16, or f32 when norm_f32
  const void* k_norm = nullptr;          // [hd] or null
  bool norm_f32 = false;
  int32_t num_tokens = 0;                // T
  int32_t num_q_heads = 0;               // nq
  int32_t num_kv_heads = 0;              // nkv
  int32_t head_dim = 0;                  // hd: even, <= 256
  int64_t num_slots = 0;                 // slots >= num_slots are rejected by the kernel (no write)
  int32_t block_size = 0;                // tokens per KV block; needed with kv_block_stride
  int32_t kv_block_stride = 0;           // cache rows between consecutive blocks; 0: packed (row = slot)
  float eps = 1e-6f;
};

Status launch_rope_qkv(const RopeQkvArgs& a, cudaStream_t stream);

}  // namespace photon::cuda
