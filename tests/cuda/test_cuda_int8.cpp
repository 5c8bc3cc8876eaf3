// The CUDA backend's int8 matmul (W8A16 GEMV for M <= 8, dequantize + bf16
// cuBLASLt above; with skinny_decode_matmul, 2..16 rows with K and group
// multiples of 64 on the tensor-core gemv_int8_skinny; with int8_one_row_gemv,
// the default, one row with K % 16 == 0 and a power-of-two group dividing K on
// the one-row GEMV with x staged, GemvArgs::w8; with int8_skinny_one_row, one
// row of K and group multiples of 64 on gemv_int8_skinny) against the CPU
// backend's int8 matmul on fresh random inputs: the same codes and scales
// (quantized on the host, core/quantize.hpp) on both backends, bf16-rounded
// x, poisoned outputs.
//
// Tolerances (norm-wise, see cuda_test_util.hpp):
//  - the GEMV and gemv_int8_skinny dequantize exactly (code * scale in fp32),
//    so their f32 output differs from the CPU only in summation order and in
//    applying each scale once per 16 codes (the skinny kernel: per 64):
//    kF32MatmulTol; bf16 output adds its own rounding: kBf16OutputTol;
//  - the large-M path rounds every dequantized weight to bf16 (relative error
//    <= 2^-9, RMS ~ 2^-9 / sqrt(3) ~ 1.1e-3, which reaches the output
//    norm-wise at the same size for random signs): f32 output 4e-3, bf16
//    output two such roundings (~1.6e-3 RMS): 6e-3.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/quantize.hpp"
#include "core/tensor.hpp"
#include "cuda/gemv_int8.cuh"
#include "cuda_test_util.hpp"

using namespace photon;
using namespace photon::test;

namespace {

constexpr double kDequantF32Tol = 4e-3;
constexpr double kDequantBf16Tol = 6e-3;

// A random [N, K] weight quantized to int8 groups of `group`, in host memory.
HostInt8 random_int8(std::mt19937& rng, int64_t N, int64_t K, int32_t group) {
  HostInt8 h{std::vector<int8_t>(size_t(N * K)), {}, N, K, int8_group_count(K, group), group};
  h.scales.resize(size_t(N * h.groups));
  // Row magnitudes spread over two decades, so the scales differ by row and group.
  std::uniform_real_distribution<float> mag(0.05f, 5.f);
  for (int64_t n = 0; n < N; ++n) {
    const float m = mag(rng);
    const std::vector<float> row = random_vec(rng, size_t(K), -m, m);
    REQUIRE(quantize_row_int8(row.data(), K, group, h.codes.data() + n * K, h.scales.data() + n * h.groups));
  }
  return h;
}

struct Case {
  int64_t N, K;
  int32_t group;
};

// One-row matmul_add of int8 W on both backends, residual `res` [1, N] (bf16-rounded), against the
// CPU within kBf16OutputTol (the exact paths: the dequantization is exact, one rounding of the sum).
void check_one_row_add(Backend& gpu, Backend& cpu, const DeviceInt8& gw, const DeviceInt8& cw, const DeviceTensor& gx,
                       const DeviceTensor& cx, const std::vector<float>& res) {
  const int64_t N = int64_t(res.size());
  DeviceTensor gres = upload(gpu, res, DType::bf16, {1, N});
  DeviceTensor cres = upload(cpu, res, DType::f32, {1, N});
  DeviceTensor gscratch = poisoned(gpu, DType::bf16, {1, N});
  DeviceTensor cscratch = poisoned(cpu, DType::f32, {1, N});
  REQUIRE(gpu.matmul_add(gres.t, gx.t, gw.weight(), gscratch.t).has_value());
  REQUIRE(cpu.matmul_add(cres.t, cx.t, cw.weight(), cscratch.t).has_value());
  CHECK(rel_error(download(gpu, gres.t), download(cpu, cres.t)) < kBf16OutputTol);
}

// Whether an M-row product of c dequantizes exactly on the GPU (the GEMV, or gemv_int8_skinny when
// skinny is on) rather than through bf16 weights and cuBLASLt.
bool exact_path(bool skinny, int64_t M, const Case& c) {
  const bool on_skinny = skinny && M >= 2 && M <= 16 && c.K % 64 == 0 && c.group % 64 == 0;
  return M <= cuda::kGemvInt8MaxRows || on_skinny;
}

}  // namespace

