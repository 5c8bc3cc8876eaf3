// Few-row matrix products for decode batches on tensor cores:
// out[M, N] = x[M, K] @ w[N, K]^T for 2 <= M <= kGemvMmaMaxRows, bf16 in,
// fp32 accumulation, bf16 or f32 out (the GemvArgs contract of gemv.cuh).
//
// At these M the product is bound by the weight read (each weight byte is
// used M times), so the kernel streams every weight row block once:
//  * "swap AB" mma.sync m16n8k16: 16 weight rows fill the MMA's M dimension,
//    the activation rows (padded to 8, 16, 32 or 64) its n dimension;
//  * a block of 8 warps owns 128 weight rows; each warp copies its own 16 rows
//    (64 k per stage) into shared memory with cp.async (evict-first), four
//    stages deep, and reads back exactly the bytes it copied, so the weight
//    tiles need no swizzle and no ldmatrix; the block shares one x tile per stage;
//  * when N / 128 blocks are too few to keep DRAM busy, a cluster of KC = 2, 4
//    or 8 blocks splits K and adds its partial tiles over distributed shared
//    memory (no workspace, no second launch).
// Bandwidth model: reads N*K*2 bytes of weights once, M*K*2 bytes of x once
// per 128-row block (from L2), writes M*N outputs.
// sm_90+ only (clusters); the caller checks the compute capability.
// Dispatched only when CudaBackendOptions::mma_decode_matmul is set (bench:
// --mma-decode-matmul true): on the H200 it measured slower than cuBLASLt at
// every M from 2 to 64 (docs/performance.md, change 14): at M <= 8 it streams
// weights below cuBLASLt's rate, and each further 8 rows adds mma.sync time
// that the per-stage pipeline does not hide.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/cuda_status.hpp"
#include "cuda/gemv.cuh"

namespace photon::cuda {

constexpr int32_t kGemvMmaMinRows = 2;
constexpr int32_t kGemvMmaMaxRows = 64;

// Whether the kernel serves this product (kGemvMmaMinRows <= M <= kGemvMmaMaxRows,
// K % 8 == 0, 16-byte aligned x and w). Depends on the shapes only.
bool gemv_mma_applies(const GemvArgs& a);

// num_sms: the device's multiprocessor count (sizes the K split).
Status launch_gemv_mma(const GemvArgs& a, int32_t num_sms, cudaStream_t stream);

}  // namespace photon::cuda
