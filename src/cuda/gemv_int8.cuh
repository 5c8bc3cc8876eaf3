// Group-wise int8 weights on the GPU (W8A16): out[M, N] = x[M, K] @ dequant(w)[N, K]^T
// with w i8 [N, K] and scales f32 [N, ceil(K / group)], dequant(w)[n, k] =
// w[n, k] * scales[n, k / group] (core/quantize.hpp's layout); bf16 x, fp32
// accumulation, bf16 or f32 out. The CPU twin is the CPU backend's matmul
// with an i8 Weight (core/cpu_ops.hpp).
//
// launch_gemv_int8 (decode, 1 <= M <= kGemvInt8MaxRows): 16 .. 256 threads
// per output column n (as many as leave each at most eight chunks) stream
// w's row n once: 16-byte loads of 16 codes, all of a thread's in flight at
// once, evict-first, issued before pdl_wait(); one scale per 16 codes (the
// fast path, K and group multiples of 16) or per code (any K, group and
// alignment, one warp per column). Codes become floats in registers (byte
// permute + one subtract, exact), each 16-code dot with x (L1-resident) is
// scaled once.
// Bandwidth model: reads N*K bytes of codes + N*ceil(K/group)*4 of scales
// (3% of the codes at group 128) plus M*K*2 of x; writes M*N outputs. At
// M = 1 that is half the bytes of the bf16 GEMV.
//
// launch_dequantize_int8 (prefill and big batches, the caller then runs the
// bf16 cuBLASLt product on `out`): out bf16 [N, K] = dequant(w). Reads N*K
// bytes of codes + N*ceil(K/group)*4 of scales, writes N*K*2; with the bf16
// product after it (reads N*K*2 + M*K*2, writes M*N*2 or 4) a large-M int8
// matmul moves about 5*N*K bytes of weight traffic against 2*N*K for bf16
// weights: int8 buys memory there, not speed.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/cuda_status.hpp"

namespace photon::cuda {

// The largest M launch_gemv_int8 takes; larger M goes through
// launch_dequantize_int8 and cuBLASLt. (Two passes of 8 rows for M = 16
// measured 4.33 ms per Llama-3.2-1B decode step, where dequantize + cuBLASLt
// costs about 1.33 + 0.87 ms: docs/performance.md.)
constexpr int32_t kGemvInt8MaxRows = 8;

struct GemvInt8Args {
  void* out = nullptr;                 // [M, N], bf16 or f32 (out_f32)
  const __nv_bfloat16* x = nullptr;    // [M, K]
  const int8_t* w = nullptr;           // [N, K] codes
  const float* scales = nullptr;       // [N, ceil(K / group)]
  int32_t M = 0, N = 0, K = 0;
  int32_t group = 0;                   // > 0; the last group of a row shorter when it does not divide K
  bool out_f32 = false;
  bool accumulate = false;             // out (bf16) += the product, rounded once (matmul_add)
  // gemv_int8_skinny only: out[M, N] = silu(x @ w[:N]^T) * (x @ w[N:]^T), w [2N, K] and scales
  // [2N, groups] (matmul_silu; gate and up rounded to bf16 before SwiGLU); bf16 out, no accumulate.
  bool silu = false;
};

// Whether launch_gemv_int8 serves this product (1 <= M <= kGemvInt8MaxRows, N, K, group > 0, non-null pointers,
// a bf16 out to accumulate into).
bool gemv_int8_applies(const GemvInt8Args& a);
Status launch_gemv_int8(const GemvInt8Args& a, cudaStream_t stream);

struct DequantizeInt8Args {
  __nv_bfloat16* out = nullptr;        // [N, K]
  const int8_t* w = nullptr;           // [N, K] codes
  const float* scales = nullptr;       // [N, ceil(K / group)]
  int64_t N = 0;
  int32_t K = 0, group = 0;
};

Status launch_dequantize_int8(const DequantizeInt8Args& a, cudaStream_t stream);

}  // namespace photon::cuda
