// Single-row matrix products for decode: out[1, N] = x[1, K] @ w[N, K]^T,
// bf16 in, fp32 accumulation, bf16 or f32 out (the row count is a template
// parameter of the kernel; only 1 is dispatched: on the H200 a 4-row variant
// measured slower than cuBLASLt, a 4-sequence decode step 1.50 ms against
// 1.33 ms for 16 sequences through cuBLASLt). One warp
// (or, for small N, up to eight warps splitting K) per output column n
// streams w's row n once (16-byte loads, rounds of 4 or 8 in flight per lane,
// evict-first) and dots it with every x row (read through L1 by each warp, or
// staged in shared memory by each block: stage_x and the norm).
// Bandwidth model: reads N*K*2 bytes of weights (+ M*K*2 of x per block from
// L2), writes M*N outputs: at M = 1 the whole cost is the weight read.
//
// Norm (rmsnorm_matmul, rmsnorm_matmul_silu; their CPU twins are the CPU
// backend's rmsnorm then matmul / matmul_silu): x is the residual stream, and
// the product is of rmsnorm(x) * norm_w. Each block stages x * norm_w (bf16)
// in shared memory and forms x's sum of squares right after pdl_wait(), dots
// w with the staged row, and scales by rsqrt(mean(x^2) + eps) at the end (the
// rest fp32; the normed row is never stored). Replaces the norm kernel before
// the product; adds M*K*2 bytes of x and K*2 of norm weights read per block
// from L2, and K*M*2 bytes of shared memory per block (K*M <= 16384).
//
// Add mode (matmul_add; its CPU twin is the CPU backend's matmul_add): out is
// the residual stream [M, N] (bf16), updated in place, out = bf16(out +
// x @ w^T) with one rounding, replacing a separate add kernel and the round
// trip of the product. Also reads M*N*2 bytes of out.
//
// SwiGLU mode (matmul_silu; its CPU twin is the CPU backend's matmul_silu): w
// is [2N, K] (N gate rows, then N up rows) and out[M, N] (bf16) =
// silu(g) * u of each output's gate and up dot products, each rounded to bf16
// first as the plain product would store them; the warps of an output stream
// its gate row, then its up row, and apply SwiGLU in registers, replacing the
// silu_mul kernel and the [M, 2N] round trip. Reads 2*N*K*2 bytes of
// weights, writes M*N*2.
//
// RoPE epilogue (rmsnorm_qkv_attention's product at one decode token, norm
// folded, models without q/k norms; its CPU twin is the CPU backend's
// rmsnorm, matmul, then rope_qkv): w is the packed qkv projection [(nq +
// 2 nkv) * hd, K] and out is not written. Each block serves whole rotation
// pairs (columns j and j + hd/2 of a head), rounds both dot products to bf16
// as the product would store them, and does rope_qkv's work for them: q
// rotated into q_out, k rotated and v copied into the paged cache at the
// token's slot. Writes as many bytes as the plain product (N*2: q to q_out,
// k and v to the cache, or q only for a padding row) and reads hd/2 * 4 of
// inv_freq; replaces the rope_qkv kernel, which read and wrote N*2 more.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/cuda_status.hpp"

