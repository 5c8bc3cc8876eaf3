#include "core/quantize.hpp"

#include <cfloat>
#include <cmath>

namespace photon {

bool quantize_row_int8(const float* w, int64_t K, int64_t group, int8_t* q, float* scales) noexcept {
  for (int64_t begin = 0, g = 0; begin < K; begin += group, ++g) {
    const int64_t end = begin + group < K ? begin + group : K;
    float max_abs = 0.0f;
    for (int64_t i = begin; i < end; ++i) {
      if (!std::isfinite(w[i])) return false;
      max_abs = std::fmax(max_abs, std::fabs(w[i]));
    }
    // A scale below FLT_MIN would be subnormal (too few bits for the bound):
    // such a group (every |w| < 127 * FLT_MIN ~ 1.5e-36) is stored as zeros.
    const float s = max_abs < 127.0f * FLT_MIN ? 0.0f : max_abs / 127.0f;
    scales[g] = s;
    if (s == 0.0f) {
      for (int64_t i = begin; i < end; ++i) q[i] = 0;
      continue;
    }
    // In double, w, s, r * s (8 x 24 bits) and w - r * s are exact, so the
    // correction below makes |w - r * s| <= s / 2 hold exactly.
    const double sd = s;
    for (int64_t i = begin; i < end; ++i) {
      const double wd = w[i];
      double r = std::nearbyint(wd / sd);
      const double err = wd - r * sd;
      if (err > 0.5 * sd) r += 1.0;
      else if (err < -0.5 * sd) r -= 1.0;
      q[i] = int8_t(std::fmin(127.0, std::fmax(-127.0, r)));
    }
  }
  return true;
}

}  // namespace photon
