// The small device vocabulary every kernel of src/cuda shares: bf16 types and
// conversions, 16-byte vector loads/stores, warp and block reductions.
// Include only from .cu files (it pulls in CUDA device headers).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/cuda_status.hpp"

namespace photon::cuda {

using bf16 = __nv_bfloat16;
using bf162 = __nv_bfloat162;

constexpr unsigned kFullMask = 0xffffffffu;

__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }
__host__ __device__ constexpr int64_t ceil_div64(int64_t a, int64_t b) { return (a + b - 1) / b; }

// ---- paged KV cache ----------------------------------------------------------
// A cache "row" is one slot's nkv * hd values. Blocks of block_size rows start block_stride rows
// apart (0: block_size, a packed cache; the decoder's block-major pool interleaves the layers,
// docs/kv-cache-layout.md). Hosts keep num_blocks * stride within int32 (cuda_backend.cpp).
__host__ __device__ __forceinline__ int kv_stride_rows(int block_size, int block_stride) {
  return block_stride > 0 ? block_stride : block_size;
}
// The row of cache slot `slot` = block * block_size + offset (slot >= 0).
__host__ __device__ __forceinline__ int64_t kv_slot_row(int64_t slot, int block_size, int block_stride) {
  const int s = int(slot / block_size);
  return int64_t(s) * kv_stride_rows(block_size, block_stride) + (slot - int64_t(s) * block_size);
}

// ---- conversions -----------------------------------------------------------
__device__ __forceinline__ float to_f32(bf16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ bf16 to_bf16(float v) { return __float2bfloat16_rn(v); }

// ---- 16-byte vectors: 8 bf16 or 4 f32 --------------------------------------
// Pointers must be 16-byte aligned (launchers check it).
__device__ __forceinline__ void load_bf16x8(const bf16* p, float (&f)[8]) {
  const uint4 u = *reinterpret_cast<const uint4*>(p);
  const bf162* h = reinterpret_cast<const bf162*>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 t = __bfloat1622float2(h[i]);
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}
// Unpacks 8 bf16 already loaded as one uint4.
__device__ __forceinline__ void unpack_bf16x8(const uint4& u, float (&f)[8]) {
  const bf162* h = reinterpret_cast<const bf162*>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 t = __bfloat1622float2(h[i]);
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}
__device__ __forceinline__ void store_bf16x8(bf16* p, const float (&f)[8]) {
  uint4 u;
  bf162* h = reinterpret_cast<bf162*>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  *reinterpret_cast<uint4*>(p) = u;
}
// 8 consecutive elements of a bf16 or f32 array (16- or 32-byte aligned).
__device__ __forceinline__ void load_x8(const bf16* p, float (&f)[8]) { load_bf16x8(p, f); }
__device__ __forceinline__ void load_x8(const float* p, float (&f)[8]) {
  const float4 a = *reinterpret_cast<const float4*>(p);
  const float4 b = *reinterpret_cast<const float4*>(p + 4);
  f[0] = a.x; f[1] = a.y; f[2] = a.z; f[3] = a.w;
  f[4] = b.x; f[5] = b.y; f[6] = b.z; f[7] = b.w;
}

// 8 consecutive norm weights from `off` (bf16, or f32 when f32).
__device__ __forceinline__ void load_norm8(const void* w, bool f32, int off, float (&out)[8]) {
  if (f32)
    load_x8(static_cast<const float*>(w) + off, out);
  else
    load_x8(static_cast<const bf16*>(w) + off, out);
}

// Four int8 codes packed in a 32-bit word as exact floats: code ^ 0x80 is
// code + 128 in [1, 255] (-128 never occurs), placed as the low mantissa byte
// of 2^23 (0x4B000000) it reads as 2^23 + code + 128; subtracting
// 2^23 + 128 leaves the code.
__device__ __forceinline__ void codes4_to_f32(uint32_t word, float* f) {
  const uint32_t biased = word ^ 0x80808080u;
#pragma unroll
  for (int i = 0; i < 4; ++i) f[i] = __uint_as_float(__byte_perm(biased, 0x4B000000u, 0x7440u | unsigned(i))) - 8388736.f;
}

// silu(g) * u, as the silu_mul kernel and the GEMV's SwiGLU mode form it.
__device__ __forceinline__ float silu_times(float g, float u) { return g / (1.f + __expf(-g)) * u; }

// An L2 cache policy that evicts first (sm_80+): for weights, read once per step.
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}

// ---- reductions --------------------------------------------------------------
// Sum within aligned groups of W consecutive lanes (W a power of two <= 32); T float or an integer
// type that __shfl_xor_sync takes (unsigned long long for the sampler's fixed-point masses).
template <int W, class T>
__device__ __forceinline__ T group_sum(T v) {
#pragma unroll
  for (int o = W / 2; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}
template <class T>
__device__ __forceinline__ T warp_sum(T v) {
  return group_sum<32>(v);
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

// The dot product of a query and a key row spread over a group of LPK lanes, 8 dims each (the decode
// attention kernels' scores); every lane of the group gets it. Every lane of the warp must call it
// (full-mask shuffles): select past-the-context scores after the call, never around it.
template <int LPK>
__device__ __forceinline__ float head_dot(const float (&q)[8], const float (&k)[8]) {
  float dot = 0.f;
#pragma unroll
  for (int e = 0; e < 8; ++e) dot += q[e] * k[e];
  return group_sum<LPK>(dot);
}

// rsqrt(mean(row^2) + eps) of a head row of hd dims spread over a group of LPK lanes, 8 dims each
// (the q/k norms of the decode attention kernels); every lane of the warp calls it (full-mask shuffles).
template <int LPK>
__device__ __forceinline__ float head_rms_inv(const float (&v)[8], int hd, float eps) {
  float ss = 0.f;
#pragma unroll
  for (int e = 0; e < 8; ++e) ss += v[e] * v[e];
  return rsqrtf(group_sum<LPK>(ss) / float(hd) + eps);
}
// rows[g] *= head_rms_inv(rows[g]) * the norm weights of this lane's dims sub * 8 .. + 7 (bf16, or
// f32 when f32): the q norm of GB query heads.
template <int LPK, int GB>
__device__ __forceinline__ void head_rms_norm(float (&rows)[GB][8], const void* w, bool f32, int sub, int hd,
                                              float eps) {
  float wf[8];
  load_norm8(w, f32, sub * 8, wf);
#pragma unroll
  for (int g = 0; g < GB; ++g) {
    const float inv = head_rms_inv<LPK>(rows[g], hd, eps);
#pragma unroll
    for (int e = 0; e < 8; ++e) rows[g][e] *= inv * wf[e];
  }
}

// Sum over a block of NT threads (NT a multiple of 32, <= 1024); every thread
// gets the result. scratch: >= 32 floats of shared memory, reusable right after.
template <int NT>
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  static_assert(NT % 32 == 0 && NT <= 1024, "block size");
  v = warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // a previous use of scratch is finished
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = lane < NT / 32 ? scratch[lane] : 0.f;
  return warp_sum(r);
}

// Host-side: is p aligned to `bytes`?
inline bool is_aligned(const void* p, unsigned bytes) { return (reinterpret_cast<uintptr_t>(p) % bytes) == 0; }

}  // namespace photon::cuda
