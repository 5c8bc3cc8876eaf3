// The Backend's fused ops on the CPU backend: matmul_add equals matmul then an
// add, matmul_silu equals matmul then silu_mul, and rmsnorm_matmul(_silu)
// equal rmsnorm then the product, bit for bit (the CPU backend is the CUDA
// fused kernels' twin).
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

TEST_CASE("cpu matmul_add reports shape errors and overlapping scratch", "[core]") {
  auto cpu = cpu_backend(0);
  std::mt19937 rng(73);
  HostTensor w = host_tensor(random_floats(rng, 8 * 16), DType::bf16, {8, 16});
  Weight W;
  W.w = w.t;
  std::vector<float> res(8), x(16), out(7), scratch(8);
  // matmul_add: a residual of 7 elements for an [1, 8] product.
  auto s = cpu->matmul_add(view_of(out, {1, 7}), view_of(x, {1, 16}), W, view_of(scratch, {1, 8}));
  REQUIRE_FALSE(s.has_value());
  CHECK(s.error().code == Errc::shape_mismatch);
  // matmul_add: the scratch must not be the residual.
  auto t = cpu->matmul_add(view_of(res, {1, 8}), view_of(x, {1, 16}), W, view_of(res, {1, 8}));
  REQUIRE_FALSE(t.has_value());
  CHECK(t.error().code == Errc::invalid_argument);
  // matmul_add: nor may the residual overlap x.
  auto u = cpu->matmul_add(view_of(x, {1, 8}), view_of(x, {1, 16}), W, view_of(scratch, {1, 8}));
  REQUIRE_FALSE(u.has_value());
  CHECK(u.error().code == Errc::invalid_argument);
}

TEST_CASE("cpu matmul_silu equals matmul then silu_mul exactly", "[core]") {
  std::mt19937 rng(75);
  for (int32_t threads : thread_counts()) {
    auto cpu = cpu_backend(threads);
    for (int64_t M : {1, 5}) {
      const int64_t K = 72, I = 20;
      const auto x0 = random_floats(rng, size_t(M * K), -2.f, 2.f);
      HostTensor w = host_tensor(random_floats(rng, size_t(2 * I * K)), DType::bf16, {2 * I, K});
      Weight W;
      W.w = w.t;
      CAPTURE(threads, M);

      std::vector<float> x_a = x0, prod(size_t(M * 2 * I)), out_a(size_t(M * I));
      REQUIRE(cpu->matmul(view_of(prod, {M, 2 * I}), view_of(x_a, {M, K}), W));
      REQUIRE(cpu->silu_mul(view_of(out_a, {M, I}), view_of(prod, {M, 2 * I})));

      std::vector<float> x_b = x0, out_b(size_t(M * I)), scratch(size_t(M * 2 * I));
      REQUIRE(cpu->matmul_silu(view_of(out_b, {M, I}), view_of(x_b, {M, K}), W, view_of(scratch, {M, 2 * I})));
      CHECK(same_bits(out_a, out_b));
      CHECK(same_bits(prod, scratch));
      CHECK(same_bits(x_a, x_b));
    }
  }
}

TEST_CASE("cpu matmul_silu reports shape errors and a scratch that is the output", "[core]") {
  auto cpu = cpu_backend(0);
  std::mt19937 rng(77);
  HostTensor w = host_tensor(random_floats(rng, 8 * 16), DType::bf16, {8, 16});
  Weight W;
  W.w = w.t;
  std::vector<float> x(16), out(4), out3(3), scratch(8), scratch6(6);
  // An output of 3 for I = 4.
  auto a = cpu->matmul_silu(view_of(out3, {1, 3}), view_of(x, {1, 16}), W, view_of(scratch, {1, 8}));
  REQUIRE_FALSE(a.has_value());
  CHECK(a.error().code == Errc::shape_mismatch);
  // A scratch too small for the [1, 8] product.
  auto b = cpu->matmul_silu(view_of(out, {1, 4}), view_of(x, {1, 16}), W, view_of(scratch6, {1, 6}));
  REQUIRE_FALSE(b.has_value());
  CHECK(b.error().code == Errc::shape_mismatch);
  // The scratch must not be the output.
  auto c = cpu->matmul_silu(view_of(scratch, {1, 4}), view_of(x, {1, 16}), W, view_of(scratch, {1, 8}));
  REQUIRE_FALSE(c.has_value());
  CHECK(c.error().code == Errc::invalid_argument);
}

