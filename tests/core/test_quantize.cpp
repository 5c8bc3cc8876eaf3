// Group-wise int8 quantization (core/quantize.hpp): the per-element error
// bound |w - q * s| <= s / 2, the scale of each group, short last groups,
// degenerate groups, and the CPU dequantization it pairs with.
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/quantize.hpp"

using namespace photon;

namespace {

struct Quantized {
  std::vector<int8_t> q;
  std::vector<float> scales;
};

Quantized quantize(const std::vector<float>& w, int64_t group) {
  const int64_t K = int64_t(w.size());
  Quantized out{std::vector<int8_t>(w.size()), std::vector<float>(size_t(int8_group_count(K, group)))};
  REQUIRE(quantize_row_int8(w.data(), K, group, out.q.data(), out.scales.data()));
  return out;
}

// Checks every element's bound in double (where w, q * s and their difference are exact).
void check_bound(const std::vector<float>& w, const Quantized& r, int64_t group) {
  for (size_t i = 0; i < w.size(); ++i) {
    const double s = r.scales[i / size_t(group)];
    const double err = std::abs(double(w[i]) - double(r.q[i]) * s);
    INFO("element " << i << " w " << w[i] << " q " << int(r.q[i]) << " scale " << s);
    REQUIRE(int(r.q[i]) != -128);  // the code is symmetric: [-127, 127]
    REQUIRE(err <= s / 2);
  }
}

}  // namespace

TEST_CASE("int8 group count is ceil(K / group)", "[core]") {
  CHECK(int8_group_count(128, 128) == 1);
  CHECK(int8_group_count(64, 128) == 1);
  CHECK(int8_group_count(172, 128) == 2);
  CHECK(int8_group_count(4096, 128) == 32);
  CHECK(int8_group_count(7, 3) == 3);
  CHECK(int8_group_count(0, 32) == 0);
}

TEST_CASE("int8 quantization keeps every element within half a scale step", "[core]") {
  std::mt19937 rng(2024);
  // (K, group): dividing, a short last group, one group longer than the row, group 1.
  for (auto [K, group] : {std::pair<int64_t, int64_t>{256, 128}, {172, 128}, {64, 128}, {75, 20}, {33, 1}, {1000, 7}}) {
    for (float magnitude : {1e-3f, 0.05f, 1.0f, 300.0f}) {
      std::normal_distribution<float> normal(0.0f, magnitude);
      std::vector<float> w(static_cast<size_t>(K));
      for (auto& v : w) v = normal(rng);
      w[size_t(K) / 2] = 9.0f * magnitude;  // an outlier: its group's scale grows, the bound still holds
      INFO("K " << K << " group " << group << " magnitude " << magnitude);
      const Quantized r = quantize(w, group);
      check_bound(w, r, group);
      // The scale is the group's largest magnitude / 127, which maps to +-127.
      for (int64_t g = 0; g < int8_group_count(K, group); ++g) {
        float max_abs = 0;
        int64_t arg = -1;
        for (int64_t i = g * group; i < std::min(K, (g + 1) * group); ++i)
          if (std::abs(w[size_t(i)]) > max_abs) max_abs = std::abs(w[size_t(i)]), arg = i;
        CHECK(r.scales[size_t(g)] == max_abs / 127.0f);
        CHECK(std::abs(int(r.q[size_t(arg)])) == 127);
      }
    }
  }
}

TEST_CASE("int8 quantization of exact ties, zeros, tiny values and non-finite values", "[core]") {
  SECTION("values exactly on a step: reconstructed exactly") {
    std::vector<float> w;
    for (int i = -127; i <= 127; ++i) w.push_back(float(i) * 0.5f);  // scale = 63.5 / 127 = 0.5
    const Quantized r = quantize(w, int64_t(w.size()));
    REQUIRE(r.scales[0] == 0.5f);
    for (size_t i = 0; i < w.size(); ++i) CHECK(float(r.q[i]) * r.scales[0] == w[i]);
  }
  SECTION("halfway values stay within s / 2") {
    std::vector<float> w = {127.0f, 0.5f, -0.5f, 1.5f, -2.5f, 126.5f};  // scale 1: every .5 is a tie
    const Quantized r = quantize(w, 6);
    REQUIRE(r.scales[0] == 1.0f);
    check_bound(w, r, 6);
  }
  SECTION("an all-zero group has scale 0 and zero codes; its neighbours are unaffected") {
    std::vector<float> w = {0, 0, 0, 0, 1.0f, -2.0f, 0.5f, 3.0f};
    const Quantized r = quantize(w, 4);
    CHECK(r.scales[0] == 0.0f);
    for (int i = 0; i < 4; ++i) CHECK(r.q[size_t(i)] == 0);
    CHECK(r.scales[1] == 3.0f / 127.0f);
    check_bound(std::vector<float>(w.begin() + 4, w.end()), Quantized{{r.q.begin() + 4, r.q.end()}, {r.scales[1]}}, 4);
  }
  SECTION("a group below 127 * FLT_MIN is stored as zeros (its scale would be subnormal)") {
    std::vector<float> w = {1e-37f, -5e-38f, 2.0f, 1.0f};
    const Quantized r = quantize(w, 2);
    CHECK(r.scales[0] == 0.0f);
    CHECK(r.q[0] == 0);
    CHECK(r.q[1] == 0);
    CHECK(r.scales[1] == 2.0f / 127.0f);
    // The error of the flushed group is its values themselves: below 1.6e-36.
    CHECK(std::abs(w[0]) < 127.0f * FLT_MIN);
  }
  SECTION("NaN and infinity are refused") {
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity()}) {
      std::vector<float> w = {1.0f, bad, 0.5f};
      std::vector<int8_t> q(3);
      std::vector<float> s(1);
      CHECK_FALSE(quantize_row_int8(w.data(), 3, 8, q.data(), s.data()));
    }
  }
}

TEST_CASE("int8 dequantization multiplies each code by its group's scale, short last group included", "[core]") {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  const int64_t K = 75, group = 20;  // groups 20, 20, 20, 15
  std::vector<float> w(static_cast<size_t>(K));
  for (auto& v : w) v = u(rng);
  const Quantized r = quantize(w, group);
  REQUIRE(r.scales.size() == 4);
  std::vector<float> back(static_cast<size_t>(K));
  dequantize_row_int8(r.q.data(), r.scales.data(), K, group, back.data());
  for (int64_t i = 0; i < K; ++i) {
    CHECK(back[size_t(i)] == float(r.q[size_t(i)]) * r.scales[size_t(i / group)]);
    // f32 rounding of q * s adds at most |q * s| * 2^-24 to the s / 2 bound.
    CHECK(std::abs(back[size_t(i)] - w[size_t(i)]) <=
          r.scales[size_t(i / group)] / 2 + std::abs(back[size_t(i)]) * FLT_EPSILON);
  }
}
