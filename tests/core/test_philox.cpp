#include <catch2/catch.hpp>

#include "core/philox.hpp"

using namespace photon;

// Known-answer vectors of Random123 (tests/kat_vectors, the three
// "philox4x32 10" lines): counter[4], key[2] -> output[4].
TEST_CASE("Philox4x32-10 reproduces Random123's known-answer vectors", "[core]") {
  struct Kat {
    Philox4x32 ctr;
    uint32_t k0, k1;
    Philox4x32 want;
  };
  const Kat kats[] = {
      {{{0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u}}, 0x00000000u, 0x00000000u,
       {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}}},
      {{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu, 0xffffffffu,
       {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}}},
      {{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u, 0x299f31d0u,
       {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}}},
  };
  for (const Kat& k : kats) {
    const Philox4x32 got = philox4x32_10(k.ctr, k.k0, k.k1);
    for (int i = 0; i < 4; ++i) CHECK(got.v[i] == k.want.v[i]);
  }
}

TEST_CASE("philox_uniform is a uniform in 0 <= u < 1 keyed by seed and step", "[core]") {
  CHECK(philox_uniform(7, 3) == philox_uniform(7, 3));
  CHECK(philox_uniform(7, 3) != philox_uniform(7, 4));
  CHECK(philox_uniform(7, 3) != philox_uniform(8, 3));
  CHECK(philox_uniform(uint64_t(1) << 32, 0) != philox_uniform(0, 0));  // the seed's high half matters
  CHECK(philox_uniform(0, uint64_t(1) << 32) != philox_uniform(0, 0));  // so does the step's
  int bins[10] = {};
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const double u = philox_uniform(12345, uint64_t(i));
    REQUIRE(u >= 0.0);
    REQUIRE(u < 1.0);
    ++bins[int(u * 10)];
  }
  double chi2 = 0;
  for (int b : bins) chi2 += (b - n / 10.0) * (b - n / 10.0) / (n / 10.0);
  CHECK(chi2 < 40.0);  // 9 degrees of freedom: p < 1e-5
}
