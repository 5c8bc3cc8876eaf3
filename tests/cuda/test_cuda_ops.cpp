// Every CUDA op against the CPU backend on fresh random inputs, with
// poisoned outputs, ragged shapes and sizes that are not multiples of 32.
// Tolerances: see cuda_test_util.hpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "cuda/dispatch_policy.hpp"
#include "cuda_test_util.hpp"

using namespace photon;
using namespace photon::test;

TEST_CASE("cuda embed gathers table rows exactly", "[cuda]") {
  auto gpu = cuda_backend();
  std::mt19937 rng(11);
  for (int64_t H : {72, 2048, 100}) {
    const int64_t V = 1000;
    const std::vector<float> table = bf16_rounded(random_vec(rng, size_t(V * H)));
    DeviceTensor t = upload(*gpu, table, DType::bf16, {V, H});
    BatchPlan plan = scattered_plan({{40, 40}, {7, 1}, {19, 3}}, 16, 31, rng, int32_t(V));
    auto view = gpu->stage_plan(plan);
    REQUIRE(view.has_value());
    const int64_t T = plan.num_tokens();
    DeviceTensor out = poisoned(*gpu, DType::bf16, {T, H});
    REQUIRE(gpu->embed(out.t, weight_of(t), *view).has_value());
    const std::vector<float> got = download(*gpu, out.t);
    for (int64_t i = 0; i < T; ++i)
      for (int64_t h = 0; h < H; ++h)
        REQUIRE(got[size_t(i * H + h)] == table[size_t(plan.input_ids[size_t(i)] * H + h)]);
  }
}

TEST_CASE("cuda embed rejects token ids outside the table", "[cuda]") {
  auto gpu = cuda_backend();
  std::mt19937 rng(12);
  DeviceTensor t = upload(*gpu, random_vec(rng, 10 * 64), DType::bf16, {10, 64});
  BatchPlan plan = scattered_plan({{3, 3}}, 16, 4, rng, 10);
  plan.input_ids[1] = 10;
  auto view = gpu->stage_plan(plan);
  REQUIRE(view.has_value());
  DeviceTensor out = poisoned(*gpu, DType::bf16, {3, 64});
  auto r = gpu->embed(out.t, weight_of(t), *view);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == Errc::out_of_range);
}

TEST_CASE("cuda rmsnorm matches the CPU (rows in registers up to H = 8192, any H above)", "[cuda]") {
  auto gpu = cuda_backend();
  auto cpu = cpu_reference();
  std::mt19937 rng(13);
  for (DType wdt : {DType::bf16, DType::f32}) {
    for (int64_t H : {64, 72, 2048, 100, 4104, 8200}) {
      const int64_t rows = 37;
      const float eps = 1e-5f;
      const auto x = bf16_rounded(random_vec(rng, size_t(rows * H), -2.f, 2.f));
      const auto w = bf16_rounded(random_vec(rng, size_t(H), 0.5f, 1.5f));
      CAPTURE(H, dtype_name(wdt));

      // plain, out distinct from x, then in place
      DeviceTensor gx = upload(*gpu, x, DType::bf16, {rows, H});
      DeviceTensor gw = upload(*gpu, w, wdt, {H});
      DeviceTensor gout = poisoned(*gpu, DType::bf16, {rows, H});
      DeviceTensor cx = upload(*cpu, x, DType::f32, {rows, H});
      DeviceTensor cw = upload(*cpu, w, DType::f32, {H});
      DeviceTensor cout = poisoned(*cpu, DType::f32, {rows, H});
      REQUIRE(gpu->rmsnorm(gout.t, gx.t, gw.t, eps).has_value());
      REQUIRE(cpu->rmsnorm(cout.t, cx.t, cw.t, eps).has_value());
      const auto ref = download(*cpu, cout.t);
      CHECK(rel_error(download(*gpu, gout.t), ref) < kBf16OutputTol);
      REQUIRE(gpu->rmsnorm(gx.t, gx.t, gw.t, eps).has_value());
      CHECK(rel_error(download(*gpu, gx.t), ref) < kBf16OutputTol);
    }
  }
}

TEST_CASE("cuda silu_mul and gather_logit_rows match the CPU", "[cuda]") {
  auto gpu = cuda_backend();
  auto cpu = cpu_reference();
  std::mt19937 rng(14);
  for (int64_t I : {192, 8192, 100}) {
    const int64_t T = 13;
    const auto gu = bf16_rounded(random_vec(rng, size_t(T * 2 * I), -4.f, 4.f));
    DeviceTensor g = upload(*gpu, gu, DType::bf16, {T, 2 * I});
    DeviceTensor c = upload(*cpu, gu, DType::f32, {T, 2 * I});
    DeviceTensor gout = poisoned(*gpu, DType::bf16, {T, I});
    DeviceTensor cout = poisoned(*cpu, DType::f32, {T, I});
    REQUIRE(gpu->silu_mul(gout.t, g.t).has_value());
    REQUIRE(cpu->silu_mul(cout.t, c.t).has_value());
    CAPTURE(I);
    CHECK(rel_error(download(*gpu, gout.t), download(*cpu, cout.t)) < kBf16OutputTol);
  }
  for (int64_t H : {64, 2050}) {
    BatchPlan plan = scattered_plan({{20, 20}, {5, 1}, {9, 9}}, 16, 8, rng);
    plan.logits_rows = {28, 0, 19, 20};
    const int64_t T = plan.num_tokens(), R = plan.num_logits();
    const auto x = bf16_rounded(random_vec(rng, size_t(T * H)));
    DeviceTensor gx = upload(*gpu, x, DType::bf16, {T, H});
    DeviceTensor gout = poisoned(*gpu, DType::bf16, {R, H});
    auto view = gpu->stage_plan(plan);
    REQUIRE(view.has_value());
    REQUIRE(gpu->gather_logit_rows(gout.t, gx.t, *view).has_value());
    const auto got = download(*gpu, gout.t);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t h = 0; h < H; ++h)
        REQUIRE(got[size_t(r * H + h)] == x[size_t(plan.logits_rows[size_t(r)] * H + h)]);
  }
}

TEST_CASE("cuda matmul (GEMV and cuBLASLt) matches the CPU, bf16 and f32 outputs", "[cuda]") {
  // The GEMV's first round of weights before pdl_wait() (1: the whole round of 8 loads), also with
  // K split over half the warps (2: the default 4 loads of the round early, 3: one); x staged in
  // shared memory or read through L1.
  // 4: rounds of 4 loads per lane, 5: of 2 (GemvArgs::unroll), with the default early loads.
  const int early = GENERATE(0, 1, 2, 3, 4, 5);
  const bool stage_x = GENERATE(false, true);
  CAPTURE(early, stage_x);
  using E = CudaBackendOptions::GemvEarly;
  const int32_t unroll = early == 4 ? 4 : early == 5 ? 2 : 8;
  auto gpu = cuda_backend(CudaBackendOptions{.gemv_early_weights = early > 0 ? E::all : E::none,
                                             .gemv_early_half_ks = early >= 2,
                                             .gemv_early_chunks = early == 1 ? 8 : early == 3 ? 1 : 4,
                                             .gemv_unroll_add = unroll,
                                             .gemv_unroll_silu = unroll,
                                             .gemv_unroll_rope = unroll,
                                             .gemv_unroll_plain = unroll,
                                             .gemv_stage_x = stage_x});
  auto cpu = cpu_reference();
  std::mt19937 rng(15);
  struct Shape {
    int64_t M, N, K;
  };
  // M = 1 with K % 8 == 0 runs the GEMV kernel (one K-split variant per N range); the rest cuBLASLt
  // (2 <= M <= 64 on the tensor-core kernel when asked: next test case).
  for (Shape s : {Shape{1, 2048, 2048}, Shape{1, 1000, 72}, Shape{1, 8192, 2048}, Shape{1, 517, 8200}, Shape{1, 300, 16400},
                  Shape{1, 5000, 4096}, Shape{1, 100, 36}, Shape{3, 1000, 72}, Shape{7, 3072, 2048},
                  Shape{33, 1000, 72}, Shape{128, 512, 384}, Shape{300, 1536, 64}}) {
    const auto x = bf16_rounded(random_vec(rng, size_t(s.M * s.K)));
    const auto w = bf16_rounded(random_vec(rng, size_t(s.N * s.K)));
    DeviceTensor gx = upload(*gpu, x, DType::bf16, {s.M, s.K});
    DeviceTensor gw = upload(*gpu, w, DType::bf16, {s.N, s.K});
    DeviceTensor cx = upload(*cpu, x, DType::f32, {s.M, s.K});
    DeviceTensor cw = upload(*cpu, w, DType::bf16, {s.N, s.K});
    DeviceTensor cout = poisoned(*cpu, DType::f32, {s.M, s.N});
    REQUIRE(cpu->matmul(cout.t, cx.t, weight_of(cw)).has_value());
    const auto ref = download(*cpu, cout.t);
    CAPTURE(s.M, s.N, s.K);
    DeviceTensor g16 = poisoned(*gpu, DType::bf16, {s.M, s.N});
    REQUIRE(gpu->matmul(g16.t, gx.t, weight_of(gw)).has_value());
    CHECK(rel_error(download(*gpu, g16.t), ref) < kBf16OutputTol);
    DeviceTensor g32 = poisoned(*gpu, DType::f32, {s.M, s.N});
    REQUIRE(gpu->matmul(g32.t, gx.t, weight_of(gw)).has_value());
    CHECK(rel_error(download(*gpu, g32.t), ref) < kF32MatmulTol);
  }
}

