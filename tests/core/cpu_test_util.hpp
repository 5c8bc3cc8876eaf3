// Helpers of the CPU backend tests: seeded random data, host tensors, and
// the backends under test at several thread counts.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "core/cpu_backend.hpp"
#include "core/dtype.hpp"
#include "core/tensor.hpp"

namespace photon::test {

// The thread counts every op is checked with (0 = caller only).
inline const std::vector<int32_t>& thread_counts() {
  static const std::vector<int32_t> counts = {0, 1, 3};
  return counts;
}

inline std::unique_ptr<Backend> cpu_backend(int32_t threads) {
  auto b = make_cpu_backend(CpuBackendOptions{.num_threads = threads});
  REQUIRE(b.has_value());
  return std::move(*b);
}

inline std::vector<float> random_floats(std::mt19937& rng, size_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Host storage of one tensor in any dtype; `values` holds what the stored
// bits mean as f32 (after rounding to bf16 / f16), for the naive references.
struct HostTensor {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
  Tensor t;
};

inline HostTensor host_tensor(const std::vector<float>& src, DType dtype, std::initializer_list<int64_t> dims) {
  HostTensor h;
  h.bytes.resize(src.size() * dtype_size(dtype) + 1);
  h.values.resize(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    switch (dtype) {
      case DType::f32:
        reinterpret_cast<float*>(h.bytes.data())[i] = src[i];
        h.values[i] = src[i];
        break;
      case DType::bf16: {
        const uint16_t b = f32_to_bf16(src[i]);
        reinterpret_cast<uint16_t*>(h.bytes.data())[i] = b;
        h.values[i] = bf16_to_f32(b);
        break;
      }
      case DType::f16: {
        const uint16_t b = f32_to_f16(src[i]);
        reinterpret_cast<uint16_t*>(h.bytes.data())[i] = b;
        h.values[i] = f16_to_f32(b);
        break;
      }
      default: FAIL("host_tensor: unsupported dtype");
    }
  }
  h.t = Tensor::of(h.bytes.data(), dtype, dims);
  return h;
}

inline Tensor view_of(std::vector<float>& v, std::initializer_list<int64_t> dims) {
  return Tensor::of(v.data(), DType::f32, dims);
}

inline float max_abs(const std::vector<float>& v) {
  float m = 0.0f;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

// max_i |a_i - b_i|.
inline double max_abs_diff(const std::vector<float>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0.0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
  return m;
}

}  // namespace photon::test
