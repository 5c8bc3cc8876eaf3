#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "core/cpu_backend.hpp"
#include "core/cpu_test_util.hpp"

using namespace photon;
using namespace photon::test;

namespace {

// out[m, n] = sum_k x[m, k] * w[n, k], in double.
std::vector<double> naive_matmul(const std::vector<float>& x, const std::vector<float>& w, int64_t M, int64_t N,
                                 int64_t K) {
  std::vector<double> out(size_t(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += double(x[size_t(m * K + k)]) * double(w[size_t(n * K + k)]);
      out[size_t(m * N + n)] = s;
    }
  return out;
}

// fp32 accumulation over K terms of magnitude <= 1: error well under K * 2^-22.
double tolerance(int64_t K) { return double(K) * 3e-7 + 1e-6; }

}  // namespace

TEST_CASE("cpu matmul matches a naive loop for every weight dtype and thread count", "[core]") {
  std::mt19937 rng(11);
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{1, 13, 67}, {3, 45, 131}, {37, 29, 77},
                           {70, 19, 1030}, {5, 1, 1}}) {
      const auto x = random_floats(rng, size_t(M * K));
      const HostTensor w = host_tensor(random_floats(rng, size_t(N * K)), dt, {N, K});
      const auto ref = naive_matmul(x, w.values, M, N, K);
      std::vector<float> first;
      for (int32_t threads : thread_counts()) {
        auto be = cpu_backend(threads);
        std::vector<float> xin = x, out(size_t(M * N), NAN);
        REQUIRE(be->matmul(view_of(out, {M, N}), view_of(xin, {M, K}), Weight{w.t, {}, 0}).has_value());
        INFO("dtype " << dtype_name(dt) << " M " << M << " N " << N << " K " << K << " threads " << threads);
        CHECK(max_abs_diff(out, ref) <= tolerance(K));
        // Each element is one dot product in a fixed order: identical whatever the thread count.
        if (first.empty()) first = out;
        else CHECK(out == first);
      }
    }
  }
}

TEST_CASE("cpu matmul rows do not depend on the batch they are in", "[core]") {
  std::mt19937 rng(12);
  const int64_t M = 23, N = 31, K = 301;
  auto be = cpu_backend(3);
  auto x = random_floats(rng, size_t(M * K));
  const HostTensor w = host_tensor(random_floats(rng, size_t(N * K)), DType::bf16, {N, K});
  std::vector<float> all(size_t(M * N));
  REQUIRE(be->matmul(view_of(all, {M, N}), view_of(x, {M, K}), Weight{w.t, {}, 0}).has_value());
  for (int64_t m = 0; m < M; ++m) {
    std::vector<float> row(x.begin() + m * K, x.begin() + (m + 1) * K), out(static_cast<size_t>(N));
    REQUIRE(be->matmul(view_of(out, {1, N}), view_of(row, {1, K}), Weight{w.t, {}, 0}).has_value());
    CHECK(std::equal(out.begin(), out.end(), all.begin() + m * N));
  }
}

TEST_CASE("cpu int8 matmul equals the matmul of the dequantized weights", "[core]") {
  std::mt19937 rng(13);
  std::uniform_int_distribution<int> q(-127, 127);
  // Group sizes dividing K and not (a shorter last group: 75 = 3 x 20 + 15,
  // 130 = 10 x 13, 7 < 8: one short group).
  for (auto [M, N, K, G] : {std::tuple<int64_t, int64_t, int64_t, int32_t>{1, 17, 96, 32}, {9, 33, 75, 25},
                            {41, 7, 130, 13}, {2, 5, 7, 7}, {5, 19, 75, 20}, {3, 4, 7, 8}}) {
    const int64_t groups = (K + G - 1) / G;
    std::vector<int8_t> wq(size_t(N * K));
    for (auto& v : wq) v = int8_t(q(rng));
    auto scales = random_floats(rng, size_t(N * groups), 0.001f, 0.02f);
    std::vector<float> deq(size_t(N * K));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k)
        deq[size_t(n * K + k)] = float(wq[size_t(n * K + k)]) * scales[size_t(n * groups + k / G)];
    auto x = random_floats(rng, size_t(M * K));
    Weight wi8{Tensor::of(wq.data(), DType::i8, {N, K}), view_of(scales, {N, groups}), G};
    Weight wf32{view_of(deq, {N, K}), {}, 0};
    for (int32_t threads : thread_counts()) {
      auto be = cpu_backend(threads);
      std::vector<float> a(size_t(M * N)), b(size_t(M * N));
      REQUIRE(be->matmul(view_of(a, {M, N}), view_of(x, {M, K}), wi8).has_value());
      REQUIRE(be->matmul(view_of(b, {M, N}), view_of(x, {M, K}), wf32).has_value());
      // Dequantized in the same order as the reference: bit-identical.
      CHECK(a == b);
      const auto ref = naive_matmul(x, deq, M, N, K);
      CHECK(max_abs_diff(a, ref) <= tolerance(K));
    }
  }
}

TEST_CASE("cpu matmul rejects bad shapes and dtypes", "[core]") {
  auto be = cpu_backend(0);
  std::vector<float> x(6 * 5), w(4 * 5), out(6 * 4);
  const Weight W{view_of(w, {4, 5}), {}, 0};
  CHECK(be->matmul(view_of(out, {6, 4}), view_of(x, {6, 5}), W).has_value());
  auto r = be->matmul(view_of(out, {6, 4}), view_of(x, {5, 6}), W);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == Errc::shape_mismatch);
  CHECK(r.error().message.find("matmul") != std::string::npos);
  CHECK(be->matmul(view_of(out, {4, 6}), view_of(x, {6, 5}), W).error().code == Errc::shape_mismatch);
  Tensor xi = Tensor::of(x.data(), DType::i32, {6, 5});
  CHECK(be->matmul(view_of(out, {6, 4}), xi, W).error().code == Errc::shape_mismatch);
  std::vector<int8_t> q(4 * 5);
  std::vector<float> s(4 * 2);
  // group size 3 and K = 5: groups of 3 and 2, scales [4, 2]
  Weight short_group{Tensor::of(q.data(), DType::i8, {4, 5}), view_of(s, {4, 2}), 3};
  CHECK(be->matmul(view_of(out, {6, 4}), view_of(x, {6, 5}), short_group).has_value());
  Weight bad_group{Tensor::of(q.data(), DType::i8, {4, 5}), view_of(s, {4, 2}), 0};
  CHECK(be->matmul(view_of(out, {6, 4}), view_of(x, {6, 5}), bad_group).error().code == Errc::invalid_argument);
  Weight bad_scales{Tensor::of(q.data(), DType::i8, {4, 5}), view_of(s, {4, 2}), 5};  // one group: [4, 1]
  CHECK(be->matmul(view_of(out, {6, 4}), view_of(x, {6, 5}), bad_scales).error().code == Errc::shape_mismatch);
  Weight no_data{Tensor::of(nullptr, DType::f32, {4, 5}), {}, 0};
  CHECK(be->matmul(view_of(out, {6, 4}), view_of(x, {6, 5}), no_data).error().code == Errc::invalid_argument);
}