TEST_CASE("cuda int8 matmul matches the CPU int8 matmul (GEMV, gemv_int8_skinny, dequantize + cuBLASLt), bf16 and f32 out",
          "[cuda]") {
  const bool skinny = GENERATE(false, true);
  CAPTURE(skinny);
  auto gpu = cuda_backend(CudaBackendOptions{.skinny_decode_matmul = skinny});
  auto cpu = cpu_reference();
  REQUIRE(gpu->supports_int8_weights());
  std::mt19937 rng(41);
  // Model shapes (Llama-3.2-1B qkv, down; a wide gate_up); every
  // threads-per-column choice of the fast path (K / 16 = 128, 256, 512, 513,
  // 1025 chunks: 16, 32, 64, 128, 256 threads); groups 128 / 64 / 32 / 16 and
  // 48 (a shorter last group, a group index by division); the general path:
  // K % 16 != 0 (72, 8200), groups that are not multiples of 16 (20, 5); odd N.
  const std::vector<Case> cases = {{3072, 2048, 128}, {2048, 8192, 64}, {8192, 2048, 32}, {5000, 4096, 128},
                                   {1000, 4096, 48},  {300, 8192, 48},  {2048, 2048, 48}, {1000, 72, 48},
                                   {517, 8200, 128},  {100, 64, 20},    {33, 160, 5},     {7, 16, 128},
                                   {65, 8208, 16},   {3, 160, 32},     {40, 16400, 64}};
  for (const Case& c : cases) {
    const HostInt8 h = random_int8(rng, c.N, c.K, c.group);
    const DeviceInt8 gw = upload_int8(*gpu, h);
    const DeviceInt8 cw = upload_int8(*cpu, h);
    for (int64_t M : {1, 2, 5, 8, 12, 16, 33, 200}) {
      if (M > 33 && c.N * c.K > 20'000'000) continue;  // the CPU reference's time; 200 rows run on the others
      CAPTURE(M, c.N, c.K, c.group);
      const auto x = bf16_rounded(random_vec(rng, size_t(M * c.K)));
      DeviceTensor gx = upload(*gpu, x, DType::bf16, {M, c.K});
      DeviceTensor cx = upload(*cpu, x, DType::f32, {M, c.K});
      DeviceTensor cout = poisoned(*cpu, DType::f32, {M, c.N});
      REQUIRE(cpu->matmul(cout.t, cx.t, cw.weight()).has_value());
      const auto ref = download(*cpu, cout.t);
      const bool gemv = exact_path(skinny, M, c);
      DeviceTensor g16 = poisoned(*gpu, DType::bf16, {M, c.N});
      REQUIRE(gpu->matmul(g16.t, gx.t, gw.weight()).has_value());
      CHECK(rel_error(download(*gpu, g16.t), ref) < (gemv ? kBf16OutputTol : kDequantBf16Tol));
      DeviceTensor g32 = poisoned(*gpu, DType::f32, {M, c.N});
      REQUIRE(gpu->matmul(g32.t, gx.t, gw.weight()).has_value());
      CHECK(rel_error(download(*gpu, g32.t), ref) < (gemv ? kF32MatmulTol : kDequantF32Tol));
    }
  }
}

TEST_CASE("cuda int8 matmul_add matches the CPU (GEMV and gemv_int8_skinny accumulate, dequantize + cuBLASLt with beta = 1)",
          "[cuda]") {
  const bool skinny = GENERATE(false, true);
  CAPTURE(skinny);
  auto gpu = cuda_backend(CudaBackendOptions{.skinny_decode_matmul = skinny});
  auto cpu = cpu_reference();
  std::mt19937 rng(43);
  for (const Case& c : {Case{2048, 2048, 128}, Case{2048, 8192, 64}, Case{517, 8200, 128}, Case{33, 160, 5}}) {
    const HostInt8 h = random_int8(rng, c.N, c.K, c.group);
    const DeviceInt8 gw = upload_int8(*gpu, h);
    const DeviceInt8 cw = upload_int8(*cpu, h);
    for (int64_t M : {1, 5, 12, 16}) {  // the GEMV (M <= 8), gemv_int8_skinny, the dequantized cuBLASLt product
      CAPTURE(M, c.N, c.K, c.group);
      const auto res = bf16_rounded(random_vec(rng, size_t(M * c.N), -2.f, 2.f));
      const auto x = bf16_rounded(random_vec(rng, size_t(M * c.K)));
      DeviceTensor gres = upload(*gpu, res, DType::bf16, {M, c.N});
      DeviceTensor gx = upload(*gpu, x, DType::bf16, {M, c.K});
      DeviceTensor gscratch = poisoned(*gpu, DType::bf16, {M, c.N});
      DeviceTensor cres = upload(*cpu, res, DType::f32, {M, c.N});
      DeviceTensor cx = upload(*cpu, x, DType::f32, {M, c.K});
      DeviceTensor cscratch = poisoned(*cpu, DType::f32, {M, c.N});
      REQUIRE(gpu->matmul_add(gres.t, gx.t, gw.weight(), gscratch.t).has_value());
      REQUIRE(cpu->matmul_add(cres.t, cx.t, cw.weight(), cscratch.t).has_value());
      const bool gemv = exact_path(skinny, M, c);
      CHECK(rel_error(download(*gpu, gres.t), download(*cpu, cres.t)) < (gemv ? kBf16OutputTol : kDequantBf16Tol));
    }
  }
}