TEST_CASE("cuda matmul for decode batches (tensor-core weight streaming) matches the CPU", "[cuda]") {
  // Each decode-batch kernel in turn: gemv_mma (opt-in), gemv_skinny (the default up to 16 rows
  // and N <= 8192, one row at N * K <= 12 Mi), and cuBLASLt alone.
  const CudaBackendOptions kernels[] = {
      CudaBackendOptions{.mma_decode_matmul = true, .skinny_decode_matmul = false},
      CudaBackendOptions{.skinny_decode_matmul = true}, CudaBackendOptions{.skinny_decode_matmul = false}};
  for (const CudaBackendOptions& options : kernels) {
    auto gpu = cuda_backend(options);
    CAPTURE(options.mma_decode_matmul, options.skinny_decode_matmul);
    auto cpu = cpu_reference();
    std::mt19937 rng(61);
    struct Shape {
      int64_t M, N, K;
    };
    // With mma_decode_matmul, 2 <= M <= 64 with K % 8 == 0 runs the tensor-core kernel on sm_90:
    // every padded row count (8, 16, 32, 64) with M below, at and above it; the model
    // shapes (qkv 3072, o 2048, gate_up 16384, down K = 8192, LM head 128256); N not a
    // multiple of the 128-row block (1000, 517, 72); K not a multiple of the 64-k stage
    // (72, 200, 8200); K splits over clusters of 1 (large N or small K), 2, 4 and 8 blocks,
    // some with ranks whose share of the activation rows is empty (M = 2, 3 of 8). gemv_skinny:
    // grids of one wave (16 warps per block) and of more (8 warps; N 4500, 5000: past two blocks
    // per SM), N not a multiple of 16.
    for (Shape s : {Shape{2, 3072, 2048}, Shape{3, 1000, 72}, Shape{4, 2048, 8192}, Shape{5, 72, 200},
                    Shape{8, 16384, 2048}, Shape{15, 2048, 2048}, Shape{16, 3072, 2048}, Shape{17, 1000, 200},
                    Shape{31, 2048, 4096}, Shape{33, 72, 72}, Shape{64, 2048, 8192}, Shape{64, 16384, 2048},
                    Shape{64, 40000, 256}, Shape{17, 517, 8200}, Shape{4, 128256, 2048}, Shape{32, 3072, 2048},
                    Shape{9, 128256, 2048}, Shape{2, 16, 8}, Shape{6, 5000, 72}, Shape{16, 4500, 2048}}) {
      const auto x = bf16_rounded(random_vec(rng, size_t(s.M * s.K)));
      const auto w = bf16_rounded(random_vec(rng, size_t(s.N * s.K)));
      DeviceTensor gx = upload(*gpu, x, DType::bf16, {s.M, s.K});
      DeviceTensor gw = upload(*gpu, w, DType::bf16, {s.N, s.K});
      DeviceTensor cx = upload(*cpu, x, DType::f32, {s.M, s.K});
      DeviceTensor cw = upload(*cpu, w, DType::bf16, {s.N, s.K});
      DeviceTensor cout = poisoned(*cpu, DType::f32, {s.M, s.N});
      REQUIRE(cpu->matmul(cout.t, cx.t, weight_of(cw)).has_value());
      const auto ref = download(*cpu, cout.t);
      CAPTURE(s.M, s.N, s.K);
      DeviceTensor g32 = poisoned(*gpu, DType::f32, {s.M, s.N});
      REQUIRE(gpu->matmul(g32.t, gx.t, weight_of(gw)).has_value());
      CHECK(rel_error(download(*gpu, g32.t), ref) < kF32MatmulTol);
      if (s.N == 128256) continue;  // the LM head writes f32 logits only
      DeviceTensor g16 = poisoned(*gpu, DType::bf16, {s.M, s.N});
      REQUIRE(gpu->matmul(g16.t, gx.t, weight_of(gw)).has_value());
      CHECK(rel_error(download(*gpu, g16.t), ref) < kBf16OutputTol);
    }
  }
}

TEST_CASE("cuda rope_qkv matches the CPU and writes exactly the planned cache slots", "[cuda]") {
  // A packed cache, and the last layer of a block-major pool of 3 (the decoder's layout).
  const int64_t layers = GENERATE(1, 3);
  CAPTURE(layers);
  auto gpu = cuda_backend();
  auto cpu = cpu_reference();
  std::mt19937 rng(16);
  for (bool qk_norm : {false, true}) {
    for (Geometry g : {Geometry{64, 2, 4}, Geometry{128, 1, 8}, Geometry{128, 4, 1}, Geometry{16, 2, 2}}) {
      const int64_t nq = g.nkv * g.group, hd = g.hd, bs = 16, num_blocks = 41;
      BatchPlan plan = scattered_plan({{37, 37}, {300, 45}, {1, 1}, {129, 1}}, int32_t(bs), int32_t(num_blocks), rng);
      const int64_t T = plan.num_tokens();
      const auto qkv = bf16_rounded(random_vec(rng, size_t(T * (nq + 2 * g.nkv) * hd), -3.f, 3.f));
      const auto freq = inv_freq_of(hd, 500000.0);
      const auto qn = bf16_rounded(random_vec(rng, size_t(hd), 0.5f, 1.5f));
      const auto kn = bf16_rounded(random_vec(rng, size_t(hd), 0.5f, 1.5f));
      const int64_t cache_elems = num_blocks * bs * g.nkv * hd;
      CAPTURE(qk_norm, hd, g.nkv, g.group);

      DeviceTensor gqkv = upload(*gpu, qkv, DType::bf16, {T, (nq + 2 * g.nkv) * hd});
      DeviceTensor gfreq = upload(*gpu, freq, DType::f32, {hd / 2});
      DeviceTensor gqn = upload(*gpu, qn, DType::bf16, {hd});
      DeviceTensor gkn = upload(*gpu, kn, DType::bf16, {hd});
      DeviceTensor gq = poisoned(*gpu, DType::bf16, {T, nq, hd});
      const std::vector<float> nan_cache(size_t(cache_elems), std::numeric_limits<float>::quiet_NaN());
      DeviceKv gkv = upload_kv(*gpu, nan_cache, nan_cache, DType::bf16, num_blocks, bs, g.nkv, hd, layers);
      DeviceTensor cqkv = upload(*cpu, qkv, DType::f32, {T, (nq + 2 * g.nkv) * hd});
      DeviceTensor cfreq = upload(*cpu, freq, DType::f32, {hd / 2});
      DeviceTensor cqn = upload(*cpu, qn, DType::f32, {hd});
      DeviceTensor ckn = upload(*cpu, kn, DType::f32, {hd});
      DeviceTensor cq = poisoned(*cpu, DType::f32, {T, nq, hd});
      DeviceTensor ck = upload(*cpu, std::vector<float>(size_t(cache_elems), 0.f), DType::f32, {num_blocks, bs, g.nkv, hd});
      DeviceTensor cv = upload(*cpu, std::vector<float>(size_t(cache_elems), 0.f), DType::f32, {num_blocks, bs, g.nkv, hd});

      auto gview = gpu->stage_plan(plan);
      auto cview = cpu->stage_plan(plan);
      REQUIRE(gview.has_value());
      REQUIRE(cview.has_value());
      const Tensor none;
      REQUIRE(gpu->rope_qkv(gq.t, gqkv.t, *gview, gfreq.t, qk_norm ? gqn.t : none, qk_norm ? gkn.t : none, 1e-6f,
                            gkv.layer)
                  .has_value());
      REQUIRE(cpu->rope_qkv(cq.t, cqkv.t, *cview, cfreq.t, qk_norm ? cqn.t : none, qk_norm ? ckn.t : none, 1e-6f,
                            KvLayer{ck.t, cv.t})
                  .has_value());
      CHECK(rel_error(download(*gpu, gq.t), download(*cpu, cq.t)) < kBf16OutputTol);

      // Written slots agree with the CPU; every other slot still holds the poison.
      const HostKv gkv_all = download_kv(*gpu, gkv);
      const std::vector<float>&gk_all = gkv_all.k, &gv_all = gkv_all.v;
      const auto ck_all = download(*cpu, ck.t), cv_all = download(*cpu, cv.t);
      std::vector<bool> written(size_t(num_blocks * bs), false);
      for (int32_t slot : plan.slot_mapping) written[size_t(slot)] = true;
      std::vector<float> gk_w, ck_w, gv_w, cv_w;
      const int64_t row = g.nkv * hd;
      for (int64_t slot = 0; slot < num_blocks * bs; ++slot) {
        for (int64_t e = 0; e < row; ++e) {
          const size_t i = size_t(slot * row + e);
          if (written[size_t(slot)]) {
            gk_w.push_back(gk_all[i]);
            ck_w.push_back(ck_all[i]);
            gv_w.push_back(gv_all[i]);
            cv_w.push_back(cv_all[i]);
          } else {
            REQUIRE(std::isnan(gk_all[i]));
            REQUIRE(std::isnan(gv_all[i]));
          }
        }
      }
      CHECK(rel_error(gk_w, ck_w) < kBf16OutputTol);
      CHECK(rel_error(gv_w, cv_w) == 0.0);  // V is copied, not computed
    }
  }
}

