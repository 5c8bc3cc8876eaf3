// Group-wise int8 weights (W8A16) for decode batches on tensor cores, built
// like gemv_skinny: out[M, N] (=, or += when accumulate) x[M, K] @ dequant(w)[N, K]^T
// for 1 <= M <= 16 (GemvInt8Args, gemv_int8.cuh's layout: codes i8 [N, K], scales f32
// [N, ceil(K / group)]); one row where CudaBackendOptions::int8_skinny_one_row asks.
//
// The default for these shapes with skinny_decode_matmul (docs/performance.md,
// row 40): it replaces the int8 GEMV of 2..8-row products (too few bytes in
// flight per row of codes) and the dequantize-to-bf16 + cuBLASLt path of
// 9..16-row ones, which moves ~5 N K bytes per matmul, by one that streams
// the N K code bytes once. Llama-3.2-1B --int8, B = 2 / 4 / 8 / 16:
// 1.009 / 1.547 / 2.717 / 1.948 -> 0.824 / 0.860 / 0.904 / 1.083 ms/step.
//  * a block per 16 weight rows; warp w takes the 64-k chunks w, w + W, ...;
//    lane (g, t) loads 16 codes (k 16t..16t+15 of the chunk) of rows g and
//    g + 8 (evict-first, the first round before pdl_wait()) and the 16
//    matching bf16 of each activation row g (+ 8);
//  * codes become bf16 exactly (byte permute into 2^23 + b + 128, one
//    subtract, a bf16x2 pack), four mma.sync m16n8k16 per chunk (physical k
//    16t + 4j + {0..3} in the logical k slots {2t, 2t+1, 2t+8, 2t+9} of MMA
//    j, the same map for codes and activations), and the chunk's sum is
//    scaled once per row in fp32 (a chunk lies inside one group: K and group
//    are multiples of 64);
//  * the warps' partial 16 x 16 tiles meet in shared memory.
// Bandwidth model: reads N*K code bytes + N*ceil(K/group)*4 scale bytes once,
// M*K*2 bytes of x per block (L2), writes M*N outputs (accumulate reads them).
// sm_80+; launched with PDL.
#pragma once

#include <cstdint>

#include "cuda/cuda_status.hpp"
#include "cuda/gemv_int8.cuh"

namespace photon::cuda {

// One row only where the backend asks for it (CudaBackendOptions::int8_skinny_one_row).
constexpr int32_t kGemvInt8SkinnyMinRows = 1;
constexpr int32_t kGemvInt8SkinnyMaxRows = 16;

// Whether launch_gemv_int8_skinny serves this product: 1 <= M <= 16, K and group multiples of 64,
// 16-byte aligned codes and x, non-null pointers, bf16 out to accumulate into.
bool gemv_int8_skinny_applies(const GemvInt8Args& a);
// num_sms: the device's multiprocessor count (16 warps per block when the grid fits one wave, else 8).
Status launch_gemv_int8_skinny(const GemvInt8Args& a, int32_t num_sms, cudaStream_t stream);

}  // namespace photon::cuda