TEST_CASE("cuda int8 matmul rejects inconsistent int8 weights", "[cuda]") {
  auto gpu = cuda_backend();
  std::mt19937 rng(42);
  const HostInt8 h = random_int8(rng, 10, 64, 32);
  DeviceInt8 w = upload_int8(*gpu, h);
  DeviceTensor x = upload(*gpu, random_vec(rng, 3 * 64), DType::bf16, {3, 64});
  DeviceTensor out = poisoned(*gpu, DType::f32, {3, 10});
  SECTION("scales of the wrong group count") {
    Weight W = w.weight();
    W.group_size = 16;  // 4 groups per row, the scales hold 2
    auto r = gpu->matmul(out.t, x.t, W);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == Errc::shape_mismatch);
    CHECK_THAT(r.error().message, Catch::Contains("scales"));
  }
  SECTION("no group size") {
    Weight W = w.weight();
    W.group_size = 0;
    auto r = gpu->matmul(out.t, x.t, W);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == Errc::shape_mismatch);
  }
  SECTION("scales that are not f32") {
    Weight W = w.weight();
    W.scales.dtype = DType::bf16;
    W.scales.shape[1] *= 2;
    auto r = gpu->matmul(out.t, x.t, W);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == Errc::shape_mismatch);
  }
}

TEST_CASE("cuda int8 matmul_silu matches the CPU (product + silu_mul, or gemv_int8_skinny's SwiGLU mode)", "[cuda]") {
  // The SwiGLU mode serves 2..16 rows with K and group multiples of 64 (unless
  // PHOTON_CUDA_INT8_SKINNY_SILU=0); otherwise the int8 product into the scratch, then silu_mul. Both dequantize exactly at 2..16 rows with skinny on; gate and up are rounded to bf16
  // before SwiGLU, then the output: twice the one-rounding bound (the dequantized cuBLASLt path:
  // twice its own).
  const bool skinny = GENERATE(false, true);
  CAPTURE(skinny);
  auto gpu = cuda_backend(CudaBackendOptions{.skinny_decode_matmul = skinny});
  auto cpu = cpu_reference();
  std::mt19937 rng(44);
  for (const Case& c :
       {Case{2 * 8192, 2048, 128}, Case{2 * 300, 512, 64}, Case{2 * 1000, 1024, 128}, Case{2 * 40, 160, 32}}) {
    const HostInt8 h = random_int8(rng, c.N, c.K, c.group);
    const DeviceInt8 gw = upload_int8(*gpu, h);
    const DeviceInt8 cw = upload_int8(*cpu, h);
    const int64_t I = c.N / 2;
    for (int64_t M : {1, 2, 5, 12, 16, 20}) {
      CAPTURE(M, I, c.K, c.group);
      const auto x = bf16_rounded(random_vec(rng, size_t(M * c.K)));
      DeviceTensor gx = upload(*gpu, x, DType::bf16, {M, c.K});
      DeviceTensor gout = poisoned(*gpu, DType::bf16, {M, I});
      DeviceTensor gscratch = poisoned(*gpu, DType::bf16, {M, 2 * I});
      DeviceTensor cx = upload(*cpu, x, DType::f32, {M, c.K});
      DeviceTensor cout = poisoned(*cpu, DType::f32, {M, I});
      DeviceTensor cscratch = poisoned(*cpu, DType::f32, {M, 2 * I});
      REQUIRE(gpu->matmul_silu(gout.t, gx.t, gw.weight(), gscratch.t).has_value());
      REQUIRE(cpu->matmul_silu(cout.t, cx.t, cw.weight(), cscratch.t).has_value());
      const bool exact = exact_path(skinny, M, c);
      CHECK(rel_error(download(*gpu, gout.t), download(*cpu, cout.t)) <
            2 * (exact ? kBf16OutputTol : kDequantBf16Tol));
    }
  }
}