namespace {

// Attention over random bf16 K/V filling the whole cache (both backends see the same values).
// Sequences listed in `emptied` (decodes only) get context 0 in the GPU's staged plan, as
// the padding rows of a graph bucket do: their rows must come out exactly zero.
// `layers` > 1: the GPU's cache is the last layer of a block-major pool of that many (DeviceKv).
void check_attention(Backend& gpu, Backend& cpu, const std::vector<SeqSpec>& seqs, Geometry g, int64_t bs,
                     int64_t num_blocks, std::mt19937& rng, const std::vector<int32_t>& emptied = {},
                     int64_t layers = 1) {
  const int64_t nq = g.nkv * g.group, hd = g.hd;
  BatchPlan plan = scattered_plan(seqs, int32_t(bs), int32_t(num_blocks), rng);
  const int64_t T = plan.num_tokens();
  const int64_t cache_elems = num_blocks * bs * g.nkv * hd;
  const auto k = bf16_rounded(random_vec(rng, size_t(cache_elems), -2.f, 2.f));
  const auto v = bf16_rounded(random_vec(rng, size_t(cache_elems), -2.f, 2.f));
  const auto q = bf16_rounded(random_vec(rng, size_t(T * nq * hd), -2.f, 2.f));
  const float scale = float(1.0 / std::sqrt(double(hd)));
  DeviceKv gkv = upload_kv(gpu, k, v, DType::bf16, num_blocks, bs, g.nkv, hd, layers);
  DeviceTensor gq = upload(gpu, q, DType::bf16, {T, nq, hd});
  DeviceTensor gout = poisoned(gpu, DType::bf16, {T, nq, hd});
  DeviceTensor ck = upload(cpu, k, DType::f32, {num_blocks, bs, g.nkv, hd});
  DeviceTensor cv = upload(cpu, v, DType::f32, {num_blocks, bs, g.nkv, hd});
  DeviceTensor cq = upload(cpu, q, DType::f32, {T, nq, hd});
  DeviceTensor cout = poisoned(cpu, DType::f32, {T, nq, hd});
  auto gview = gpu.stage_plan(plan);
  auto cview = cpu.stage_plan(plan);
  REQUIRE(gview.has_value());
  REQUIRE(cview.has_value());
  const int32_t zero = 0;
  for (int32_t s : emptied) {
    REQUIRE(seqs[size_t(s)].q_len == 1);
    REQUIRE(gpu.copy_to_device(const_cast<int32_t*>(gview->context_lens) + s, &zero, sizeof zero).has_value());
  }
  REQUIRE(gpu.attention(gout.t, gq.t, gkv.layer, *gview, scale).has_value());
  REQUIRE(cpu.attention(cout.t, cq.t, KvLayer{ck.t, cv.t}, *cview, scale).has_value());
  const std::vector<float> got = download(gpu, gout.t);
  std::vector<float> want = download(cpu, cout.t);
  for (int32_t s : emptied) {
    const size_t row = size_t(plan.query_start[size_t(s)]) * size_t(nq * hd);
    for (size_t e = row; e < row + size_t(nq * hd); ++e) {
      REQUIRE(got[e] == 0.f);
      want[e] = 0.f;
    }
  }
  CHECK(rel_error(got, want) < kAttentionTol);
}

// Blocks a cache needs for `seqs` at block size bs, plus a few unused ones.
int64_t blocks_for(const std::vector<SeqSpec>& seqs, int64_t bs) {
  int64_t n = 7;
  for (const SeqSpec& s : seqs) n += (s.ctx + bs - 1) / bs;
  return n;
}

}  // namespace

TEST_CASE("cuda paged decode attention matches the CPU (GQA, splits, ragged contexts)", "[cuda][attention]") {
  // Splits merged inside a thread-block cluster (the sm_90 default) and through the global workspace.
  const bool clusters = GENERATE(true, false);
  CAPTURE(clusters);
  auto gpu = cuda_backend(CudaBackendOptions{.decode_attention_clusters = clusters});
  auto cpu = cpu_reference();
  std::mt19937 rng(17);
  for (Geometry g : {Geometry{64, 8, 1}, Geometry{64, 2, 4}, Geometry{128, 8, 4}, Geometry{128, 1, 8},
                     Geometry{128, 2, 16}, Geometry{32, 2, 2}, Geometry{16, 2, 2}, Geometry{256, 1, 2}}) {
    CAPTURE(g.hd, g.nkv, g.group);
    // few sequences: the context is split across blocks and combined
    check_attention(*gpu, *cpu, {{1, 1}, {17, 1}, {300, 1}, {2100, 1}, {5, 1}}, g, 16, 163, rng);
    // many sequences: one split each
    std::vector<SeqSpec> many;
    for (int i = 0; i < 40; ++i) many.push_back({1 + (i * 37) % 250, 1});
    check_attention(*gpu, *cpu, many, g, 16, 701, rng);
  }
  // a block size that is not a power of two, and an odd block count
  check_attention(*gpu, *cpu, {{33, 1}, {70, 1}, {7, 1}}, Geometry{64, 2, 4}, 5, 37, rng);
  // the last layer of a block-major pool (the decoder's layout): split and one-split launches
  check_attention(*gpu, *cpu, {{1, 1}, {17, 1}, {300, 1}, {2100, 1}}, Geometry{64, 8, 4}, 16, 170, rng, {}, 4);
  std::vector<SeqSpec> many;
  for (int i = 0; i < 40; ++i) many.push_back({1 + (i * 37) % 250, 1});
  check_attention(*gpu, *cpu, many, Geometry{128, 8, 4}, 16, blocks_for(many, 16), rng, {}, 3);
  check_attention(*gpu, *cpu, {{33, 1}, {70, 1}, {7, 1}}, Geometry{64, 2, 4}, 5, 37, rng, {}, 2);
}

// The decode kernel picks how many of the launch's context splits a sequence
// uses on the device (short contexts use one, with no merge); these cover the
// edges of that choice for the Llama-3.2-1B (hd 64) and Qwen3-8B (hd 128) shapes.
TEST_CASE("cuda paged decode attention: one sequence from 1 to 4097 keys, hd 64/128, GQA 1/4/8", "[cuda][attention]") {
  // Splits merged inside a thread-block cluster (the sm_90 default) and through the global workspace.
  const bool clusters = GENERATE(true, false);
  CAPTURE(clusters);
  auto gpu = cuda_backend(CudaBackendOptions{.decode_attention_clusters = clusters});
  auto cpu = cpu_reference();
  std::mt19937 rng(23);
  for (int64_t hd : {64, 128})
    for (int64_t group : {1, 4, 8}) {
      const Geometry g{hd, 8, group};
      for (int32_t ctx : {1, 15, 16, 17, 190, 1000, 4097}) {
        CAPTURE(hd, group, ctx);
        const std::vector<SeqSpec> seqs{{ctx, 1}};
        check_attention(*gpu, *cpu, seqs, g, 16, blocks_for(seqs, 16), rng);
      }
    }
}

TEST_CASE("cuda paged decode attention: ragged batches of 1 to 64 sequences", "[cuda][attention]") {
  // Splits merged inside a thread-block cluster (the sm_90 default) and through the global workspace.
  const bool clusters = GENERATE(true, false);
  CAPTURE(clusters);
  auto gpu = cuda_backend(CudaBackendOptions{.decode_attention_clusters = clusters});
  auto cpu = cpu_reference();
  std::mt19937 rng(29);
  const int32_t edges[] = {1, 15, 16, 17, 190, 1000, 4097};
  std::uniform_int_distribution<int32_t> any_ctx(1, 800), pick(0, 9);
  for (Geometry g : {Geometry{64, 8, 4}, Geometry{128, 8, 4}, Geometry{64, 4, 8}, Geometry{128, 8, 1}})
    for (int32_t S : {1, 2, 3, 7, 16, 33, 64}) {
      std::vector<SeqSpec> seqs;
      for (int32_t i = 0; i < S; ++i) {
        const int32_t k = pick(rng);
        const bool edge = k < 7 && (S <= 8 || edges[k] < 4097);  // keeps the big batches' caches small
        seqs.push_back({edge ? edges[k] : any_ctx(rng), 1});
      }
      CAPTURE(g.hd, g.nkv, g.group, S);
      check_attention(*gpu, *cpu, seqs, g, 16, blocks_for(seqs, 16), rng);
    }
}