namespace photon::cuda {

constexpr int32_t kGemvMaxRows = 1;
// The x rows a block stages in shared memory (stage_x, a norm): M * K * 2 bytes at most this many.
constexpr int64_t kGemvMaxStagedBytes = 32 * 1024;

enum class GemvMode { plain, add, silu };

// The RoPE epilogue's destinations (see above; the fields as in rope_qkv.cuh's RopeQkvArgs at
// T = 1). q_out == nullptr: no RoPE epilogue.
struct GemvRope {
  __nv_bfloat16* q_out = nullptr;         // [nq, hd]
  __nv_bfloat16* k_cache = nullptr;       // [num_blocks, block_size, nkv, hd] rows, blocks kv_block_stride apart
  __nv_bfloat16* v_cache = nullptr;       // same shape
  const int32_t* position = nullptr;      // [1]
  const int32_t* slot = nullptr;          // [1]; negative or >= num_slots: no K/V write
  const float* inv_freq = nullptr;        // [hd / 2]
  int32_t num_q_heads = 0, num_kv_heads = 0, head_dim = 0;
  int64_t num_slots = 0;
  int32_t block_size = 0;       // tokens per KV block; needed with kv_block_stride
  int32_t kv_block_stride = 0;  // cache rows between consecutive blocks; 0: packed (row = slot)
};

struct GemvArgs {
  void* out = nullptr;                 // [M, N], bf16 or f32 (out_f32; bf16 for add, silu); never aliases x
  const __nv_bfloat16* x = nullptr;    // [M, K]
  const __nv_bfloat16* w = nullptr;    // [N, K]; silu: [2N, K]
  int32_t M = 0, N = 0, K = 0;
  bool out_f32 = false;
  GemvMode mode = GemvMode::plain;
  // Each lane's first round of weight loads (8 x 16 bytes of its column's first row) issued before
  // pdl_wait(), while the kernel before finishes (weights are never written by kernels); the
  // activations and the residual are read after it.
  bool early_weights = false;
  // With early_weights: split K over half as many warps as the plain kernel would (a grid half as
  // large, that fits in one wave at the early variant's 4 blocks per SM). A measurement knob
  // (PHOTON_CUDA_GEMV_EARLY_HALF_KS).
  bool early_half_ks = false;
  // With early_weights: how many of a lane's first round of 8 loads go out before pdl_wait() (the
  // rest right after it). Fewer put fewer bytes in flight ahead of the block's first dependent read
  // (x, after the wait) and ahead of the kernel before's release; 8: the whole round. A measurement
  // setting (CudaBackendOptions::gemv_early_chunks, 1-8).
  int32_t early_chunks = 8;
  // With early weights and x staged (stage_x or a norm): a lane's weight loads per round, 2, 4 or 8
  // (fewer bytes in flight over the grid, so a dependent read likely queues behind less; set per
  // product kind by CudaBackendOptions::gemv_unroll_*). Other launches use 8.
  int32_t unroll = 8;
  // Norm: x is normed first (see above); plain and silu modes.
  const __nv_bfloat16* norm_w = nullptr;  // [K]; nullptr: no norm
  float eps = 0.f;
  // Without a norm: x staged in shared memory by each block right after pdl_wait() (as the norm
  // stages x * norm_w) instead of read from L1 by every warp (CudaBackendOptions::gemv_stage_x).
  bool stage_x = false;
  // The RoPE epilogue (plain mode with a norm, bf16 out, N = (nq + 2 nkv) * hd, hd even).
  GemvRope rope{};
  // Group-wise int8 weights (W8A16, gemv_int8.cuh's layout) in place of w: codes w8 [N, K] (silu:
  // [2N, K]) and f32 scales [rows, K / group]; each 16-byte load is 16 codes of one group, dotted
  // with two staged x chunks and scaled once. Needs x staged (stage_x or a norm), K % 16 == 0 and
  // a power-of-two group >= 16 dividing K; one warp per column, rounds of 4 loads per lane.
  // Reads N*K bytes of codes + N*K/group*4 of scales (about half the bf16 bytes at group 128).
  const int8_t* w8 = nullptr;
  const float* scales = nullptr;
  int32_t group = 0;
  // > 0: a product of one row with a norm in plain mode whose rows are a multiple of 64 16-byte
  // chunks (bf16 K % 512 == 0, int8 K % 1024 == 0) runs as at most this many blocks, each staging x
  // once and streaming many column groups with the next tile of loads in flight through each
  // column's epilogue (gemv.cu, gemv_passes_kernel; CudaBackendOptions::gemv_passes_*). Other
  // launches ignore it. Results are bit-identical either way.
  int32_t passes_grid = 0;
  // The LM head screen (docs/lm-head-screen.md; the passes launch with int8 weights, f32 out and
  // K <= 8192 only): y = bf16(x * norm_w) is quantized to int16 at one scale sx = max|y| / 32767
  // (qx = round(y / sx)), out[n] = r * sx * sum over groups of scale * (codes . qx) (exact int32
  // dot products, __dp2a), and bound[n] = screen_bound(r, sx, max|y|, sum over the column's 16-code
  // chunks of scale * sum |qx|, row_abs[n]) >= |out[n] - the bf16 product over the weights the codes
  // quantize| for the fp32 values both kernels compute. Reads N * 4 bytes of row_abs more, writes
  // N * 4 of bounds more; shared memory K * 9 / 4 bytes more per block.
  float* bound = nullptr;
  const float* row_abs = nullptr;  // [N]: >= sum over row n of |w| (the bf16 values the codes quantize)
};

// The screen's bound (docs/lm-head-screen.md) for the norm scale r, x's int8 scale sx and max |y|,
// a column's sum over chunks of scale * sum |qx| (qsum) and its row's sum of |w| (wabs): with
// y - sx qx at most sx / 2 and w - scale q at most scale / 2 per element,
//   |sum w y - sum (scale q)(sx qx)| <= sum |w| |y - sx qx| + sum |w - scale q| |sx qx|
//                                     <= sx / 2 wabs + sx / 2 qsum,
// times r; plus 2^-12 r wabs max|y| (>= 2^-12 r sum |w y|, which covers the fp32 rounding of both
// products, each within ~(64 + 5) 2^-24 of that sum), all times 1 + 2^-10 for this formula's own
// rounding.
constexpr int64_t kScreenMaxStagedBytes = 16 * 1024;  // K * 2: the staged row and its int16 copy fit 48 KiB
#if defined(__CUDACC__)
__host__ __device__
#endif
inline float screen_bound(float r, float sx, float ymax, float qsum, float wabs) {
  return r * (0.5f * sx * (wabs + qsum) + wabs * ymax * (1.f / 4096.f)) * (1.f + 1.f / 1024.f);
}

// Whether the GEMV kernel serves this product (M <= kGemvMaxRows, K % 8 == 0, 16-byte aligned x and w;
// add, silu: a bf16 out; norm: plain or silu mode, 16-byte aligned norm weights; norm or stage_x:
// M*K <= 16384; rope: as above; w8: as above, with w null and x staged).
bool gemv_applies(const GemvArgs& a);
// Whether a launch that gemv_applies serves runs as gemv_passes_kernel (GemvArgs::passes_grid).
bool gemv_passes_applies(const GemvArgs& a);
Status launch_gemv(const GemvArgs& a, cudaStream_t stream);

}  // namespace photon::cuda
