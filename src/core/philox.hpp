// Philox4x32-10 (Salmon et al., "Parallel Random Numbers: As Easy as 1, 2, 3",
// SC'11): a counter-based generator, a pure function of (counter, key).
// Header-only, usable from host code and CUDA device code (PHOTON_HD), so the
// CPU and CUDA samplers draw the same numbers. docs/sampling.md says how the
// sampler keys it: key = seed, counter = step.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define PHOTON_HD __host__ __device__
#else
#define PHOTON_HD
#endif

namespace photon {

struct Philox4x32 {
  uint32_t v[4];
};

namespace philox_detail {

constexpr uint32_t kMul0 = 0xD2511F53u;
constexpr uint32_t kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u;  // golden ratio
constexpr uint32_t kWeyl1 = 0xBB67AE85u;  // sqrt(3) - 1

PHOTON_HD inline void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t p = uint64_t(a) * uint64_t(b);
  hi = uint32_t(p >> 32);
  lo = uint32_t(p);
}

}  // namespace philox_detail

// Ten rounds of Philox4x32 on counter `ctr` with key {k0, k1}.
PHOTON_HD inline Philox4x32 philox4x32_10(Philox4x32 ctr, uint32_t k0, uint32_t k1) {
  using namespace philox_detail;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {  // the key schedule bumps the key before every round after the first
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kMul0, ctr.v[0], hi0, lo0);
    mulhilo(kMul1, ctr.v[2], hi1, lo1);
    ctr = Philox4x32{{hi1 ^ ctr.v[1] ^ k0, lo1, hi0 ^ ctr.v[3] ^ k1, lo0}};
  }
  return ctr;
}

// The sampler's uniform in [0, 1) for (seed, step): 53 random bits.
PHOTON_HD inline double philox_uniform(uint64_t seed, uint64_t step) {
  const Philox4x32 r = philox4x32_10(Philox4x32{{uint32_t(step), uint32_t(step >> 32), 0u, 0u}}, uint32_t(seed),
                                     uint32_t(seed >> 32));
  const uint64_t bits = (uint64_t(r.v[1]) << 32 | r.v[0]) >> 11;
  return double(bits) * (1.0 / 9007199254740992.0);  // 2^-53
}

}  // namespace photon