TEST_CASE("cpu rmsnorm_matmul(_silu) equal rmsnorm into h then the product exactly", "[core]") {
  std::mt19937 rng(79);
  for (int32_t threads : thread_counts()) {
    auto cpu = cpu_backend(threads);
    for (int64_t M : {1, 5}) {
      const int64_t K = 72, N = 40, I = 20;
      const float eps = 1e-5f;
      const auto x0 = random_floats(rng, size_t(M * K), -2.f, 2.f);
      std::vector<float> g = random_floats(rng, size_t(K), 0.5f, 1.5f);
      HostTensor w = host_tensor(random_floats(rng, size_t(N * K)), DType::bf16, {N, K});
      HostTensor wgu = host_tensor(random_floats(rng, size_t(2 * I * K)), DType::bf16, {2 * I, K});
      Weight W, Wgu;
      W.w = w.t;
      Wgu.w = wgu.t;
      CAPTURE(threads, M);

      std::vector<float> x_a = x0, h_a(size_t(M * K)), out_a(size_t(M * N)), silu_a(size_t(M * I)),
          scratch_a(size_t(M * 2 * I));
      REQUIRE(cpu->rmsnorm(view_of(h_a, {M, K}), view_of(x_a, {M, K}), view_of(g, {K}), eps));
      REQUIRE(cpu->matmul(view_of(out_a, {M, N}), view_of(h_a, {M, K}), W));
      REQUIRE(cpu->matmul_silu(view_of(silu_a, {M, I}), view_of(h_a, {M, K}), Wgu, view_of(scratch_a, {M, 2 * I})));

      std::vector<float> x_b = x0, h_b(size_t(M * K)), out_b(size_t(M * N));
      REQUIRE(cpu->rmsnorm_matmul(view_of(out_b, {M, N}), view_of(x_b, {M, K}), view_of(g, {K}), eps, W,
                                  view_of(h_b, {M, K})));
      CHECK(same_bits(out_a, out_b));
      CHECK(same_bits(h_a, h_b));
      CHECK(same_bits(x_a, x_b));
      std::vector<float> h_c(size_t(M * K)), silu_c(size_t(M * I)), scratch_c(size_t(M * 2 * I));
      REQUIRE(cpu->rmsnorm_matmul_silu(view_of(silu_c, {M, I}), view_of(x_b, {M, K}), view_of(g, {K}), eps, Wgu,
                                       view_of(h_c, {M, K}), view_of(scratch_c, {M, 2 * I})));
      CHECK(same_bits(silu_a, silu_c));
      CHECK(same_bits(h_a, h_c));
    }
  }
}

TEST_CASE("cpu rmsnorm_matmul reports a norm weight of the wrong length", "[core]") {
  auto cpu = cpu_backend(0);
  std::mt19937 rng(81);
  HostTensor w = host_tensor(random_floats(rng, 8 * 16), DType::bf16, {8, 16});
  Weight W;
  W.w = w.t;
  std::vector<float> x(16), g15(15, 1.f), h(16), out(8);
  auto a = cpu->rmsnorm_matmul(view_of(out, {1, 8}), view_of(x, {1, 16}), view_of(g15, {15}), 1e-5f, W,
                               view_of(h, {1, 16}));
  REQUIRE_FALSE(a.has_value());
  CHECK(a.error().code == Errc::shape_mismatch);
}
