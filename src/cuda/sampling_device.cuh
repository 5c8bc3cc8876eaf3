// Device pieces shared by the sampling kernels (sampling.cu: the general
// cluster / block kernels; sampling_gumbel.cu: the one-pass kernel): the
// (value, id) order of the argmax, the 2^-40 fixed-point masses of
// docs/sampling.md, and z = l / temperature.
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
__device__ __forceinline__ Best warp_best(Best b) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    b = better(b, Best{__shfl_xor_sync(kFullMask, b.v, o), __shfl_xor_sync(kFullMask, b.id, o)});
  return b;
}

// z = l / temperature, -0 as +0 (docs/sampling.md, section 4).
__device__ __forceinline__ float scaled_logit(float l, float temperature) {
  const float z = l / temperature;
  return z == 0.f ? 0.f : z;
}

}  // namespace photon::cuda::sampling_detail