// Batches of 3 to 33 sequences with contexts of at most 512 keys (the engine's usual decode
// batches), GQA up to 16 (several head slices per KV head), one padding row each.
TEST_CASE("cuda paged decode attention: short-context batches", "[cuda][attention]") {
  auto gpu = cuda_backend();
  auto cpu = cpu_reference();
  std::mt19937 rng(43);
  const int32_t edges[] = {1, 2, 31, 32, 33, 127, 128, 129, 256, 512};
  std::uniform_int_distribution<int32_t> any_ctx(1, 512), pick(0, 19);
  for (Geometry g : {Geometry{64, 8, 4}, Geometry{128, 8, 4}, Geometry{64, 4, 8}, Geometry{128, 8, 1},
                     Geometry{64, 2, 16}})
    for (int32_t S : {3, 4, 16, 33}) {
      std::vector<SeqSpec> seqs;
      for (int32_t i = 0; i < S; ++i) {
        const int32_t k = pick(rng);
        seqs.push_back({k < 10 ? edges[k] : any_ctx(rng), 1});
      }
      CAPTURE(g.hd, g.nkv, g.group, S);
      check_attention(*gpu, *cpu, seqs, g, 16, blocks_for(seqs, 16), rng, {S - 1});  // and one padding row
    }
  // a block size that is not a power of two
  check_attention(*gpu, *cpu, {{500, 1}, {37, 1}, {1, 1}, {250, 1}}, Geometry{64, 8, 4}, 5, 160, rng);
}

TEST_CASE("cuda paged decode attention: context 0 gives a zero row beside live sequences", "[cuda][attention]") {
  // Splits merged inside a thread-block cluster (the sm_90 default) and through the global workspace.
  const bool clusters = GENERATE(true, false);
  CAPTURE(clusters);
  auto gpu = cuda_backend(CudaBackendOptions{.decode_attention_clusters = clusters});
  auto cpu = cpu_reference();
  std::mt19937 rng(31);
  for (Geometry g : {Geometry{64, 8, 4}, Geometry{128, 8, 4}}) {
    CAPTURE(g.hd);
    // one sequence (many splits per sequence) and a larger batch (one split each)
    const std::vector<SeqSpec> one{{5, 1}};
    check_attention(*gpu, *cpu, one, g, 16, blocks_for(one, 16), rng, {0});
    const std::vector<SeqSpec> few{{190, 1}, {17, 1}, {1000, 1}, {3, 1}};
    check_attention(*gpu, *cpu, few, g, 16, blocks_for(few, 16), rng, {1, 3});
    std::vector<SeqSpec> many;
    for (int32_t i = 0; i < 80; ++i) many.push_back({1 + (i * 53) % 700, 1});
    check_attention(*gpu, *cpu, many, g, 16, blocks_for(many, 16), rng, {0, 41, 79});
  }
}

// The single-pass kernel (CudaBackendOptions::attention_single_pass_heads): one sequence, no splits,
// 1, 2 or 4 query heads per block (-1: the batch-size rule), over contexts up to its bound (one chunk
// of loads of 16 warps: 512 keys at hd 64, 256 at hd 128; 8 warps up to half of that), block sizes 16
// and 5, and context 0 (a zero row).
TEST_CASE("cuda paged decode attention: the single-pass kernel for one sequence matches the CPU", "[cuda][attention]") {
  const int32_t heads = GENERATE(-1, 1, 2, 4);
  CAPTURE(heads);
  auto gpu = cuda_backend(CudaBackendOptions{.attention_single_pass_heads = heads, .attention_single_pass_max_seqs = 1});
  auto cpu = cpu_reference();
  std::mt19937 rng(41);
  int64_t expected = 0;
  for (int64_t hd : {64, 128})
    for (int64_t group : {1, 2, 4, 8}) {
      if (group % heads != 0) continue;
      const Geometry g{hd, group == 8 ? 4 : 8, group};
      const int32_t bound = hd == 64 ? 512 : 256;
      for (int32_t ctx : {1, 2, 15, 16, 17, 63, 64, 65, 127, 128, 129, 190, 255, 256, 257, 400, 511, 512}) {
        if (ctx > bound) continue;
        for (int64_t bs : {16, 5}) {
          if ((ctx + bs - 1) / bs * bs > bound) continue;  // the block table's span decides the kernel
          CAPTURE(hd, group, ctx, bs);
          const std::vector<SeqSpec> seqs{{ctx, 1}};
          check_attention(*gpu, *cpu, seqs, g, bs, blocks_for(seqs, bs), rng);
          ++expected;
        }
      }
      const std::vector<SeqSpec> one{{40, 1}};
      check_attention(*gpu, *cpu, one, g, 16, blocks_for(one, 16), rng, {0});  // context 0
      // the last layer of a block-major pool (the decoder's layout)
      const std::vector<SeqSpec> pooled{{bound - 16 + 3, 1}};
      check_attention(*gpu, *cpu, pooled, g, 16, blocks_for(pooled, 16), rng, {}, 3);
      check_attention(*gpu, *cpu, {{37, 1}}, g, 5, 20, rng, {}, 2);
      expected += 3;
    }
  CHECK(cuda_single_pass_attention_launches(*gpu) == expected);
  // Past the bound, and for two sequences, the split kernel serves the same backend.
  check_attention(*gpu, *cpu, {{600, 1}}, Geometry{64, 8, 4}, 16, 50, rng);
  check_attention(*gpu, *cpu, {{100, 1}, {90, 1}}, Geometry{64, 8, 4}, 16, 20, rng);
  CHECK(cuda_single_pass_attention_launches(*gpu) == expected);
}

// The single-pass attention and early-GEMV options are checked when the backend is made.
TEST_CASE("cuda backend: bad single-pass attention and GEMV options are invalid_argument", "[cuda][attention]") {
  auto refused = [](const CudaBackendOptions& options) {
    auto b = make_cuda_backend(options);
    return !b.has_value() && b.error().code == Errc::invalid_argument;
  };
  for (int32_t heads : {-2, 3, 5}) CHECK(refused(CudaBackendOptions{.attention_single_pass_heads = heads}));
  CHECK(refused(CudaBackendOptions{.attention_single_pass_max_seqs = -1}));
  for (int32_t chunks : {0, 9}) CHECK(refused(CudaBackendOptions{.gemv_early_chunks = chunks}));
  for (int32_t unroll : {0, 6, 16}) CHECK(refused(CudaBackendOptions{.gemv_unroll_silu = unroll}));
  CHECK(refused(CudaBackendOptions{.gemv_passes_min_n = -1}));
  CHECK(refused(CudaBackendOptions{.gemv_passes_max_row_bytes = -1}));
}

// attention_single_pass_max_seqs > 1: ragged batches of a few sequences in one single-pass launch
// (one grid row per sequence), with a context-0 padding row.
TEST_CASE("cuda paged decode attention: the single-pass kernel over ragged batches matches the CPU", "[cuda][attention]") {
  const int32_t heads = GENERATE(-1, 1, 4);
  CAPTURE(heads);
  auto gpu = cuda_backend(CudaBackendOptions{.attention_single_pass_heads = heads, .attention_single_pass_max_seqs = 16});
  auto cpu = cpu_reference();
  std::mt19937 rng(43);
  for (int64_t hd : {64, 128}) {
    CAPTURE(hd);
    const Geometry g{hd, 8, 4};
    const int32_t top = hd == 64 ? 500 : 250;  // within one chunk of 16 warps, the block table's span included
    check_attention(*gpu, *cpu, {{1, 1}, {top, 1}, {17, 1}}, g, 16, 60, rng);
    std::vector<SeqSpec> many;
    for (int i = 0; i < 16; ++i) many.push_back({1 + (i * 37) % top, 1});
    check_attention(*gpu, *cpu, many, g, 16, blocks_for(many, 16), rng, {3, 11});
  }
  CHECK(cuda_single_pass_attention_launches(*gpu) == 4);
  // More sequences than the bound: the split kernel.
  std::vector<SeqSpec> more;
  for (int i = 0; i < 17; ++i) more.push_back({5 + i, 1});
  check_attention(*gpu, *cpu, more, Geometry{64, 8, 4}, 16, 60, rng);
  CHECK(cuda_single_pass_attention_launches(*gpu) == 4);
}

