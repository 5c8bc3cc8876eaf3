// Device pieces shared by the sampling kernels (sampling.cu: the general
// cluster / block kernels; sampling_id_order.cu: the lean id-order draw):
// the (value, id) order of the argmax, the 2^-40 fixed-point masses of
// docs/sampling.md, and the id-order descent inside one block.
// Header-only, device code only; no host state.
#pragma once

#include "cuda/common.cuh"

namespace photon::cuda::sampling_detail {

using u64 = unsigned long long;
constexpr float kFixedScale = 1099511627776.0f;  // 2^40: prefix sums in fixed point

struct Best {
  float v;
  int id;
};
// (v, id) beats (bv, bid): larger value, ties to the lower id.
__device__ __forceinline__ bool beats(float v, int id, float bv, int bid) { return v > bv || (v == bv && id < bid); }
__device__ __forceinline__ Best better(Best a, Best b) { return beats(b.v, b.id, a.v, a.id) ? b : a; }
__device__ __forceinline__ u64 fixed_mass(float w) { return __float2ull_rn(w * kFixedScale); }
__device__ __forceinline__ u64 warp_sum_u64(u64 v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}
__device__ __forceinline__ Best warp_best(Best b) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    b = better(b, Best{__shfl_xor_sync(kFullMask, b.v, o), __shfl_xor_sync(kFullMask, b.id, o)});
  return b;
}

// z = l / temperature (-0 as +0), w = exp(z - m) with m the row's max z, and
// the fixed-point mass of the id-order draw: w's when kept (w > 0 and
// w >= min_p), else 0 (docs/sampling.md, sections 4 and 5).
__device__ __forceinline__ float scaled_logit(float l, float temperature) {
  const float z = l / temperature;
  return z == 0.f ? 0.f : z;
}
__device__ __forceinline__ u64 id_order_mass(float l, float temperature, float m, float minp, float& w) {
  w = expf(scaled_logit(l, temperature) - m);
  return w > 0.f && w >= minp ? fixed_mass(w) : 0ull;
}

// The piece that holds `target` among NW consecutive pieces whose masses are
// sums[0 .. NW) (ids ascending): returns its index and makes target relative
// to the piece's start. While the sums are exact the target always falls in
// a piece; otherwise the last kept id (the last nonzero piece's last unit).
template <int NW>
__device__ __forceinline__ int pick_piece(const u64* sums, u64& target) {
  int last = 0;
  u64 before = 0;
  for (int w = 0; w < NW; ++w) {
    const u64 sw = sums[w];
    if (sw > 0) last = w;
    if (before + sw > target) {
      target -= before;
      return w;
    }
    before += sw;
  }
  target = sums[last] > 0 ? sums[last] - 1 : 0;
  return last;
}

// The id-order draw inside one block of NW warps: the first id of l[lo, hi)
// whose cumulative mass (ids ascending, mass_of(l[i])) exceeds `target`,
// which the caller keeps below the range's total mass. Each level splits the
// range among the warps (coalesced reads), picks the warp's piece holding the
// target and recurses; a piece of <= 32 ids ends with a warp scan. Reads
// about (hi - lo) * 4 * (1 + 1/NW) bytes; uv: NW u64 of shared memory.
// Every thread of the block calls it and gets the id.
template <int NW, class MassOf>
__device__ int descend_id_order(const float* l, int lo, int hi, MassOf mass_of, u64 target, u64* uv) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  while (hi - lo > 32) {
    const int piece = (ceil_div(hi - lo, NW) + 31) & ~31;
    const int wlo = min(hi, lo + warp * piece), whi = min(hi, wlo + piece);
    u64 s = 0;
    constexpr int kBatch = 16;  // loads in flight per lane
    for (int base = wlo + lane; base < whi; base += 32 * kBatch) {
      float x[kBatch];
#pragma unroll
      for (int k = 0; k < kBatch; ++k) x[k] = base + 32 * k < whi ? l[base + 32 * k] : -INFINITY;  // mass 0
#pragma unroll
      for (int k = 0; k < kBatch; ++k) s += mass_of(x[k]);
    }
    s = warp_sum_u64(s);
    __syncthreads();  // the previous level's uv is read
    if (lane == 0) uv[warp] = s;
    __syncthreads();
    const int pick = pick_piece<NW>(uv, target);
    lo = min(hi, lo + pick * piece);
    hi = min(hi, lo + piece);
  }
  const int i = lo + lane;
  const u64 m = i < hi ? mass_of(l[i]) : 0ull;
  u64 incl = m;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const u64 t = __shfl_up_sync(kFullMask, incl, o);
    if (lane >= o) incl += t;
  }
  const unsigned hit = __ballot_sync(kFullMask, incl > target);
  const unsigned nonzero = __ballot_sync(kFullMask, m > 0);
  const int pos = hit != 0 ? __ffs(hit) - 1 : (nonzero != 0 ? 31 - __clz(nonzero) : 0);
  return lo + pos;
}

}  // namespace photon::cuda::sampling_detail
