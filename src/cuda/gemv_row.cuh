// The one-row GEMV's per-row arithmetic, shared by gemv.cu and the screened
// sampler (sampling_screened.cu), which recomputes a few of the GEMV's
// columns and must get the GEMV's values bit for bit: the staging of
// x * norm_w with x's sum of squares, and the dot product of one 16-byte
// weight chunk with the staged row. Include only from .cu files.
#pragma once

#include "cuda/common.cuh"

namespace photon::cuda::gemv_row {

// One 16-byte chunk of y = bf16(x * norm_w) from x's chunk xv and the norm weights' gv (8 bf16
// each); adds the chunk's squares of x to ss.
__device__ __forceinline__ uint4 normed_chunk(const uint4& xv, const uint4& gv, float& ss) {
  float xf[8];
  unpack_bf16x8(xv, xf);
#pragma unroll
  for (int e = 0; e < 8; ++e) ss += xf[e] * xf[e];
  uint4 p;
  const bf162* xh = reinterpret_cast<const bf162*>(&xv);
  const bf162* gh = reinterpret_cast<const bf162*>(&gv);
  bf162* ph = reinterpret_cast<bf162*>(&p);
#pragma unroll
  for (int k = 0; k < 4; ++k) ph[k] = __hmul2(xh[k], gh[k]);
  return p;
}

// Row x [K] (bf16) staged as y = bf16(x * norm_w) into staged[0 .. K / 8) by a block of THREADS
// threads (thread t takes chunks t, t + THREADS, ...; K % 8 == 0, 16-byte aligned x and norm_w);
// returns, in every lane, the warp's share of x's sum of squares. The caller's barrier makes the
// staged values visible. Reads K * 2 bytes of x and of norm_w from L2.
template <int THREADS>
__device__ __forceinline__ float stage_normed_row(const bf16* xr, const bf16* norm_w, int K, uint4* staged) {
  const int xchunks = K / 8;
  const uint4* x = reinterpret_cast<const uint4*>(xr);
  const uint4* g = reinterpret_cast<const uint4*>(norm_w);
  float ss = 0.f;
  for (int c = threadIdx.x; c < xchunks; c += THREADS) staged[c] = normed_chunk(__ldg(x + c), __ldg(g + c), ss);
  return warp_sum(ss);
}

// rsqrt(mean(x^2) + eps) from the WARPS warps' shares of the squares, summed in warp order.
template <int WARPS>
__device__ __forceinline__ float norm_scale(const float* square, int K, float eps) {
  float ss = 0.f;
#pragma unroll
  for (int k = 0; k < WARPS; ++k) ss += square[k];
  return rsqrtf(ss / float(K) + eps);
}

// acc += a 16-byte chunk of weights dotted with the staged x row xrow: 8 bf16 weights with x chunk
// c (each product added to acc in turn), or (I8) 16 codes of one group with x chunks 2c and 2c + 1,
// summed, then times the group's scale sc and added.
template <bool I8>
__device__ __forceinline__ void chunk_accumulate(float& acc, const uint4& wv, const uint4* xrow, int c, float sc) {
  if constexpr (I8) {
    float q[16], xf[8], xg[8];
    codes4_to_f32(wv.x, q);
    codes4_to_f32(wv.y, q + 4);
    codes4_to_f32(wv.z, q + 8);
    codes4_to_f32(wv.w, q + 12);
    unpack_bf16x8(xrow[2 * c], xf);
    unpack_bf16x8(xrow[2 * c + 1], xg);
    float d = 0.f;
#pragma unroll
    for (int e = 0; e < 8; ++e) d += q[e] * xf[e];
#pragma unroll
    for (int e = 0; e < 8; ++e) d += q[8 + e] * xg[e];
    acc += d * sc;
  } else {
    float wf[8], xf[8];
    unpack_bf16x8(wv, wf);
    unpack_bf16x8(xrow[c], xf);
#pragma unroll
    for (int e = 0; e < 8; ++e) acc += wf[e] * xf[e];
  }
}

// One warp's dot product of bf16 weight row w [K] with the staged row, in the GEMV's order at one
// warp per column (lane l takes chunks l, l + 32, ... in turn, then warp_sum): the unscaled sum,
// the same in every lane. Reads K * 2 bytes of w (16 B per lane per load, up to 8 in flight).
__device__ __forceinline__ float warp_row_dot(const bf16* w, const uint4* staged, int K) {
  const int lane = int(threadIdx.x) & 31, chunks = K / 8;
  const uint4* wr = reinterpret_cast<const uint4*>(w);
  float acc = 0.f;
  int c = lane;
  for (; c + 32 * 7 < chunks; c += 32 * 8) {
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) v[u] = __ldcs(wr + c + 32 * u);
#pragma unroll
    for (int u = 0; u < 8; ++u) chunk_accumulate<false>(acc, v[u], staged, c + 32 * u, 0.f);
  }
  for (; c < chunks; c += 32) chunk_accumulate<false>(acc, __ldcs(wr + c), staged, c, 0.f);
  return warp_sum(acc);
}

}  // namespace photon::cuda::gemv_row
