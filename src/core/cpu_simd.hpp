// fp32 dot-product kernels of the CPU backend, written with GCC/Clang vector
// types so that the accumulators stay in registers on any target (16-byte
// vectors: SSE on baseline x86-64, NEON on Arm; the AVX2 clones of
// PHOTON_CPU_CLONES run the same operations).
//
// Summation order (the numerical contract, the same in every kernel here):
// 8 lanes; lane j accumulates a[k] * b[k] for k = j (mod 8) in increasing k;
// the lanes are then reduced pairwise (lane j += lane j + 4, then j + 2, then
// j + 1). dot4 gives bit for bit the results of four dot_f32 calls.
#pragma once

#include <cstdint>
#include <cstring>

namespace photon::cpu {

typedef float f32x4 __attribute__((vector_size(16)));

inline f32x4 load4(const float* p) noexcept {
  f32x4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Lanes lo (0..3) and hi (4..7) plus the tail a[k..n) * b[k..n) into lanes
// 0.., reduced pairwise.
inline float finish8(f32x4 lo, f32x4 hi, const float* a, const float* b, int64_t k, int64_t n) noexcept {
  float acc[8];
  std::memcpy(acc, &lo, sizeof lo);
  std::memcpy(acc + 4, &hi, sizeof hi);
  for (int j = 0; k + j < n; ++j) acc[j] += a[k + j] * b[k + j];
  for (int w = 4; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
  return acc[0];
}

// sum_k a[k] * b[k], fp32, in the order above.
inline float dot_f32(const float* a, const float* b, int64_t n) noexcept {
  f32x4 lo = {}, hi = {};
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    lo += load4(a + k) * load4(b + k);
    hi += load4(a + k + 4) * load4(b + k + 4);
  }
  return finish8(lo, hi, a, b, k, n);
}

// out[i] = dot_f32(x_i, w, n) for four x rows sharing one w row (one load of
// w per four multiply-adds).
inline void dot4(const float* x0, const float* x1, const float* x2, const float* x3, const float* w, int64_t n,
                 float out[4]) noexcept {
  f32x4 l0 = {}, h0 = {}, l1 = {}, h1 = {}, l2 = {}, h2 = {}, l3 = {}, h3 = {};
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const f32x4 wl = load4(w + k), wh = load4(w + k + 4);
    l0 += load4(x0 + k) * wl;
    h0 += load4(x0 + k + 4) * wh;
    l1 += load4(x1 + k) * wl;
    h1 += load4(x1 + k + 4) * wh;
    l2 += load4(x2 + k) * wl;
    h2 += load4(x2 + k + 4) * wh;
    l3 += load4(x3 + k) * wl;
    h3 += load4(x3 + k + 4) * wh;
  }
  out[0] = finish8(l0, h0, x0, w, k, n);
  out[1] = finish8(l1, h1, x1, w, k, n);
  out[2] = finish8(l2, h2, x2, w, k, n);
  out[3] = finish8(l3, h3, x3, w, k, n);
}

}  // namespace photon::cpu
