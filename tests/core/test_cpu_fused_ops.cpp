// The Backend's fused ops (matmul_add, rmsnorm_matmul) on the CPU backend:
// they equal the separate ops bit for bit (the CPU backend is the CUDA fused
// kernels' twin).
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

#include "cpu_test_util.hpp"

using namespace photon;
using namespace photon::test;

namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("cpu matmul_add equals matmul then adding the product exactly", "[core]") {
  std::mt19937 rng(71);
  for (int32_t threads : thread_counts()) {
    auto cpu = cpu_backend(threads);
    for (int64_t M : {1, 5}) {
      const int64_t K = 72, N = 40;
      const auto res0 = random_floats(rng, size_t(M * N), -2.f, 2.f);
      const auto x0 = random_floats(rng, size_t(M * K), -2.f, 2.f);
      HostTensor w = host_tensor(random_floats(rng, size_t(N * K)), DType::bf16, {N, K});
      Weight W;
      W.w = w.t;
      CAPTURE(threads, M);

      std::vector<float> x_a = x0, prod(size_t(M * N)), res_a = res0;
      REQUIRE(cpu->matmul(view_of(prod, {M, N}), view_of(x_a, {M, K}), W));
      for (size_t i = 0; i < res_a.size(); ++i) res_a[i] += prod[i];

      std::vector<float> x_b = x0, res_b = res0, scratch(size_t(M * N));
      REQUIRE(cpu->matmul_add(view_of(res_b, {M, N}), view_of(x_b, {M, K}), W, view_of(scratch, {M, N})));
      CHECK(same_bits(res_a, res_b));
      CHECK(same_bits(prod, scratch));
      CHECK(same_bits(x_a, x_b));
    }
  }
}

TEST_CASE("cpu rmsnorm_matmul equals rmsnorm then matmul exactly", "[core]") {
  std::mt19937 rng(72);
  for (int32_t threads : thread_counts()) {
    auto cpu = cpu_backend(threads);
    for (int64_t M : {1, 3}) {
      const int64_t K = 100, N = 24;
      const float eps = 1e-5f;
      const auto x = random_floats(rng, size_t(M * K), -4.f, 4.f);
      HostTensor w = host_tensor(random_floats(rng, size_t(N * K)), DType::bf16, {N, K});
      HostTensor g = host_tensor(random_floats(rng, size_t(K), 0.5f, 1.5f), DType::f32, {K});
      Weight W;
      W.w = w.t;
      CAPTURE(threads, M);

      std::vector<float> x_a = x, normed_a(size_t(M * K)), out_a(size_t(M * N));
      REQUIRE(cpu->rmsnorm(view_of(normed_a, {M, K}), view_of(x_a, {M, K}), g.t, eps));
      REQUIRE(cpu->matmul(view_of(out_a, {M, N}), view_of(normed_a, {M, K}), W));

      std::vector<float> x_b = x, normed_b(size_t(M * K)), out_b(size_t(M * N));
      REQUIRE(cpu->rmsnorm_matmul(view_of(out_b, {M, N}), W, view_of(x_b, {M, K}), g.t, eps, view_of(normed_b, {M, K})));
      CHECK(same_bits(out_a, out_b));
      CHECK(same_bits(normed_a, normed_b));
      CHECK(same_bits(x_a, x_b));
    }
  }
}

TEST_CASE("cpu fused ops report shape errors and overlapping scratch", "[core]") {
  auto cpu = cpu_backend(0);
  std::mt19937 rng(73);
  HostTensor w = host_tensor(random_floats(rng, 8 * 16), DType::bf16, {8, 16});
  Weight W;
  W.w = w.t;
  std::vector<float> res(8), x(16), g(16, 1.f), normed(16), out(7), scratch(8);
  // rmsnorm_matmul: out has 7 columns for 8 weight rows.
  auto r = cpu->rmsnorm_matmul(view_of(out, {1, 7}), W, view_of(x, {1, 16}), view_of(g, {16}), 1e-5f,
                               view_of(normed, {1, 16}));
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == Errc::shape_mismatch);
  // matmul_add: a residual of 7 elements for an [1, 8] product.
  auto s = cpu->matmul_add(view_of(out, {1, 7}), view_of(x, {1, 16}), W, view_of(scratch, {1, 8}));
  REQUIRE_FALSE(s.has_value());
  CHECK(s.error().code == Errc::shape_mismatch);
  // matmul_add: the scratch must not be the residual.
  auto t = cpu->matmul_add(view_of(res, {1, 8}), view_of(x, {1, 16}), W, view_of(res, {1, 8}));
  REQUIRE_FALSE(t.has_value());
  CHECK(t.error().code == Errc::invalid_argument);
}
