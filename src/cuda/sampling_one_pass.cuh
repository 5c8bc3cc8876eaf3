// What the one-pass sampling kernels share (sampling_gumbel.cu's
// sample_one_pass_kernel and sampling_screened.cu's screened draw): blocks of
// kThreads, each scoring a slice of a row; the block's best (score, id), the
// log-sum-exp of its raw logits and its flags, merged in a fixed order so
// that the float sums are deterministic; the row's Philox noise and logits
// loaded a quad (4 ids) per thread. Include only from .cu files.
#pragma once

#include <climits>
#include <cmath>

#include "core/gumbel.hpp"
#include "cuda/common.cuh"
#include "cuda/sampling.cuh"
#include "cuda/sampling_device.cuh"

namespace photon::cuda::one_pass {

using namespace sampling_detail;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kFlagBad = 1;       // a NaN or +inf logit
constexpr int kFlagOverflow = 2;  // a finite logit / temperature is +inf

// One block's slice of a row: the best (score, id), the largest raw logit, the sum of
// exp(l - that max) over the slice, and the flags.
struct Partial {
  float score;
  int id;
  float max;
  float sum;
  int flags;
  int pad[3];
};
static_assert(sizeof(Partial) == 32, "one 32-byte sector per partial");

// (max, sum of exp(l - max)) pairs combined; a pair with max -inf holds nothing.
__device__ __forceinline__ void merge_lse(float& m, float& s, float om, float os) {
  if (om == -INFINITY) return;
  if (m == -INFINITY) {
    m = om;
    s = os;
    return;
  }
  if (om > m) {
    s = s * expf(m - om) + os;
    m = om;
  } else {
    s += os * expf(om - m);
  }
}

struct Acc {
  Best best;
  float max, sum;
  int flags;
};
__device__ __forceinline__ void merge(Acc& a, const Acc& b) {
  a.best = better(a.best, b.best);
  merge_lse(a.max, a.sum, b.max, b.sum);
  a.flags |= b.flags;
}
__device__ __forceinline__ Acc warp_merge(Acc a) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    Acc b;
    b.best.v = __shfl_xor_sync(kFullMask, a.best.v, o);
    b.best.id = __shfl_xor_sync(kFullMask, a.best.id, o);
    b.max = __shfl_xor_sync(kFullMask, a.max, o);
    b.sum = __shfl_xor_sync(kFullMask, a.sum, o);
    b.flags = __shfl_xor_sync(kFullMask, a.flags, o);
    merge(a, b);
  }
  return a;
}
// Every thread gets the block's result; the same shuffle tree and warp order in every launch, so
// the float sums are deterministic.
__device__ inline Acc block_merge(Acc a, Acc* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  a = warp_merge(a);
  __syncthreads();  // shared is free (an earlier block_merge may have read it)
  if (lane == 0) shared[warp] = a;
  __syncthreads();
  Acc r = shared[0];
  for (int w = 1; w < kWarps; ++w) merge(r, shared[w]);
  return r;
}

// Noise of the quads q0 + k kThreads (k < min(C, n)) below V; zero for the others and for greedy rows.
template <int C>
__device__ __forceinline__ void chunk_noise(const SampleRowParams& P, bool greedy, int q0, int n, int V,
                                            float (&g)[C][4]) {
#pragma unroll
  for (int k = 0; k < C; ++k) {
    const int q = q0 + k * kThreads;
    if (!greedy && k < n && 4 * q < V) {
      const Philox4x32 r = gumbel_bits(P.seed, P.step, uint32_t(q));
#pragma unroll
      for (int j = 0; j < 4; ++j) g[k][j] = gumbel_from_bits(r.v[j]);
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) g[k][j] = 0.f;
    }
  }
}

// The logits of the quads q0 + k kThreads (k < min(C, n)); -inf past the row or the thread's share.
template <int C, bool kVec>
__device__ __forceinline__ void chunk_load(const float* l, int q0, int n, int V, float (&v)[C][4]) {
#pragma unroll
  for (int k = 0; k < C; ++k) {
    const int i = 4 * (q0 + k * kThreads);
    if (k >= n) {
#pragma unroll
      for (int j = 0; j < 4; ++j) v[k][j] = -INFINITY;
    } else if (kVec && i + 3 < V) {
      const float4 x = __ldg(reinterpret_cast<const float4*>(l + i));
      v[k][0] = x.x;
      v[k][1] = x.y;
      v[k][2] = x.z;
      v[k][3] = x.w;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) v[k][j] = i + j < V ? l[i + j] : -INFINITY;
    }
  }
}

}  // namespace photon::cuda::one_pass
