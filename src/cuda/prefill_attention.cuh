// Paged prefill attention (FlashAttention-2 style) over a ragged batch: each
// sequence's new query tokens attend causally to its cached keys/values,
// which include earlier chunks and prefix-cache hits (chunked prefill), and
// decode tokens mixed into the same step are served too. Rows of a tile are
// (token, query head) pairs of one KV head's group, so grouped heads share
// every K/V tile they load. Tensor cores (mma.sync bf16, fp32 accumulate),
// K/V tiles double-buffered in shared memory through cp.async.
// Bandwidth model: per tile of 64 rows, reads its query rows and K/V of keys
// 0..max position in the tile (hd*2 bytes each per KV head), writes the rows'
// outputs: at least T*nq*hd*2*2 + S*nkv*ctx*hd*2*2 bytes.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/cuda_status.hpp"

namespace photon::cuda {

// Rows (token x query head of one group) per thread block.
constexpr int32_t kPrefillTileRows = 64;

struct PrefillAttentionArgs {
  __nv_bfloat16* out = nullptr;            // [T, nq, hd]
  const __nv_bfloat16* q = nullptr;        // [T, nq, hd]
  const __nv_bfloat16* k_cache = nullptr;  // [num_blocks, block_size, nkv, hd] rows, blocks kv_block_stride apart
  const __nv_bfloat16* v_cache = nullptr;  // same shape
  const int32_t* query_start = nullptr;    // [S + 1]
  const int32_t* positions = nullptr;      // [T]; ascending within a sequence, < its context length
  const int32_t* context_lens = nullptr;   // [S]
  const int32_t* block_tables = nullptr;   // [S, max_blocks_per_seq]
  int32_t num_seqs = 0;                    // S
  int32_t num_q_heads = 0;                 // nq (a multiple of nkv)
  int32_t num_kv_heads = 0;                // nkv
  int32_t head_dim = 0;                    // hd: 16, 32, 64, 128 or 256
  int32_t block_size = 0;
  int32_t kv_block_stride = 0;             // cache rows between consecutive blocks; 0: block_size (packed)
  int32_t max_blocks_per_seq = 0;
  int32_t num_tiles = 0;                   // sum over s of ceil(query_len(s) * (nq / nkv) / kPrefillTileRows)
  float scale = 1.f;
};

Status launch_prefill_attention(const PrefillAttentionArgs& a, cudaStream_t stream);

}  // namespace photon::cuda
