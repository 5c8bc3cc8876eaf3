// Symmetric group-wise int8 quantization of weight rows on the host (the
// layout of an i8 Weight, core/tensor.hpp).
//
// A row of K values is cut along K into groups of `group` consecutive values;
// the last group is shorter when group does not divide K (K = 172, group 128:
// groups of 128 and 44). Each group g gets one f32 scale
//   s_g = max_i |w_i| / 127   (0, all q_i = 0, when max_i |w_i| < 127 * FLT_MIN
//                              ~ 1.5e-36: an all-zero group or one whose scale
//                              would be a subnormal float)
// and each value q_i = round(w_i / s_g) in [-127, 127] (-128 is never used, so
// the code is symmetric). Dequantized: w_i ≈ q_i * s_g with
// |w_i - q_i * s_g| <= s_g / 2 in exact arithmetic (the rounding is checked
// and corrected in double precision, where every term is exact).
//
// Thread-compatibility: pure functions.
#pragma once

#include <cstdint>

namespace photon {

// Number of groups (scales) of a row of K values: ceil(K / group); group > 0.
constexpr int64_t int8_group_count(int64_t K, int64_t group) noexcept { return (K + group - 1) / group; }

// Quantizes one row w[K] (finite values) into q[K] and scales[int8_group_count(K, group)].
// Returns false, leaving q and scales unspecified, when a value is not finite
// (NaN or ±inf: no scale represents it).
bool quantize_row_int8(const float* w, int64_t K, int64_t group, int8_t* q, float* scales) noexcept;

// dst[K] = q[i] * scales[i / group] in f32 (the CPU matmul's widening of an
// i8 weight row). Inline so that loops compiled with PHOTON_CPU_CLONES get it
// vectorized for their target.
inline void dequantize_row_int8(const int8_t* q, const float* scales, int64_t K, int64_t group,
                                float* dst) noexcept {
  for (int64_t begin = 0, g = 0; begin < K; begin += group, ++g) {
    const int64_t end = begin + group < K ? begin + group : K;
    const float s = scales[g];
    for (int64_t i = begin; i < end; ++i) dst[i] = float(q[i]) * s;
  }
}

}  // namespace photon