// A decode graph replays one launch shape (the splits depend on the batch
// shape only) while contexts grow and shrink between replays: the split
// counters of one launch must leave the workspace ready for the next.
TEST_CASE("cuda paged decode attention: same launch shape, contexts changing between launches", "[cuda][attention]") {
  // Splits merged inside a thread-block cluster (the sm_90 default) and through the global workspace.
  const bool clusters = GENERATE(true, false);
  CAPTURE(clusters);
  auto gpu = cuda_backend(CudaBackendOptions{.decode_attention_clusters = clusters});
  auto cpu = cpu_reference();
  std::mt19937 rng(37);
  const Geometry g{64, 8, 4};
  for (int32_t S : {1, 3}) {
    for (int32_t ctx : {1, 16, 17, 190, 191, 640, 1000, 4097, 200, 2}) {
      std::vector<SeqSpec> seqs;
      for (int32_t i = 0; i < S; ++i) seqs.push_back({ctx + 3 * i, 1});
      CAPTURE(S, ctx);
      check_attention(*gpu, *cpu, seqs, g, 16, blocks_for(seqs, 16), rng);
    }
  }
}

namespace {

// rope_attention of a decode step over random bf16 K/V filling the cache and a random packed qkv:
// `fused` (the decode kernel with RoPE inside) against the CPU's rope_qkv + attention and against
// `pair` (a CUDA backend running rope_qkv then attention), per sequence. The cache's planned slots
// must hold what the CPU wrote, every other slot its old value. Rows listed in `padded` get context
// 0 and slot -1 in the CUDA plans, as a graph bucket's padding rows do: a zero row, no cache write.
// `layers` > 1: the CUDA caches are the last layer of a block-major pool of that many (DeviceKv).
void check_rope_attention(Backend& fused, Backend& pair, Backend& cpu, const std::vector<SeqSpec>& seqs, Geometry g,
                          bool qk_norm, int64_t bs, std::mt19937& rng, const std::vector<int32_t>& padded = {},
                          int64_t layers = 1) {
  const int64_t nq = g.nkv * g.group, hd = g.hd, num_blocks = blocks_for(seqs, bs);
  const BatchPlan plan = scattered_plan(seqs, int32_t(bs), int32_t(num_blocks), rng);
  const int64_t S = plan.num_seqs(), row = g.nkv * hd, width = (nq + 2 * g.nkv) * hd;
  REQUIRE(plan.num_tokens() == S);
  const auto k = bf16_rounded(random_vec(rng, size_t(num_blocks * bs * row), -2.f, 2.f));
  const auto v = bf16_rounded(random_vec(rng, size_t(num_blocks * bs * row), -2.f, 2.f));
  const auto qkv = bf16_rounded(random_vec(rng, size_t(S * width), -2.f, 2.f));
  const auto freq = inv_freq_of(hd, 500000.0);
  const auto qn = bf16_rounded(random_vec(rng, size_t(hd), 0.5f, 1.5f));
  const auto kn = bf16_rounded(random_vec(rng, size_t(hd), 0.5f, 1.5f));
  const float scale = float(1.0 / std::sqrt(double(hd)));
  struct Run {
    std::vector<float> out, k, v, q;  // q: the scratch
  };
  auto run = [&](Backend& b, DType dt, bool pad) {
    DeviceKv dkv = upload_kv(b, k, v, dt, num_blocks, bs, g.nkv, hd, dt == DType::bf16 ? layers : 1);
    DeviceTensor dqkv = upload(b, qkv, dt, {S, width});
    DeviceTensor dfreq = upload(b, freq, DType::f32, {hd / 2});
    DeviceTensor dqn = upload(b, qn, dt, {hd});
    DeviceTensor dkn = upload(b, kn, dt, {hd});
    DeviceTensor dq = poisoned(b, dt, {S, nq, hd});
    DeviceTensor dout = poisoned(b, dt, {S, nq, hd});
    auto view = b.stage_plan(plan);
    REQUIRE(view.has_value());
    const int32_t zero = 0, none_slot = -1;
    for (int32_t s : pad ? padded : std::vector<int32_t>{}) {
      REQUIRE(b.copy_to_device(const_cast<int32_t*>(view->context_lens) + s, &zero, sizeof zero).has_value());
      REQUIRE(b.copy_to_device(const_cast<int32_t*>(view->slot_mapping) + s, &none_slot, sizeof none_slot).has_value());
    }
    const Tensor none;
    REQUIRE(b.rope_attention(dout.t, dq.t, dqkv.t, *view, dfreq.t, qk_norm ? dqn.t : none, qk_norm ? dkn.t : none,
                             1e-6f, dkv.layer, scale)
                .has_value());
    HostKv kv = download_kv(b, dkv);
    return Run{download(b, dout.t), std::move(kv.k), std::move(kv.v), download(b, dq.t)};
  };
  const Run want = run(cpu, DType::f32, false);
  const Run got = run(fused, DType::bf16, true);
  const Run ref = run(pair, DType::bf16, true);

  // The fused kernel never stores q (so it ran, rather than the pair); the pair's rope_qkv did.
  for (float x : got.q) REQUIRE(std::isnan(x));
  REQUIRE(!std::isnan(ref.q[0]));
  std::vector<bool> is_padded(size_t(S), false);
  for (int32_t s : padded) is_padded[size_t(s)] = true;
  const size_t per_seq = size_t(nq * hd);
  for (int64_t s = 0; s < S; ++s) {
    CAPTURE(s, seqs[size_t(s)].ctx);
    const auto slice = [&](const std::vector<float>& o) {
      return std::vector<float>(o.begin() + ptrdiff_t(size_t(s) * per_seq), o.begin() + ptrdiff_t(size_t(s + 1) * per_seq));
    };
    if (is_padded[size_t(s)]) {
      for (float x : slice(got.out)) REQUIRE(x == 0.f);
      continue;
    }
    CHECK(rel_error(slice(got.out), slice(want.out)) < kAttentionTol);
    CHECK(rel_error(slice(got.out), slice(ref.out)) < kBf16OutputTol);
  }
  std::vector<bool> written(size_t(num_blocks * bs), false);
  for (int64_t s = 0; s < S; ++s)
    if (!is_padded[size_t(s)]) written[size_t(plan.slot_mapping[size_t(s)])] = true;
  std::vector<float> got_k, want_k;
  for (int64_t slot = 0; slot < num_blocks * bs; ++slot)
    for (int64_t e = 0; e < row; ++e) {
      const size_t i = size_t(slot * row + e);
      if (written[size_t(slot)]) {
        got_k.push_back(got.k[i]);
        want_k.push_back(want.k[i]);
        REQUIRE(got.v[i] == want.v[i]);  // V is copied, not computed
      } else {
        REQUIRE(got.k[i] == k[i]);
        REQUIRE(got.v[i] == v[i]);
      }
    }
  CHECK(rel_error(got_k, want_k) < kBf16OutputTol);
}

}  // namespace

// Decode steps run rope_qkv's work inside the decode attention kernel (CudaBackendOptions::
// rope_in_decode_attention): the new K/V row is formed in the kernel, used from shared memory by
// the split that holds it (in its first round or a later one) and written into the cache once.
TEST_CASE("cuda rope_attention: RoPE inside decode attention matches the CPU and the CUDA pair", "[cuda][attention]") {
  const bool clusters = GENERATE(true, false);
  // The single-pass kernel with RoPE inside (by batch size: batches of up to 16 sequences within its
  // bound), or the split kernel for every launch.
  const int32_t single_pass = GENERATE(-1, 0);
  CAPTURE(clusters, single_pass);
  using Rule = CudaBackendOptions::RopeInAttention;
  auto fused = cuda_backend(CudaBackendOptions{.decode_attention_clusters = clusters,
                                               .rope_in_decode_attention = Rule::always,
                                               .attention_single_pass_heads = single_pass});
  auto pair = cuda_backend(CudaBackendOptions{.decode_attention_clusters = clusters, .rope_in_decode_attention = Rule::never});
  auto cpu = cpu_reference();
  std::mt19937 rng(53);
  for (bool qk_norm : {false, true})
    for (Geometry g : {Geometry{64, 8, 4}, Geometry{128, 8, 1}, Geometry{128, 8, 4}, Geometry{128, 2, 16},
                       Geometry{64, 2, 4}, Geometry{32, 2, 2}, Geometry{16, 2, 2}, Geometry{256, 1, 2}}) {
      CAPTURE(qk_norm, g.hd, g.nkv, g.group);
      for (int32_t ctx : {1, 17, 190, 4097}) check_rope_attention(*fused, *pair, *cpu, {{ctx, 1}}, g, qk_norm, 16, rng);
      check_rope_attention(*fused, *pair, *cpu, {{1, 1}, {17, 1}, {300, 1}, {2100, 1}, {5, 1}}, g, qk_norm, 16, rng, {1});
      std::vector<SeqSpec> many;
      for (int i = 0; i < 40; ++i) many.push_back({1 + (i * 37) % 250, 1});
      check_rope_attention(*fused, *pair, *cpu, many, g, qk_norm, 16, rng, {0, 39});
    }
  // a block size that is not a power of two
  check_rope_attention(*fused, *pair, *cpu, {{33, 1}, {70, 1}, {7, 1}}, Geometry{64, 2, 4}, true, 5, rng);
  // the last layer of a block-major pool (the decoder's layout): one sequence (the single-pass
  // kernel where chosen), one past its bound, and a batch with a padding row
  for (Geometry g : {Geometry{64, 8, 4}, Geometry{128, 8, 1}}) {
    CAPTURE(g.hd, g.group);
    check_rope_attention(*fused, *pair, *cpu, {{190, 1}}, g, g.hd == 128, 16, rng, {}, 3);
    check_rope_attention(*fused, *pair, *cpu, {{4097, 1}}, g, false, 16, rng, {}, 2);
    check_rope_attention(*fused, *pair, *cpu, {{1, 1}, {200, 1}, {37, 1}, {90, 1}}, g, true, 16, rng, {2}, 4);
  }
  check_rope_attention(*fused, *pair, *cpu, {{33, 1}, {70, 1}, {7, 1}}, Geometry{64, 2, 4}, true, 5, rng, {}, 2);
  // Contexts inside the single-pass bound at both head dims, one and a few sequences.
  for (bool qk_norm : {false, true})
    for (Geometry g : {Geometry{64, 8, 4}, Geometry{128, 8, 4}, Geometry{128, 4, 8}}) {
      CAPTURE(qk_norm, g.hd, g.nkv, g.group);
      for (int32_t ctx : {1, 2, 17, 128, 129, 190, 250}) check_rope_attention(*fused, *pair, *cpu, {{ctx, 1}}, g, qk_norm, 16, rng);
      check_rope_attention(*fused, *pair, *cpu, {{1, 1}, {200, 1}, {37, 1}, {90, 1}}, g, qk_norm, 16, rng, {2});
    }
  if (single_pass != 0) CHECK(cuda_single_pass_attention_launches(*fused) > 0);
  else CHECK(cuda_single_pass_attention_launches(*fused) == 0);
}

