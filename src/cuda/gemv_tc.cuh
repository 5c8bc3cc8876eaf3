// Few-row matrix products for decode batches on tensor cores, with the MMA
// fragments loaded straight from global memory into registers:
// out[M, N] = x[M, K] @ w[N, K]^T for 2 <= M <= kGemvTcMaxRows, bf16 in,
// fp32 accumulation, bf16 or f32 out (the GemvArgs contract of gemv.cuh).
//
// At these M the product is bound by the weight read, so the kernel keeps the
// M = 1 GEMV's streaming shape (gemv.cu): every warp streams its own weight
// rows with 16-byte evict-first loads, several in flight per lane, no shared
// memory staging and no block barrier in the loop. A warp owns 16 weight
// rows; per 32-k chunk each lane loads 8 consecutive k of row g and of row
// g + 8 (g = lane / 4) and feeds them to two mma.sync m16n8k16 as A
// fragments. The MMA sums over k in any order as long as A and B agree, so
// lane t of a quad takes physical k 8t..8t+3 (first MMA) and 8t+4..8t+7
// (second) in the fragment slots of logical k {2t, 2t+1, 2t+8, 2t+9}; its B
// fragment is the same 8 k of activation row g (x from L1/L2, zero for rows
// >= M). 8 activation rows per n-tile, 1, 2 or 4 tiles (M <= 8, 16, 32).
// When N / 16 row groups give too few warps to keep DRAM busy, up to 8 warps
// of a block split K and add their accumulators in shared memory.
// Bandwidth model: reads N*K*2 bytes of weights once plus M*K*2 bytes of x per
// 16-row group (L1/L2 hits after the first), writes M*N outputs. Tensor-core
// work: 2 * ceil(M / 8) mma.sync per 16 x 32 weight tile (N*K*ceil(M/8)/256 in
// all), far below the weight stream's time at these M.
// sm_80+ (mma.sync); programmatic dependent launch on sm_90.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/cuda_status.hpp"
#include "cuda/gemv.cuh"

namespace photon::cuda {

constexpr int32_t kGemvTcMinRows = 2;
constexpr int32_t kGemvTcMaxRows = 32;

// Whether the kernel serves this product (kGemvTcMinRows <= M <= kGemvTcMaxRows,
// K % 8 == 0, 16-byte aligned x and w). Depends on the shapes only.
bool gemv_tc_applies(const GemvArgs& a);

Status launch_gemv_tc(const GemvArgs& a, cudaStream_t stream);

}  // namespace photon::cuda
