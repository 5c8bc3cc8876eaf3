// The output side shared by gemv_skinny and gemv_int8_skinny. A block of kWarps warps computes 16
// weight rows x NT * 8 activation rows of kMats matrices (SwiGLU: 2, gate then up) in mma.sync C
// fragments, each warp over its share of K; the epilogue sums the warps' fragments through shared
// memory and thread e (e < NT * 128) writes one output element: C fragment entry e / 32 of lane
// e % 32, i.e. weight row g (+8 for entries 2, 3) and activation row nt * 8 + 2t (+1 for odd entries).
// Device code only; no state beyond the caller's shared `partial` array.
#pragma once

#include "cuda/common.cuh"

namespace photon::cuda {

template <int NT>
struct SkinnyOut {
  int idx, ln;  // the fragment entry and the lane this thread reduces
  bool live;    // an output inside [M, N]
  int64_t at;   // its index in out [M, N]
  __device__ __forceinline__ SkinnyOut(int row0, int N, int M) {
    idx = int(threadIdx.x) / 32;
    ln = int(threadIdx.x) % 32;
    const int nt = idx / 4, i = idx % 4;
    const int row = row0 + (ln >> 2) + (i >= 2 ? 8 : 0), m = nt * 8 + 2 * (ln & 3) + (i & 1);
    live = int(threadIdx.x) < NT * 128 && row < N && m < M;
    at = int64_t(m) * N + row;
  }
  // add mode: the bf16 value this element adds to (read after pdl_wait(), before the weight stream
  // ends, so its latency hides under it).
  __device__ __forceinline__ float residual(const void* out) const {
    return live ? to_f32(static_cast<const bf16*>(out)[at]) : 0.f;
  }
};

// Stores acc (this warp's fragments) into partial, sums the kWarps warps' fragments for e and
// writes it: f32 as is; bf16 plain, res + v (add), or silu(gate) * up with gate and up rounded to
// bf16 first, as the unfused product stores them (silu). Every thread of the block calls it.
template <int kMats, int NT, int kWarps, bool kSilu, bool kAdd, class Out>
__device__ __forceinline__ void skinny_store(float (&partial)[kWarps][kMats * NT * 4][32],
                                             const float (&acc)[kMats][NT][4], const SkinnyOut<NT>& e, float res,
                                             void* out_ptr) {
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
#pragma unroll
  for (int r = 0; r < kMats; ++r)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) partial[warp][(r * NT + nt) * 4 + i][lane] = acc[r][nt][i];
  __syncthreads();
  if (!e.live) return;
  float v[kMats] = {};
#pragma unroll
  for (int r = 0; r < kMats; ++r)
#pragma unroll
    for (int w = 0; w < kWarps; ++w) v[r] += partial[w][r * NT * 4 + e.idx][e.ln];
  Out* out = static_cast<Out*>(out_ptr);
  if constexpr (sizeof(Out) == 4) out[e.at] = v[0];
  else if constexpr (kSilu) out[e.at] = to_bf16(silu_times(to_f32(to_bf16(v[0])), to_f32(to_bf16(v[kMats - 1]))));
  else out[e.at] = to_bf16(kAdd ? res + v[0] : v[0]);
}

}  // namespace photon::cuda