TEST_CASE("cuda prefill attention matches the CPU (chunks over cached prefixes, mixed decodes)", "[cuda]") {
  auto gpu = cuda_backend();
  auto cpu = cpu_reference();
  std::mt19937 rng(18);
  for (Geometry g : {Geometry{64, 8, 1}, Geometry{64, 2, 4}, Geometry{128, 8, 4}, Geometry{128, 1, 8},
                     Geometry{128, 2, 16}, Geometry{32, 2, 2}, Geometry{16, 2, 2}, Geometry{256, 1, 2}}) {
    CAPTURE(g.hd, g.nkv, g.group);
    // fresh prompts, a chunk over a cached prefix, and decode tokens in the same step
    check_attention(*gpu, *cpu, {{37, 37}, {300, 45}, {1, 1}, {129, 129}, {900, 1}, {65, 64}}, g, 16, 101, rng);
  }
  check_attention(*gpu, *cpu, {{33, 10}, {70, 70}, {7, 1}}, Geometry{64, 2, 4}, 5, 37, rng);
  check_attention(*gpu, *cpu, {{1500, 1500}}, Geometry{128, 1, 4}, 16, 95, rng);
  // the last layer of a block-major pool (the decoder's layout)
  check_attention(*gpu, *cpu, {{37, 37}, {300, 45}, {1, 1}, {129, 129}, {900, 1}, {65, 64}}, Geometry{64, 8, 4}, 16,
                  101, rng, {}, 3);
  check_attention(*gpu, *cpu, {{33, 10}, {70, 70}, {7, 1}}, Geometry{128, 2, 4}, 5, 37, rng, {}, 2);
}

TEST_CASE("cuda ops reject mismatched tensors with an error", "[cuda]") {
  auto gpu = cuda_backend();
  std::mt19937 rng(19);
  DeviceTensor x = upload(*gpu, random_vec(rng, 4 * 64), DType::bf16, {4, 64});
  DeviceTensor w32 = upload(*gpu, random_vec(rng, 64), DType::f32, {64});
  DeviceTensor out = poisoned(*gpu, DType::f32, {4, 64});
  auto r = gpu->rmsnorm(out.t, x.t, w32.t, 1e-5f);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == Errc::shape_mismatch);
  DeviceTensor wmat = upload(*gpu, random_vec(rng, 10 * 60), DType::bf16, {10, 60});
  DeviceTensor mout = poisoned(*gpu, DType::bf16, {4, 10});
  Weight W;
  W.w = wmat.t;
  auto m = gpu->matmul(mout.t, x.t, W);
  REQUIRE_FALSE(m.has_value());
  CHECK(m.error().code == Errc::shape_mismatch);
  // an op given a plan view that is not the last staged one
  BatchPlan p1 = scattered_plan({{3, 3}}, 16, 4, rng, 10), p2 = scattered_plan({{5, 5}}, 16, 4, rng, 10);
  auto v1 = gpu->stage_plan(p1);
  REQUIRE(v1.has_value());
  REQUIRE(gpu->stage_plan(p2).has_value());
  DeviceTensor table = upload(*gpu, random_vec(rng, 10 * 64), DType::bf16, {10, 64});
  DeviceTensor eout = poisoned(*gpu, DType::bf16, {3, 64});
  Weight T;
  T.w = table.t;
  auto e = gpu->embed(eout.t, T, *v1);
  REQUIRE_FALSE(e.has_value());
  CHECK(e.error().code == Errc::invalid_state);
  // a KV block stride shorter than a block would overlap blocks
  BatchPlan p3 = scattered_plan({{5, 1}}, 16, 4, rng, 10);
  auto v3 = gpu->stage_plan(p3);
  REQUIRE(v3.has_value());
  const std::vector<float> kv(size_t(4 * 16 * 2 * 64), 0.f);
  DeviceKv cache = upload_kv(*gpu, kv, kv, DType::bf16, 4, 16, 2, 64, 2);
  cache.layer.block_stride = 15;
  DeviceTensor q = upload(*gpu, random_vec(rng, 8 * 64), DType::bf16, {1, 8, 64});
  DeviceTensor aout = poisoned(*gpu, DType::bf16, {1, 8, 64});
  auto a = gpu->attention(aout.t, q.t, cache.layer, *v3, 0.125f);
  REQUIRE_FALSE(a.has_value());
  CHECK(a.error().code == Errc::invalid_argument);
  // a pool whose rows (num_blocks * stride) pass the kernels' int32 row index: refused before any
  // launch (the views claim 2^27 blocks over a small buffer, which nothing reads)
  KvLayer huge = cache.layer;
  huge.k.shape[0] = huge.v.shape[0] = int64_t(1) << 27;
  huge.block_stride = 32;
  auto h = gpu->attention(aout.t, q.t, huge, *v3, 0.125f);
  REQUIRE_FALSE(h.has_value());
  CHECK(h.error().code == Errc::out_of_range);
}

TEST_CASE("make_cuda_backend reports a missing device as an error", "[cuda]") {
  auto b = make_cuda_backend(CudaBackendOptions{.device = 1000});
  REQUIRE_FALSE(b.has_value());
  CHECK(b.error().code == Errc::invalid_argument);
  CHECK(b.error().message.find("1000") != std::string::npos);
}

