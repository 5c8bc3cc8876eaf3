#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "core/dtype.hpp"

using namespace photon;

TEST_CASE("bf16 round trip and nearest-even rounding", "[core]") {
  for (float f : {0.0f, 1.0f, -2.5f, 3.140625f, 65536.0f, -0.0078125f}) CHECK(bf16_to_f32(f32_to_bf16(f)) == f);
  // 1 + 2^-8 lies exactly between two bf16 values: ties to even (1.0).
  CHECK(bf16_to_f32(f32_to_bf16(1.0f + 1.0f / 256)) == 1.0f);
  CHECK(bf16_to_f32(f32_to_bf16(1.0f + 3.0f / 256)) == 1.0f + 4.0f / 256);
  CHECK(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.f, 10.f);
  for (int i = 0; i < 10000; ++i) {
    float f = nd(rng);
    float r = bf16_to_f32(f32_to_bf16(f));
    CHECK(std::fabs(r - f) <= std::fabs(f) * (1.0f / 256));
  }
}

TEST_CASE("f16 conversions against exact cases", "[core]") {
  CHECK(f16_to_f32(0x3c00) == 1.0f);
  CHECK(f16_to_f32(0xc000) == -2.0f);
  CHECK(f16_to_f32(0x7bff) == 65504.0f);
  CHECK(f16_to_f32(0x0001) == std::ldexp(1.0f, -24));  // smallest subnormal
  CHECK(f16_to_f32(0x03ff) == std::ldexp(1023.0f, -24));
  CHECK(std::isinf(f16_to_f32(0x7c00)));
  CHECK(f32_to_f16(1.0f) == 0x3c00);
  CHECK(f32_to_f16(65504.0f) == 0x7bff);
  CHECK(f32_to_f16(1e6f) == 0x7c00);
  CHECK(f32_to_f16(std::ldexp(1.0f, -24)) == 0x0001);
  CHECK(f32_to_f16(std::ldexp(1.0f, -26)) == 0x0000);
  // Every finite half value round-trips exactly.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00) continue;
    CHECK(f32_to_f16(f16_to_f32(uint16_t(h))) == h);
  }
}
