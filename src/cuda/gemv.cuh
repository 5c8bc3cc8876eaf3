// Single-row matrix products for decode: out[1, N] = x[1, K] @ w[N, K]^T,
// bf16 in, fp32 accumulation, bf16 or f32 out (the row count is a template
// parameter of the kernel; only 1 is dispatched: on the H200 a 4-row variant
// measured slower than cuBLASLt, a 4-sequence decode step 1.50 ms against
// 1.33 ms for 16 sequences through cuBLASLt). One warp
// (or, for small N, up to eight warps splitting K) per output column n
// streams w's row n once (16-byte loads, eight in flight per lane,
// evict-first) and dots it with every x row (L1-resident).
// Bandwidth model: reads N*K*2 bytes of weights (+ M*K*2 of x), writes M*N
// outputs: at M = 1 the whole cost is the weight read.
//
// Optional prologues (decode: they replace a separate kernel each and the
// round trip of its output) build the x rows in shared memory first, every
// block from the inputs in L2:
//  * add_rmsnorm: residual[M, K] += x[M, K] (stored bf16, written once, by
//    the last block to arrive, through the zeroed `arrivals` counter), then
//    the rows rmsnorm(residual) * norm_w, bit-identical to the add_rmsnorm
//    kernel's output. Per block it reads 4*M*K bytes (+ the norm weight);
//    DRAM traffic is the weights' plus one 2*M*K residual write.
//  * silu_mul: x is gate_up [M, 2K]; rows silu(x[:, :K]) * x[:, K:] as the
//    silu_mul kernel forms them. Per block it reads 4*M*K bytes.
// A prologue needs a bf16 output and M*K*2 <= 40 KiB of staged rows.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/cuda_status.hpp"

namespace photon::cuda {

constexpr int32_t kGemvMaxRows = 1;

enum class GemvPrologue { none, add_rmsnorm, silu_mul };

struct GemvArgs {
  void* out = nullptr;                 // [M, N], bf16 or f32 (out_f32); never aliases x or residual
  const __nv_bfloat16* x = nullptr;    // [M, K] ([M, 2K] gate_up for silu_mul)
  const __nv_bfloat16* w = nullptr;    // [N, K]
  int32_t M = 0, N = 0, K = 0;
  bool out_f32 = false;
  GemvPrologue prologue = GemvPrologue::none;
  // add_rmsnorm only:
  __nv_bfloat16* residual = nullptr;   // [M, K], updated in place; may alias x
  const void* norm_w = nullptr;        // [K], bf16, or f32 when norm_f32
  bool norm_f32 = false;
  float eps = 1e-6f;
  unsigned* arrivals = nullptr;        // one device counter, zero before the launch (left zero); one launch at a time
};

// Whether the GEMV kernel serves this product (M <= kGemvMaxRows, K % 8 == 0, 16-byte aligned x and w;
// a prologue's needs above, its norm weight aligned to 16 bytes (bf16) or 32 (f32)).
bool gemv_applies(const GemvArgs& a);
Status launch_gemv(const GemvArgs& a, cudaStream_t stream);

}  // namespace photon::cuda
