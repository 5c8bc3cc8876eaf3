// The Backend's fused ops (add_rmsnorm_matmul, silu_mul_matmul): their
// default implementations, which the CPU backend uses, equal the separate
// ops bit for bit (the CPU backend is the CUDA fused kernels' twin).
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

TEST_CASE("cpu add_rmsnorm_matmul equals add_rmsnorm then matmul exactly", "[core]") {
  std::mt19937 rng(71);
  for (int32_t threads : thread_counts()) {
    auto cpu = cpu_backend(threads);
    for (int64_t M : {1, 5}) {
      const int64_t K = 72, N = 40;
      const float eps = 1e-5f;
      const auto res0 = random_floats(rng, size_t(M * K), -2.f, 2.f);
      const auto x0 = random_floats(rng, size_t(M * K), -2.f, 2.f);
      HostTensor w = host_tensor(random_floats(rng, size_t(N * K)), DType::bf16, {N, K});
      HostTensor g = host_tensor(random_floats(rng, size_t(K), 0.5f, 1.5f), DType::f32, {K});
      Weight W;
      W.w = w.t;
      CAPTURE(threads, M);

      std::vector<float> res_a = res0, x_a = x0, normed_a(size_t(M * K)), out_a(size_t(M * N));
      REQUIRE(cpu->add_rmsnorm(view_of(res_a, {M, K}), view_of(x_a, {M, K}), g.t, eps, view_of(normed_a, {M, K})));
      REQUIRE(cpu->matmul(view_of(out_a, {M, N}), view_of(normed_a, {M, K}), W));

      std::vector<float> res_b = res0, x_b = x0, normed_b(size_t(M * K)), out_b(size_t(M * N));
      REQUIRE(cpu->add_rmsnorm_matmul(view_of(out_b, {M, N}), W, view_of(res_b, {M, K}), view_of(x_b, {M, K}), g.t,
                                      eps, view_of(normed_b, {M, K})));
      CHECK(same_bits(out_a, out_b));
      CHECK(same_bits(res_a, res_b));
      CHECK(same_bits(normed_a, normed_b));
    }
  }
}

TEST_CASE("cpu silu_mul_matmul equals silu_mul then matmul exactly", "[core]") {
  std::mt19937 rng(72);
  for (int32_t threads : thread_counts()) {
    auto cpu = cpu_backend(threads);
    for (int64_t M : {1, 3}) {
      const int64_t I = 100, N = 24;
      const auto gu = random_floats(rng, size_t(M * 2 * I), -4.f, 4.f);
      HostTensor w = host_tensor(random_floats(rng, size_t(N * I)), DType::bf16, {N, I});
      Weight W;
      W.w = w.t;
      CAPTURE(threads, M);

      std::vector<float> gu_a = gu, mlp_a(size_t(M * I)), out_a(size_t(M * N));
      REQUIRE(cpu->silu_mul(view_of(mlp_a, {M, I}), view_of(gu_a, {M, 2 * I})));
      REQUIRE(cpu->matmul(view_of(out_a, {M, N}), view_of(mlp_a, {M, I}), W));

      std::vector<float> gu_b = gu, mlp_b(size_t(M * I)), out_b(size_t(M * N));
      REQUIRE(cpu->silu_mul_matmul(view_of(out_b, {M, N}), W, view_of(gu_b, {M, 2 * I}), view_of(mlp_b, {M, I})));
      CHECK(same_bits(out_a, out_b));
      CHECK(same_bits(mlp_a, mlp_b));
    }
  }
}

TEST_CASE("cpu fused ops report the composition's shape errors", "[core]") {
  auto cpu = cpu_backend(0);
  std::mt19937 rng(73);
  HostTensor w = host_tensor(random_floats(rng, 8 * 16), DType::bf16, {8, 16});
  Weight W;
  W.w = w.t;
  std::vector<float> res(16), x(16), g(16, 1.f), normed(16), out(7), gu(31), mlp(16);
  auto r = cpu->add_rmsnorm_matmul(view_of(out, {1, 7}), W, view_of(res, {1, 16}), view_of(x, {1, 16}),
                                   view_of(g, {16}), 1e-5f, view_of(normed, {1, 16}));
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == Errc::shape_mismatch);
  auto s = cpu->silu_mul_matmul(view_of(out, {1, 7}), W, view_of(gu, {1, 31}), view_of(mlp, {1, 16}));
  REQUIRE_FALSE(s.has_value());
  CHECK(s.error().code == Errc::shape_mismatch);
}
