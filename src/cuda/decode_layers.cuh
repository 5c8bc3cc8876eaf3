// Persistent single-sequence decode: every decoder layer of one decode step
// (one token, one sequence) in one kernel of one CTA per SM (sm_90), the
// design of docs/persistent-decode.md.
//
// Per CTA, one producer warp streams this CTA's share of every layer's
// weights (qkv, o, gate_up, down, layer after layer) into a ring of
// shared-memory stages with bulk copies (cp.async.bulk, evict-first), gated
// only by free stages; eight consumer warps walk the layer's phases,
//   qkv:       h = rmsnorm(x) in shared memory; qkv rows of this CTA
//   attention: items (KV head, context split): q/k norm and RoPE of the
//              current token, K/V written into the cache, online softmax,
//              partials to global memory
//   o:         the splits merged into attn (each CTA, in shared memory);
//              x rows of this CTA += attn @ Wo^T
//   gate_up:   h = rmsnorm(x); mlp rows of this CTA = silu(gate) * up
//   down:      x rows of this CTA += mlp @ Wdown^T
// with a grid barrier after each phase. The weights of the next phases are
// therefore in flight while the CTAs wait at a barrier or run attention,
// which separate kernels cannot do (docs/performance.md rows 18, 21, 26).
// Measured slower than the per-op kernels on the H200 (row 30: its barriers
// cost what kernel boundaries do under a saturated DRAM), so the backend runs
// it only when CudaBackendOptions::persistent_decode is set.
// Rounding points are the per-op kernels': q (after RoPE), K, V, attn, the
// residual after each add, qkv, gate and up, mlp are bf16; all sums fp32.
//
// Bytes: reads every layer's weights once (the model's layer bytes), x and
// mlp once per CTA per use from L2 (132 x (2H + I) x 2 bytes per layer), the
// context's K/V once (2 x ctx x nkv x hd x 2 bytes per layer); writes qkv,
// mlp, x and the attention partials (nq x splits x (hd + 4) x 4 bytes).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/cuda_status.hpp"

namespace photon::cuda {

// One layer's device pointers (bf16), as decode_layers reads them.
struct DecodeLayerPtrs {
  const __nv_bfloat16* qkv_w = nullptr;      // [(nq + 2 nkv) * hd, H]
  const __nv_bfloat16* o_w = nullptr;        // [H, nq * hd]
  const __nv_bfloat16* gate_up_w = nullptr;  // [2 I, H]: gate rows, then up rows
  const __nv_bfloat16* down_w = nullptr;     // [H, I]
  const __nv_bfloat16* input_norm = nullptr; // [H]
  const __nv_bfloat16* post_norm = nullptr;  // [H]
  const __nv_bfloat16* q_norm = nullptr;     // [hd] or null
  const __nv_bfloat16* k_norm = nullptr;     // [hd] or null
  __nv_bfloat16* k_cache = nullptr;          // [num_blocks, block_size, nkv, hd] rows, blocks kv_block_stride apart
  __nv_bfloat16* v_cache = nullptr;          // same shape
};

inline constexpr int kDecodeLayersMaxSplits = 16;  // context splits per KV head
inline constexpr int kDecodeLayersMaxLayers = 128;

// Passed by value (kernel parameters, ~10 KB: CUDA 12.1+), so a captured graph holds the layer
// pointers and nothing needs uploading before a capture.
struct DecodeLayersArgs {
  DecodeLayerPtrs layers[kDecodeLayersMaxLayers];
  int32_t num_layers = 0;
  __nv_bfloat16* x = nullptr;      // [H]: the residual stream, in and out
  __nv_bfloat16* qkv = nullptr;    // [(nq + 2 nkv) * hd] scratch
  __nv_bfloat16* mlp = nullptr;    // [I] scratch
  float* partials = nullptr;       // [nq, kDecodeLayersMaxSplits, hd + 4] scratch
  unsigned* sync = nullptr;        // [2]: grid barrier and exit counters; zero between launches (each launch resets them)
  const int32_t* positions = nullptr;     // [1]
  const int32_t* context_lens = nullptr;  // [1]: the token sits at position ctx - 1
  const int32_t* block_tables = nullptr;  // [1, >= ceil(ctx / block_size)]
  const int32_t* slot_mapping = nullptr;  // [1]; negative or >= num_slots: no K/V write
  const float* inv_freq = nullptr;        // [hd / 2]
  int32_t hidden = 0;         // H
  int32_t intermediate = 0;   // I
  int32_t num_q_heads = 0;    // nq
  int32_t num_kv_heads = 0;   // nkv
  int32_t head_dim = 0;       // 64 or 128
  int32_t block_size = 0;
  int32_t kv_block_stride = 0;  // cache rows between consecutive blocks (every layer's); 0: block_size (packed)
  int64_t num_slots = 0;
  float eps = 1e-6f;
  float scale = 1.f;          // softmax scale
  // Measurement only (tests/bench/decode_layers_bench.cpp), null / 0 in the backend:
  // trace[cta][layer][kDecodeLayersTraceEvents] globaltimer stamps (ns) of the phase boundaries,
  // and flags that leave work out (kDecodeLayersSkipDot, kDecodeLayersSkipAttention).
  long long* trace = nullptr;
  int32_t flags = 0;
  // Weight loads the producer keeps in flight, in ring stages: before issuing stage load s it waits
  // until load s - max_in_flight has landed. 0: no cap (every free stage in flight). Landed,
  // unconsumed stages still fill the ring; the cap bounds only the requests queued in the memory
  // system ahead of the consumers' own accesses (docs/persistent-decode.md, "weight queue's depth").
  int32_t max_in_flight = 0;
};

inline constexpr int kDecodeLayersTraceEvents = 20;  // 16 consumer phase stamps, 4 producer stamps per layer
inline constexpr int kDecodeLayersSkipDot = 1;        // consumers free each stage without reading it
inline constexpr int kDecodeLayersSkipAttention = 2;  // attention items write empty partials

// Whether the kernel serves these shapes on a device of compute capability `major` with num_sms SMs:
// sm_90+, hd 64 or 128, nq a multiple of nkv with at most 8 query heads per KV head,
// H and I multiples of 8, and the shared-memory ring holding at least 4 stages.
bool decode_layers_applies(int32_t major, int32_t num_sms, int32_t hidden, int32_t intermediate, int32_t num_q_heads,
                           int32_t num_kv_heads, int32_t head_dim);
// Floats of the `partials` scratch.
int64_t decode_layers_partial_floats(int32_t num_q_heads, int32_t head_dim);

// One CTA per SM of the current device (num_sms of them). a.sync must be zero (it is after
// every completed launch).
Status launch_decode_layers(const DecodeLayersArgs& a, int32_t num_sms, cudaStream_t stream);

}  // namespace photon::cuda