TEST_CASE("cuda int8 one-row products on gemv_int8_skinny match the CPU", "[cuda]") {
  // CudaBackendOptions::int8_skinny_one_row: one-row matmul and matmul_add of K and group multiples
  // of 64 on the tensor-core kernel where N / 16 blocks fit one wave (1, the default), every such
  // product and matmul_silu too (2). The dequantization is exact (code * scale in fp32, each scale
  // applied once per 64 codes), so the tolerances are the exact paths' (kF32MatmulTol,
  // kBf16OutputTol); x spans ordinary values, a wide spread of magnitudes (2^-30 to 2^12, with
  // zeros), large (1e6) and tiny (1e-30) ones. Group 192 takes the group index by division.
  const int32_t one_row = GENERATE(1, 2);
  CAPTURE(one_row);
  auto gpu = cuda_backend(CudaBackendOptions{.skinny_decode_matmul = true, .int8_skinny_one_row = one_row});
  auto cpu = cpu_reference();
  std::mt19937 rng(53);
  enum class X { plain, spread, huge, tiny };
  auto make_x = [&](int64_t K, X kind) {
    std::vector<float> x = random_vec(rng, size_t(K));
    std::uniform_real_distribution<float> e(-30.f, 12.f);
    for (size_t i = 0; i < x.size(); ++i) {
      if (kind == X::spread) x[i] = i % 17 == 3 ? 0.f : std::copysign(std::exp2(e(rng)), x[i]);
      if (kind == X::huge) x[i] *= 1e6f;
      if (kind == X::tiny) x[i] *= 1e-30f;
    }
    return bf16_rounded(x);
  };
  for (const Case& c : {Case{3072, 2048, 128}, Case{2048, 8192, 64}, Case{4096, 12288, 128}, Case{517, 8192, 192},
                        Case{40, 24640, 64}, Case{2 * 8192, 2048, 128}, Case{2 * 300, 1024, 64},
                        Case{2048, 2048, 320}}) {
    const HostInt8 h = random_int8(rng, c.N, c.K, c.group);
    const DeviceInt8 gw = upload_int8(*gpu, h);
    const DeviceInt8 cw = upload_int8(*cpu, h);
    for (X kind : {X::plain, X::spread, X::huge, X::tiny}) {
      CAPTURE(c.N, c.K, c.group, int(kind));
      const auto x = make_x(c.K, kind);
      DeviceTensor gx = upload(*gpu, x, DType::bf16, {1, c.K});
      DeviceTensor cx = upload(*cpu, x, DType::f32, {1, c.K});
      DeviceTensor cout = poisoned(*cpu, DType::f32, {1, c.N});
      REQUIRE(cpu->matmul(cout.t, cx.t, cw.weight()).has_value());
      const auto ref = download(*cpu, cout.t);
      DeviceTensor g32 = poisoned(*gpu, DType::f32, {1, c.N});
      REQUIRE(gpu->matmul(g32.t, gx.t, gw.weight()).has_value());
      CHECK(rel_error(download(*gpu, g32.t), ref) < kF32MatmulTol);
      DeviceTensor g16 = poisoned(*gpu, DType::bf16, {1, c.N});
      REQUIRE(gpu->matmul(g16.t, gx.t, gw.weight()).has_value());
      CHECK(rel_error(download(*gpu, g16.t), ref) < kBf16OutputTol);
      // add: a residual of the output's size, so the sum keeps the product's share.
      double mag = 0;
      for (float v : ref) mag = std::max(mag, double(std::fabs(v)));
      check_one_row_add(*gpu, *cpu, gw, cw, gx, cx,
                        bf16_rounded(random_vec(rng, size_t(c.N), -float(mag), float(mag))));
      if (c.N % 2 == 0 && (kind == X::plain || kind == X::spread)) {  // silu(g) * u of 1e-30-scale x underflows
        const int64_t I = c.N / 2;
        DeviceTensor gout = poisoned(*gpu, DType::bf16, {1, I});
        DeviceTensor gs2 = poisoned(*gpu, DType::bf16, {1, 2 * I});
        DeviceTensor csout = poisoned(*cpu, DType::f32, {1, I});
        DeviceTensor cs2 = poisoned(*cpu, DType::f32, {1, 2 * I});
        REQUIRE(gpu->matmul_silu(gout.t, gx.t, gw.weight(), gs2.t).has_value());
        REQUIRE(cpu->matmul_silu(csout.t, cx.t, cw.weight(), cs2.t).has_value());
        CHECK(rel_error(download(*gpu, gout.t), download(*cpu, csout.t)) < 2 * kBf16OutputTol);
      }
    }
  }
  SECTION("all-zero x gives exact zeros") {
    const HostInt8 h = random_int8(rng, 256, 2048, 128);
    const DeviceInt8 gw = upload_int8(*gpu, h);
    DeviceTensor gx = upload(*gpu, std::vector<float>(2048, 0.f), DType::bf16, {1, 2048});
    DeviceTensor g32 = poisoned(*gpu, DType::f32, {1, 256});
    REQUIRE(gpu->matmul(g32.t, gx.t, gw.weight()).has_value());
    for (float v : download(*gpu, g32.t)) REQUIRE(v == 0.f);
  }
}