TEST_CASE("cuda matmul_add matches the CPU (GEMV add mode at M = 1, cuBLASLt with beta = 1 above)", "[cuda]") {
  // With skinny_decode_matmul, 2 <= M <= 16 with K % 8 == 0 and N <= 8192 runs gemv_skinny's add mode,
  // and so does M = 1 with N * K <= 12 Mi (the one-row policy).
  const bool skinny = GENERATE(false, true);
  const bool early = GENERATE(false, true);  // the GEMV's first round of weights before pdl_wait()
  const bool stage_x = GENERATE(false, true);  // the GEMV's x staged in shared memory
  CAPTURE(skinny, early, stage_x);
  using E = CudaBackendOptions::GemvEarly;
  auto gpu = cuda_backend(CudaBackendOptions{.skinny_decode_matmul = skinny,
                                             .gemv_early_weights = early ? E::all : E::none,
                                             .gemv_stage_x = stage_x});
  auto cpu = cpu_reference();
  std::mt19937 rng(21);
  struct Shape {
    int64_t M, N, K;
  };
  // M = 1 with K % 8 == 0: every K-split variant of the GEMV (N >= 8192, 4096, 2048, below); K = 36 and
  // M > 1: cuBLASLt (or gemv_skinny) accumulating into the residual, N not a multiple of 16, K not
  // a multiple of the 32-k chunk; N 5000 and 8000: gemv_skinny grids past two blocks per SM.
  for (Shape s : {Shape{1, 2048, 2048}, Shape{1, 2048, 8192}, Shape{1, 8192, 2048}, Shape{1, 4096, 4096},
                  Shape{1, 1000, 4096}, Shape{1, 517, 72}, Shape{1, 50, 36}, Shape{3, 1000, 72},
                  Shape{16, 2048, 2048}, Shape{16, 2048, 8192}, Shape{9, 3072, 2048}, Shape{5, 517, 8200},
                  Shape{100, 300, 256}, Shape{16, 5000, 2048}, Shape{3, 8000, 200}}) {
    const auto res = bf16_rounded(random_vec(rng, size_t(s.M * s.N), -2.f, 2.f));
    const auto x = bf16_rounded(random_vec(rng, size_t(s.M * s.K), -1.f, 1.f));
    const auto w = bf16_rounded(random_vec(rng, size_t(s.N * s.K)));
    CAPTURE(s.M, s.N, s.K);
    DeviceTensor gres = upload(*gpu, res, DType::bf16, {s.M, s.N});
    DeviceTensor gx = upload(*gpu, x, DType::bf16, {s.M, s.K});
    DeviceTensor gw = upload(*gpu, w, DType::bf16, {s.N, s.K});
    DeviceTensor gscratch = poisoned(*gpu, DType::bf16, {s.M, s.N});
    DeviceTensor cres = upload(*cpu, res, DType::f32, {s.M, s.N});
    DeviceTensor cx = upload(*cpu, x, DType::f32, {s.M, s.K});
    DeviceTensor cw = upload(*cpu, w, DType::bf16, {s.N, s.K});
    DeviceTensor cscratch = poisoned(*cpu, DType::f32, {s.M, s.N});
    // Twice: the second call adds onto what the first wrote.
    for (int round = 0; round < 2; ++round) {
      CAPTURE(round);
      REQUIRE(gpu->matmul_add(gres.t, gx.t, weight_of(gw), gscratch.t).has_value());
      REQUIRE(cpu->matmul_add(cres.t, cx.t, weight_of(cw), cscratch.t).has_value());
      CHECK(rel_error(download(*gpu, gres.t), download(*cpu, cres.t)) < kBf16OutputTol);
    }
    for (float v : download(*gpu, gscratch.t)) REQUIRE(std::isnan(v));  // the scratch is never written
  }
}

TEST_CASE("cuda matmul_add rejects mismatched tensors with an error", "[cuda]") {
  auto gpu = cuda_backend();
  std::mt19937 rng(24);
  DeviceTensor gw = upload(*gpu, random_vec(rng, 8 * 16), DType::bf16, {8, 16});
  DeviceTensor x = upload(*gpu, random_vec(rng, 16), DType::bf16, {1, 16});
  DeviceTensor out7 = poisoned(*gpu, DType::bf16, {1, 7});
  DeviceTensor out8 = poisoned(*gpu, DType::bf16, {1, 8});
  DeviceTensor scratch8 = poisoned(*gpu, DType::bf16, {1, 8});
  auto a = gpu->matmul_add(out7.t, x.t, weight_of(gw), scratch8.t);  // residual of 7 for 8 outputs
  REQUIRE_FALSE(a.has_value());
  CHECK(a.error().code == Errc::shape_mismatch);
  DeviceTensor res_f32 = poisoned(*gpu, DType::f32, {1, 8});
  auto a2 = gpu->matmul_add(res_f32.t, x.t, weight_of(gw), scratch8.t);  // the residual stream is bf16
  REQUIRE_FALSE(a2.has_value());
  CHECK(a2.error().code == Errc::shape_mismatch);
  auto a3 = gpu->matmul_add(out8.t, x.t, weight_of(gw), out8.t);  // scratch over the residual
  REQUIRE_FALSE(a3.has_value());
  CHECK(a3.error().code == Errc::invalid_argument);
}

TEST_CASE("cuda matmul_silu matches the CPU (GEMV and gemv_skinny SwiGLU modes, product + silu_mul)", "[cuda]") {
  // With skinny_decode_matmul, M <= 16 with K % 8 == 0 and I <= 8192 runs gemv_skinny's SwiGLU mode
  // (16 warps per block while I / 16 blocks fit one wave, else 8) unless M = 1 and K >= 4096 (the
  // GEMV's); without it, or past 16 rows, the product.
  const bool skinny = GENERATE(false, true);
  const bool early = GENERATE(false, true);  // the GEMV's first round of weights before pdl_wait()
  const bool stage_x = GENERATE(false, true);  // the GEMV's x staged in shared memory
  CAPTURE(skinny, early, stage_x);
  using E = CudaBackendOptions::GemvEarly;
  auto gpu = cuda_backend(CudaBackendOptions{.skinny_decode_matmul = skinny,
                                             .gemv_early_weights = early ? E::all : E::none,
                                             .gemv_stage_x = stage_x});
  auto cpu = cpu_reference();
  std::mt19937 rng(25);
  struct Shape {
    int64_t M, I, K;
  };
  // M = 1, K >= cuda::kSwiGluGemvMinK (1024), K % 8 == 0: every K split of the GEMV's SwiGLU mode
  // (I >= 8192: 1, >= 4096: 2, >= 2048: 4, below: 8), outputs not filling the last block, Qwen3-0.6B's
  // K = 1024 and I = 3072; smaller K: gemv_skinny, or the product then silu_mul. M = 2..16: 8 and 16 activation rows per MMA tile, I not a multiple of 16, K not a
  // multiple of the 32-k chunk, grids of one and of several waves; M = 17 and K % 8 != 0: the
  // product. Gate and up are rounded to bf16 before SwiGLU (as the unfused product stores them),
  // then the output: three roundings, about 3e-3 norm-wise (simulated), hence twice the
  // one-rounding bound.
  constexpr double kSwiGluTol = 2 * kBf16OutputTol;
  for (Shape s : {Shape{1, 8192, 4096}, Shape{1, 4100, 4096}, Shape{1, 2100, 4104}, Shape{1, 1000, 4096},
                  Shape{1, 301, 8192}, Shape{1, 8192, 2048}, Shape{1, 3072, 1024}, Shape{1, 1000, 1024},
                  Shape{1, 517, 72}, Shape{1, 50, 36},
                  Shape{3, 1000, 72}, Shape{16, 2048, 2048}, Shape{2, 8192, 2048}, Shape{5, 1000, 72},
                  Shape{8, 301, 520}, Shape{9, 2100, 4104}, Shape{12, 40, 8}, Shape{16, 8192, 2048},
                  Shape{16, 2056, 1000}, Shape{4, 50, 36}, Shape{17, 300, 64}}) {
    const auto x = bf16_rounded(random_vec(rng, size_t(s.M * s.K), -1.f, 1.f));
    const auto w = bf16_rounded(random_vec(rng, size_t(2 * s.I * s.K), -0.2f, 0.2f));
    CAPTURE(s.M, s.I, s.K);
    DeviceTensor gx = upload(*gpu, x, DType::bf16, {s.M, s.K});
    DeviceTensor gw = upload(*gpu, w, DType::bf16, {2 * s.I, s.K});
    DeviceTensor gout = poisoned(*gpu, DType::bf16, {s.M, s.I});
    DeviceTensor gscratch = poisoned(*gpu, DType::bf16, {s.M, 2 * s.I});
    DeviceTensor cx = upload(*cpu, x, DType::f32, {s.M, s.K});
    DeviceTensor cw = upload(*cpu, w, DType::bf16, {2 * s.I, s.K});
    DeviceTensor cout = poisoned(*cpu, DType::f32, {s.M, s.I});
    DeviceTensor cscratch = poisoned(*cpu, DType::f32, {s.M, 2 * s.I});
    REQUIRE(gpu->matmul_silu(gout.t, gx.t, weight_of(gw), gscratch.t).has_value());
    REQUIRE(cpu->matmul_silu(cout.t, cx.t, weight_of(cw), cscratch.t).has_value());
    CHECK(rel_error(download(*gpu, gout.t), download(*cpu, cout.t)) < kSwiGluTol);
    if (skinny && s.M >= 2 && s.M <= 16 && s.K % 8 == 0)  // fused: the scratch is never written
      for (float v : download(*gpu, gscratch.t)) REQUIRE(std::isnan(v));
  }
}

