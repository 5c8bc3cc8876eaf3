// The Gumbel noise of the sampler's draw when no prefix rule cuts the
// candidates (docs/sampling.md, section 5): the token is the argmax of
// z_i + G_i over the kept ids, G_i = -log(-log(u_i)), one u_i per
// (seed, step, id) from Philox4x32-10.
//
// Header-only, host and CUDA device code (PHOTON_HD). The logarithm is
// photon's own (bit manipulation and a polynomial in explicit fmaf), not the
// platform's logf: glibc's and CUDA's logf may differ in the last bit, and
// with the noise bit-identical the CPU and CUDA samplers pick the same token
// from the same fp32 logits (ties aside: both break them to the lower id).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/philox.hpp"

namespace photon {

// Bit casts usable on the host and the device.
PHOTON_HD inline uint32_t gumbel_float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
#endif
}
PHOTON_HD inline float gumbel_bits_float(uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  float x;
  std::memcpy(&x, &b, 4);
  return x;
#endif
}

// Natural logarithm of a positive normal float, relative error below 1.7e-7 (measured over every
// 97th float): x = 2^e m with m in [sqrt(1/2), sqrt(2)), log(m) = f q(f) with f = m - 1 and q a
// degree-8 polynomial (a Chebyshev fit of log1p(f) / f over that range, coefficients rounded to float). No division; every multiply-add
// is an explicit fmaf, so no compiler contraction can make the host's bits differ from the device's.
PHOTON_HD inline float gumbel_log(float x) {
  const uint32_t bits = gumbel_float_bits(x);
  int e = int(bits >> 23) - 127;
  uint32_t mb = (bits & 0x007fffffu) | 0x3f800000u;  // m in [1, 2)
  if (mb > 0x3fb504f3u) {                            // m > sqrt(2): use m / 2 in [0.707, 1)
    mb -= 0x00800000u;
    e += 1;
  }
  const float m = gumbel_bits_float(mb);
  const float f = m - 1.0f;  // exact (Sterbenz)
  float q = 8.743945509e-02f;
  q = fmaf(q, f, -1.437733024e-01f);
  q = fmaf(q, f, 1.494909525e-01f);
  q = fmaf(q, f, -1.656069607e-01f);
  q = fmaf(q, f, 1.995697767e-01f);
  q = fmaf(q, f, -2.500215471e-01f);
  q = fmaf(q, f, 3.333418369e-01f);
  q = fmaf(q, f, -4.999998808e-01f);
  q = fmaf(q, f, 1.0f);
  return fmaf(float(e), 0.693147182f, f * q);
}

// G = -log(-log(u)) for the 32 random bits x: u = ((x >> 9) + 1/2) * 2^-23 lies in
// [2^-24, 1 - 2^-24], so G lies in [-2.82, 16.64].
PHOTON_HD inline float gumbel_from_bits(uint32_t x) {
  const float u = (float(x >> 9) + 0.5f) * 1.1920928955078125e-7f;
  return -gumbel_log(-gumbel_log(u));
}
constexpr float kGumbelMax = 16.64f;  // no G exceeds it
// An id whose z lies more than this below the row's largest z cannot win the draw: the largest z's
// id scores at least max z - 2.82 and it at most z + 16.64. Samplers skip its noise when
// |max z| < kGumbelSkipMaxAbs (where float spacing stays far below the 0.54 margin); skipping never
// changes the token.
constexpr float kGumbelSkipBelowMax = 20.0f;
constexpr float kGumbelSkipMaxAbs = 1.0e6f;
PHOTON_HD inline float gumbel_skip_below(float max_z) {
  return max_z > -kGumbelSkipMaxAbs && max_z < kGumbelSkipMaxAbs ? max_z - kGumbelSkipBelowMax : -INFINITY;
}

// The four ids 4 * quad .. 4 * quad + 3 share one Philox call: key = seed,
// counter = {step lo, step hi, quad, 1} (the uniform of the pi-order draw uses
// counter word 3 = 0), output k for id 4 * quad + k.
PHOTON_HD inline Philox4x32 gumbel_bits(uint64_t seed, uint64_t step, uint32_t quad) {
  return philox4x32_10(Philox4x32{{uint32_t(step), uint32_t(step >> 32), quad, 1u}}, uint32_t(seed),
                       uint32_t(seed >> 32));
}
PHOTON_HD inline float gumbel_noise(uint64_t seed, uint64_t step, uint32_t id) {
  return gumbel_from_bits(gumbel_bits(seed, step, id >> 2).v[id & 3u]);
}

}  // namespace photon
