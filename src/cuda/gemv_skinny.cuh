// Skinny matrix products for decode batches on tensor cores, built like the
// one-row GEMV: out[M, N] (=, or += in add mode) x[M, K] @ w[N, K]^T for
// 1 <= M <= 16, bf16 in, fp32 accumulation, bf16 or f32 out (the GemvArgs
// contract of gemv.cuh; plain, add and SwiGLU modes).
//
// The default for these shapes (docs/performance.md, rows 34, 37 and 39). Why
// another kernel: at 16 rows cuBLASLt's kernels for the small layer matrices
// (qkv, o, down) and the earlier tensor-core kernels (gemv_mma, gemv_tc) all
// ran on too few CTAs with too few bytes in flight (0.73 waves, DRAM at
// 29-36% of peak under ncu). Here every 16 weight rows get their own block
// (16 warps when the grid fits one wave, else 8 at two blocks per SM), so
// N = 2048 already gives 128 blocks, one per SM, each with 64 KB of weight
// loads in flight. Measured per kernel it streams about as fast as cuBLASLt
// (116 registers allow one 16-warp block per SM); in a step it is faster
// through programmatic dependent launch and no split-K reduce:
//  * "swap AB" mma.sync m16n8k16: the block's 16 weight rows fill the MMA's
//    M dimension, the activation rows (8 or 16) its n dimension;
//  * warp w takes the 32-k chunks c = w, w + W, ... of K; lane (g, t) loads
//    16 bytes (8 k) of weight rows g and g + 8 per chunk straight into
//    registers (evict-first, 4 chunks in flight, each slot refilled right
//    after its MMAs; the first 4 chunks' weights before pdl_wait(), while the
//    kernel before finishes), and the same 8 k of activation rows g (and
//    g + 8) from L2/L1. Physical k 8t..8t+3 feed the logical k {2t, 2t+1,
//    2t+8, 2t+9} of one MMA and 8t+4..8t+7 of the next: the sum over k does
//    not care about the order as long as A and B agree;
//  * the W warps' partial 16 x 16 tiles meet in shared memory; the epilogue
//    writes (or adds into) out;
//  * SwiGLU mode (matmul_silu; w is [2N, K], gate rows then up rows): each
//    block streams the gate rows and the up rows of its 16 outputs, a chunk's
//    activation fragments feeding both products, 2 chunks in flight per warp
//    (the same weight bytes as 4 of one matrix); the epilogue writes
//    silu(g) * u with g and u rounded to bf16 first, as the unfused product
//    stores them. No [M, 2N] round trip and no silu_mul kernel: Llama-3.2-1B
//    B = 16 1.067-1.076 -> 1.032-1.034 ms/step (row 39).
// Bandwidth model: reads N*K*2 bytes of weights once (SwiGLU: 2*N*K*2) and
// M*K*2 bytes of x per block (from L2), writes M*N outputs (add mode also
// reads them).
// sm_80+ (mma.sync); launched with PDL.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/cuda_status.hpp"
#include "cuda/gemv.cuh"

namespace photon::cuda {

// One row: the backend's one-row policy puts Llama-3.2-1B's qkv, o and gate_up + SwiGLU on it
// (docs/performance.md, row 41); the 7 other activation rows of the MMA are zeros.
constexpr int32_t kGemvSkinnyMinRows = 1;
constexpr int32_t kGemvSkinnyMaxRows = 16;

// Whether the kernel serves this product: kGemvSkinnyMinRows <= M <= kGemvSkinnyMaxRows,
// K % 8 == 0, 16-byte aligned x and w, plain or add mode (add: bf16 out).
bool gemv_skinny_applies(const GemvArgs& a);
// num_sms: the device's multiprocessor count (16 warps per block when the grid fits one wave, else 8).
Status launch_gemv_skinny(const GemvArgs& a, int32_t num_sms, cudaStream_t stream);

}  // namespace photon::cuda