TEST_CASE("cuda matmul_silu rejects mismatched tensors with an error", "[cuda]") {
  auto gpu = cuda_backend();
  std::mt19937 rng(26);
  DeviceTensor gw = upload(*gpu, random_vec(rng, 8 * 16), DType::bf16, {8, 16});
  DeviceTensor gw_odd = upload(*gpu, random_vec(rng, 7 * 16), DType::bf16, {7, 16});
  DeviceTensor x = upload(*gpu, random_vec(rng, 16), DType::bf16, {1, 16});
  DeviceTensor out3 = poisoned(*gpu, DType::bf16, {1, 3});
  DeviceTensor out4 = poisoned(*gpu, DType::bf16, {1, 4});
  DeviceTensor scratch8 = poisoned(*gpu, DType::bf16, {1, 8});
  auto a = gpu->matmul_silu(out3.t, x.t, weight_of(gw), scratch8.t);  // 3 outputs for I = 4
  REQUIRE_FALSE(a.has_value());
  CHECK(a.error().code == Errc::shape_mismatch);
  auto b = gpu->matmul_silu(out4.t, x.t, weight_of(gw_odd), scratch8.t);  // 7 rows are no [gate; up]
  REQUIRE_FALSE(b.has_value());
  CHECK(b.error().code == Errc::shape_mismatch);
  DeviceTensor out_f32 = poisoned(*gpu, DType::f32, {1, 4});
  auto c = gpu->matmul_silu(out_f32.t, x.t, weight_of(gw), scratch8.t);  // activations are bf16
  REQUIRE_FALSE(c.has_value());
  CHECK(c.error().code == Errc::shape_mismatch);
  const Tensor inside = Tensor::of(scratch8.t.data, DType::bf16, {1, 4});
  auto e = gpu->matmul_silu(inside, x.t, weight_of(gw), scratch8.t);  // out inside the scratch
  REQUIRE_FALSE(e.has_value());
  CHECK(e.error().code == Errc::invalid_argument);
}

TEST_CASE("cuda rmsnorm_matmul and rmsnorm_matmul_silu match the CPU pair (the norm inside the one-row GEMV)",
          "[cuda]") {
  // With gemv_norm, one-row products with bf16 norm weights norm x inside the GEMV (every K split:
  // N >= 8192 one warp per column, smaller N up to 8 warps; early weights on and off) and leave h
  // untouched; more rows, f32 norm weights, K above 16384 (the staged row's bound) and (silu) K
  // below the SwiGLU GEMV's bound run the unfused pair. x * norm_w is rounded to bf16 like the pair's normed row, so the pair's
  // tolerances hold: one rounding more than the product's (f32 out), two (bf16 out), and
  // matmul_silu's bound for SwiGLU.
  const bool fold = GENERATE(false, true);
  const bool early = GENERATE(false, true);  // the first round of weights before pdl_wait()
  CAPTURE(fold, early);
  using E = CudaBackendOptions::GemvEarly;
  auto gpu = cuda_backend(CudaBackendOptions{
      .gemv_early_weights = early ? E::all : E::none, .gemv_norm = fold});
  auto cpu = cpu_reference();
  std::mt19937 rng(27);
  struct Shape {
    int64_t M, N, K;
    bool silu;
    DType norm;
  };
  const float eps = 1e-5f;
  for (Shape s : {Shape{1, 3072, 2048, false, DType::bf16}, Shape{1, 8200, 2048, false, DType::bf16},
                  Shape{1, 1000, 4096, false, DType::bf16}, Shape{1, 517, 8200, false, DType::bf16},
                  Shape{1, 300, 16400, false, DType::bf16}, Shape{1, 8200, 4096, false, DType::bf16},
                  Shape{1, 100, 72, false, DType::bf16}, Shape{1, 3072, 2048, false, DType::f32},
                  Shape{3, 1000, 72, false, DType::bf16}, Shape{1, 8192, 2048, true, DType::bf16},
                  Shape{1, 2100, 4104, true, DType::bf16}, Shape{1, 301, 8192, true, DType::bf16},
                  Shape{1, 1000, 1024, true, DType::bf16}, Shape{1, 1000, 520, true, DType::bf16},
                  Shape{5, 1000, 2048, true, DType::bf16},
                  Shape{1, 2000, 2048, true, DType::f32}}) {
    const int64_t rows = s.silu ? 2 * s.N : s.N;
    CAPTURE(s.M, s.N, s.K, s.silu, dtype_name(s.norm));
    const auto x = bf16_rounded(random_vec(rng, size_t(s.M * s.K), -2.f, 2.f));
    const auto g = bf16_rounded(random_vec(rng, size_t(s.K), 0.5f, 1.5f));
    const auto w = bf16_rounded(random_vec(rng, size_t(rows * s.K), -0.2f, 0.2f));
    DeviceTensor gx = upload(*gpu, x, DType::bf16, {s.M, s.K});
    DeviceTensor gg = upload(*gpu, g, s.norm, {s.K});
    DeviceTensor gw = upload(*gpu, w, DType::bf16, {rows, s.K});
    DeviceTensor gh = poisoned(*gpu, DType::bf16, {s.M, s.K});
    DeviceTensor gscratch = poisoned(*gpu, DType::bf16, {s.M, rows});
    DeviceTensor cx = upload(*cpu, x, DType::f32, {s.M, s.K});
    DeviceTensor cg = upload(*cpu, g, DType::f32, {s.K});
    DeviceTensor cw = upload(*cpu, w, DType::bf16, {rows, s.K});
    DeviceTensor ch = poisoned(*cpu, DType::f32, {s.M, s.K});
    DeviceTensor cscratch = poisoned(*cpu, DType::f32, {s.M, rows});
    DeviceTensor cout = poisoned(*cpu, DType::f32, {s.M, s.N});
    const bool folded = fold && s.M == 1 && s.norm == DType::bf16 && s.K <= 16384 && (!s.silu || s.K >= cuda::kSwiGluGemvMinK);
    if (s.silu) {
      REQUIRE(cpu->rmsnorm_matmul_silu(cout.t, cx.t, cg.t, eps, weight_of(cw), ch.t, cscratch.t).has_value());
      const auto ref = download(*cpu, cout.t);
      DeviceTensor gout = poisoned(*gpu, DType::bf16, {s.M, s.N});
      REQUIRE(gpu->rmsnorm_matmul_silu(gout.t, gx.t, gg.t, eps, weight_of(gw), gh.t, gscratch.t).has_value());
      CHECK(rel_error(download(*gpu, gout.t), ref) < 2 * kBf16OutputTol);
    } else {
      REQUIRE(cpu->rmsnorm_matmul(cout.t, cx.t, cg.t, eps, weight_of(cw), ch.t).has_value());
      const auto ref = download(*cpu, cout.t);
      DeviceTensor g16 = poisoned(*gpu, DType::bf16, {s.M, s.N});
      REQUIRE(gpu->rmsnorm_matmul(g16.t, gx.t, gg.t, eps, weight_of(gw), gh.t).has_value());
      CHECK(rel_error(download(*gpu, g16.t), ref) < 2 * kBf16OutputTol);
      DeviceTensor g32 = poisoned(*gpu, DType::f32, {s.M, s.N});
      REQUIRE(gpu->rmsnorm_matmul(g32.t, gx.t, gg.t, eps, weight_of(gw), gh.t).has_value());
      CHECK(rel_error(download(*gpu, g32.t), ref) < kBf16OutputTol);
    }
    // Folded: h is never written. Unfused: h holds the normed rows.
    const auto h = download(*gpu, gh.t);
    if (folded) {
      for (float v : h) REQUIRE(std::isnan(v));
    } else {
      CHECK(rel_error(h, download(*cpu, ch.t)) < kBf16OutputTol);
    }
  }
}

TEST_CASE("cuda rmsnorm_matmul rejects mismatched tensors with an error (folded or not)", "[cuda]") {
  const bool fold = GENERATE(false, true);
  CAPTURE(fold);
  auto gpu = cuda_backend(CudaBackendOptions{.gemv_norm = fold});
  std::mt19937 rng(28);
  DeviceTensor gw = upload(*gpu, random_vec(rng, 8 * 16), DType::bf16, {8, 16});
  DeviceTensor x = upload(*gpu, random_vec(rng, 16), DType::bf16, {1, 16});
  DeviceTensor norm = upload(*gpu, random_vec(rng, 16), DType::bf16, {16});
  DeviceTensor norm15 = upload(*gpu, random_vec(rng, 15), DType::bf16, {15});
  DeviceTensor h = poisoned(*gpu, DType::bf16, {1, 16});
  DeviceTensor out7 = poisoned(*gpu, DType::bf16, {1, 7});
  DeviceTensor out8 = poisoned(*gpu, DType::bf16, {1, 8});
  auto a = gpu->rmsnorm_matmul(out7.t, x.t, norm.t, 1e-5f, weight_of(gw), h.t);  // 7 outputs for 8 rows
  REQUIRE_FALSE(a.has_value());
  CHECK(a.error().code == Errc::shape_mismatch);
  auto b = gpu->rmsnorm_matmul(out8.t, x.t, norm15.t, 1e-5f, weight_of(gw), h.t);  // 15 norm weights for K = 16
  REQUIRE_FALSE(b.has_value());
  CHECK(b.error().code == Errc::shape_mismatch);
  DeviceTensor scratch7 = poisoned(*gpu, DType::bf16, {1, 7});
  DeviceTensor out4 = poisoned(*gpu, DType::bf16, {1, 4});
  auto c = gpu->rmsnorm_matmul_silu(out4.t, x.t, norm.t, 1e-5f, weight_of(gw), h.t, scratch7.t);  // scratch != 2I
  REQUIRE_FALSE(c.has_value());
  CHECK(c.error().code == Errc::shape_mismatch);
}