TEST_CASE("cuda int8 one-row GEMV (x staged, the norm and SwiGLU inside) matches the CPU int8 products", "[cuda]") {
  // CudaBackendOptions::int8_one_row_gemv: one-row products of int8 weights whose K is a multiple
  // of 16 and whose group is a power of two >= 16 dividing K run on the one-row GEMV with x staged
  // (GemvArgs::w8); rmsnorm_matmul(_silu) fold the norm, so h is never written. Other shapes run
  // the int8 GEMV (h holds the normed row). Tolerances as for bf16 weights (the dequantization is
  // exact, each scale applied once per 16 codes): the pair's.
  const bool early = GENERATE(false, true);
  CAPTURE(early);
  using E = CudaBackendOptions::GemvEarly;
  auto gpu = cuda_backend(CudaBackendOptions{
      .gemv_early_weights = early ? E::all : E::none, .int8_one_row_gemv = true, .int8_skinny_one_row = 0});
  auto cpu = cpu_reference();
  std::mt19937 rng(47);
  const float eps = 1e-5f;
  struct Shape {
    int64_t N, K;
    int32_t group;
    bool silu;
  };
  for (Shape s : {Shape{3072, 2048, 128, false}, Shape{2048, 8192, 128, false}, Shape{1000, 4096, 32, false},
                  Shape{517, 2048, 16, false}, Shape{32000, 2048, 128, false}, Shape{8192, 2048, 128, true},
                  Shape{1000, 4096, 64, true}, Shape{301, 8192, 256, true}, Shape{100, 72, 48, false},
                  Shape{1000, 2048, 48, true}}) {
    const int64_t rows = s.silu ? 2 * s.N : s.N;
    CAPTURE(s.N, s.K, s.group, s.silu);
    const bool folded = s.K % 16 == 0 && s.K % s.group == 0 && s.group % 16 == 0 &&
                        ((s.group / 16) & (s.group / 16 - 1)) == 0;
    const HostInt8 h = random_int8(rng, rows, s.K, s.group);
    const DeviceInt8 gw = upload_int8(*gpu, h);
    const DeviceInt8 cw = upload_int8(*cpu, h);
    const auto x = bf16_rounded(random_vec(rng, size_t(s.K), -2.f, 2.f));
    const auto g = bf16_rounded(random_vec(rng, size_t(s.K), 0.5f, 1.5f));
    DeviceTensor gx = upload(*gpu, x, DType::bf16, {1, s.K});
    DeviceTensor gg = upload(*gpu, g, DType::bf16, {s.K});
    DeviceTensor gh = poisoned(*gpu, DType::bf16, {1, s.K});
    DeviceTensor gscratch = poisoned(*gpu, DType::bf16, {1, rows});
    DeviceTensor cx = upload(*cpu, x, DType::f32, {1, s.K});
    DeviceTensor cg = upload(*cpu, g, DType::f32, {s.K});
    DeviceTensor ch = poisoned(*cpu, DType::f32, {1, s.K});
    DeviceTensor cscratch = poisoned(*cpu, DType::f32, {1, rows});
    DeviceTensor cout = poisoned(*cpu, DType::f32, {1, s.N});
    if (s.silu) {
      REQUIRE(cpu->rmsnorm_matmul_silu(cout.t, cx.t, cg.t, eps, cw.weight(), ch.t, cscratch.t).has_value());
      DeviceTensor gout = poisoned(*gpu, DType::bf16, {1, s.N});
      REQUIRE(gpu->rmsnorm_matmul_silu(gout.t, gx.t, gg.t, eps, gw.weight(), gh.t, gscratch.t).has_value());
      CHECK(rel_error(download(*gpu, gout.t), download(*cpu, cout.t)) < 2 * kBf16OutputTol);
    } else {
      REQUIRE(cpu->rmsnorm_matmul(cout.t, cx.t, cg.t, eps, cw.weight(), ch.t).has_value());
      const auto ref = download(*cpu, cout.t);
      DeviceTensor g16 = poisoned(*gpu, DType::bf16, {1, s.N});
      REQUIRE(gpu->rmsnorm_matmul(g16.t, gx.t, gg.t, eps, gw.weight(), gh.t).has_value());
      CHECK(rel_error(download(*gpu, g16.t), ref) < 2 * kBf16OutputTol);
      DeviceTensor g32 = poisoned(*gpu, DType::f32, {1, s.N});
      REQUIRE(gpu->rmsnorm_matmul(g32.t, gx.t, gg.t, eps, gw.weight(), gh.t).has_value());
      CHECK(rel_error(download(*gpu, g32.t), ref) < kBf16OutputTol);
      // Without a norm: x staged, plain and add modes (matmul, matmul_add).
      DeviceTensor cplain = poisoned(*cpu, DType::f32, {1, s.N});
      REQUIRE(cpu->matmul(cplain.t, cx.t, cw.weight()).has_value());
      DeviceTensor gplain = poisoned(*gpu, DType::f32, {1, s.N});
      REQUIRE(gpu->matmul(gplain.t, gx.t, gw.weight()).has_value());
      CHECK(rel_error(download(*gpu, gplain.t), download(*cpu, cplain.t)) < kF32MatmulTol);
      check_one_row_add(*gpu, *cpu, gw, cw, gx, cx, bf16_rounded(random_vec(rng, size_t(s.N), -2.f, 2.f)));
    }
    // Folded: h is never written. Otherwise the int8 GEMV after the norm kernel: h holds the normed row.
    const auto hv = download(*gpu, gh.t);
    if (folded) {
      for (float v : hv) REQUIRE(std::isnan(v));
    } else {
      CHECK(rel_error(hv, download(*cpu, ch.t)) < kBf16OutputTol);
    }
  }
}

TEST_CASE("cuda one-row normed GEMV in passes (CudaBackendOptions::gemv_passes_min_n) matches the plain launch "
          "bit for bit and the CPU, bf16 and int8 weights",
          "[cuda]") {
  // gemv_passes_kernel: one wave of blocks, each staging x * norm_w once and streaming many column
  // groups. Rows of a multiple of 128 chunks in tiles of 4 loads per lane (bf16 K % 1024, int8
  // K % 2048), one tile per column (the dispatched rows of 2 KB) and two (bf16 K = 2048, int8
  // K = 4096: past the default row bound, lifted here); rows of an odd multiple of 64 chunks in tiles
  // of 2 (int8 K = 1024, bf16 K = 512 and 1536); N past the grid's 4 blocks per SM of 8 columns (many
  // groups per block), N not a multiple of 8, and N below one group per block. Where the plain
  // launch has one warp per column (N >= 8192, or K <= 1024, or int8) the results are bit-identical;
  // both are within the pair's tolerances of the CPU.
  const bool early = GENERATE(false, true);
  CAPTURE(early);
  using E = CudaBackendOptions::GemvEarly;
  auto passes = cuda_backend(CudaBackendOptions{.gemv_early_weights = early ? E::all : E::none,
                                                .gemv_passes_min_n = 1,
                                                .gemv_passes_max_row_bytes = 1 << 20,
                                                .int8_one_row_gemv = true});
  auto plain = cuda_backend(CudaBackendOptions{.gemv_early_weights = early ? E::all : E::none,
                                               .gemv_passes_min_n = 0,
                                               .int8_one_row_gemv = true});
  auto cpu = cpu_reference();
  std::mt19937 rng(53);
  const float eps = 1e-5f;
  struct Shape {
    int64_t N, K;
    int32_t group;  // 0: bf16 weights
  };
  for (Shape s : {Shape{151936, 1024, 0}, Shape{8203, 1024, 0}, Shape{40000, 2048, 0}, Shape{300, 1024, 0},
                  Shape{128256, 2048, 128}, Shape{5003, 2048, 64}, Shape{9000, 4096, 128}, Shape{100, 2048, 2048},
                  Shape{151936, 1024, 128}, Shape{3001, 1024, 32}, Shape{20000, 512, 0}, Shape{9000, 1536, 0}}) {
    CAPTURE(s.N, s.K, s.group);
    const auto x = bf16_rounded(random_vec(rng, size_t(s.K), -2.f, 2.f));
    const auto g = bf16_rounded(random_vec(rng, size_t(s.K), 0.5f, 1.5f));
    DeviceTensor cx = upload(*cpu, x, DType::f32, {1, s.K});
    DeviceTensor cg = upload(*cpu, g, DType::f32, {s.K});
    DeviceTensor ch = poisoned(*cpu, DType::f32, {1, s.K});
    DeviceTensor cout = poisoned(*cpu, DType::f32, {1, s.N});
    std::vector<float> outs[2][2];  // [passes, plain][bf16, f32 out]
    if (s.group > 0) {
      const HostInt8 h = random_int8(rng, s.N, s.K, s.group);
      const DeviceInt8 cw = upload_int8(*cpu, h);
      REQUIRE(cpu->rmsnorm_matmul(cout.t, cx.t, cg.t, eps, cw.weight(), ch.t).has_value());
      for (int b = 0; b < 2; ++b) {
        Backend& gpu = b == 0 ? *passes : *plain;
        const DeviceInt8 gw = upload_int8(gpu, h);
        DeviceTensor gx = upload(gpu, x, DType::bf16, {1, s.K});
        DeviceTensor gg = upload(gpu, g, DType::bf16, {s.K});
        DeviceTensor gh = poisoned(gpu, DType::bf16, {1, s.K});
        for (int f = 0; f < 2; ++f) {
          DeviceTensor o = poisoned(gpu, f ? DType::f32 : DType::bf16, {1, s.N});
          REQUIRE(gpu.rmsnorm_matmul(o.t, gx.t, gg.t, eps, gw.weight(), gh.t).has_value());
          outs[b][f] = download(gpu, o.t);
        }
      }
    } else {
      const auto w = bf16_rounded(random_vec(rng, size_t(s.N * s.K), -0.2f, 0.2f));
      DeviceTensor cw = upload(*cpu, w, DType::bf16, {s.N, s.K});
      REQUIRE(cpu->rmsnorm_matmul(cout.t, cx.t, cg.t, eps, weight_of(cw), ch.t).has_value());
      for (int b = 0; b < 2; ++b) {
        Backend& gpu = b == 0 ? *passes : *plain;
        DeviceTensor gw = upload(gpu, w, DType::bf16, {s.N, s.K});
        DeviceTensor gx = upload(gpu, x, DType::bf16, {1, s.K});
        DeviceTensor gg = upload(gpu, g, DType::bf16, {s.K});
        DeviceTensor gh = poisoned(gpu, DType::bf16, {1, s.K});
        for (int f = 0; f < 2; ++f) {
          DeviceTensor o = poisoned(gpu, f ? DType::f32 : DType::bf16, {1, s.N});
          REQUIRE(gpu.rmsnorm_matmul(o.t, gx.t, gg.t, eps, weight_of(gw), gh.t).has_value());
          outs[b][f] = download(gpu, o.t);
        }
      }
    }
    const auto ref = download(*cpu, cout.t);
    CHECK(rel_error(outs[0][0], ref) < 2 * kBf16OutputTol);
    CHECK(rel_error(outs[0][1], ref) < kBf16OutputTol);
    if (s.group > 0 || s.N >= 8192 || s.K <= 1024) {
      CHECK(outs[0][0] == outs[1][0]);
      CHECK(outs[0][1] == outs[1][1]);
    }
  }
}
