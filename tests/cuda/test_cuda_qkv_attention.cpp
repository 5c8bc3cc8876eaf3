// Backend::rmsnorm_qkv_attention on CUDA (a layer's attention up to its output rows: norm, qkv
// product, RoPE + K/V into the paged cache, attention) against the CPU backend's op sequence and a
// CUDA backend running that sequence unfused. One-token decode steps of models without q/k norms
// run rope_qkv's work in the qkv GEMV's epilogue (CudaBackendOptions::gemv_rope, GemvArgs::rope).
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "cuda_test_util.hpp"

using namespace photon;
using namespace photon::test;

namespace {

struct Case {
  Geometry g;
  int64_t K;          // hidden size
  int32_t ctx;        // tokens in the cache after the step, the new one included
  int64_t bs;         // cache block size
  bool qk_norm;       // Qwen3-style per-head norms: the unfused sequence on every backend
  DType norm_dtype;   // of the input norm's weights: f32 runs the unfused sequence
  bool padded;        // CUDA runs only: context 0 and slot -1, a graph bucket's padding row
  int64_t layers = 1; // CUDA runs only: > 1, the cache is the last layer of a block-major pool (DeviceKv)
};

struct Outputs {
  std::vector<float> out, k, v, q, qkv, h;  // q, qkv, h: the scratch tensors after the op
};

Outputs run_op(Backend& b, DType dt, const Case& c, const BatchPlan& plan, bool pad, const std::vector<float>& x,
               const std::vector<float>& norm_w, const std::vector<float>& w, const std::vector<float>& k,
               const std::vector<float>& v, const std::vector<float>& freq, const std::vector<float>& qn,
               const std::vector<float>& kn) {
  const Geometry& g = c.g;
  const int64_t nq = g.nkv * g.group, hd = g.hd, width = (nq + 2 * g.nkv) * hd;
  const int64_t num_blocks = int64_t(k.size()) / (c.bs * g.nkv * hd);
  DeviceTensor dx = upload(b, x, dt, {1, c.K});
  DeviceTensor dn = upload(b, norm_w, dt == DType::f32 ? DType::f32 : c.norm_dtype, {c.K});
  DeviceTensor dw = upload(b, w, DType::bf16, {width, c.K});
  DeviceKv dkv = upload_kv(b, k, v, dt, num_blocks, c.bs, g.nkv, hd, dt == DType::bf16 ? c.layers : 1);
  DeviceTensor dfreq = upload(b, freq, DType::f32, {hd / 2});
  DeviceTensor dqn = upload(b, qn, dt, {hd});
  DeviceTensor dkn = upload(b, kn, dt, {hd});
  DeviceTensor dh = poisoned(b, dt, {1, c.K});
  DeviceTensor dqkv = poisoned(b, dt, {1, width});
  DeviceTensor dq = poisoned(b, dt, {1, nq, hd});
  DeviceTensor dout = poisoned(b, dt, {1, nq, hd});
  auto view = b.stage_plan(plan);
  REQUIRE(view.has_value());
  if (pad) {
    const int32_t zero = 0, none_slot = -1;
    REQUIRE(b.copy_to_device(const_cast<int32_t*>(view->context_lens), &zero, sizeof zero).has_value());
    REQUIRE(b.copy_to_device(const_cast<int32_t*>(view->slot_mapping), &none_slot, sizeof none_slot).has_value());
  }
  Weight W;
  W.w = dw.t;
  const Tensor none;
  const float scale = float(1.0 / std::sqrt(double(hd)));
  REQUIRE(b.rmsnorm_qkv_attention(dout.t, dx.t, dn.t, W, dh.t, dqkv.t, dq.t, *view, dfreq.t, c.qk_norm ? dqn.t : none,
                                  c.qk_norm ? dkn.t : none, 1e-5f, dkv.layer, scale)
              .has_value());
  HostKv kv = download_kv(b, dkv);
  return Outputs{download(b, dout.t), std::move(kv.k), std::move(kv.v),
                 download(b, dq.t),   download(b, dqkv.t), download(b, dh.t)};
}

// One decode step of one sequence through `fused` (gemv_rope on), `pair` (off) and the CPU.
void check_case(Backend& fused, Backend& pair, Backend& cpu, const Case& c, std::mt19937& rng) {
  const Geometry& g = c.g;
  const int64_t nq = g.nkv * g.group, hd = g.hd, width = (nq + 2 * g.nkv) * hd, row = g.nkv * hd;
  const std::vector<SeqSpec> seqs{{c.ctx, 1}};
  const int64_t num_blocks = (c.ctx + c.bs - 1) / c.bs + 3;
  const BatchPlan plan = scattered_plan(seqs, int32_t(c.bs), int32_t(num_blocks), rng);
  const float wr = float(2.0 / std::sqrt(double(c.K)));
  const auto x = bf16_rounded(random_vec(rng, size_t(c.K), -2.f, 2.f));
  const auto norm_w = bf16_rounded(random_vec(rng, size_t(c.K), 0.5f, 1.5f));
  const auto w = bf16_rounded(random_vec(rng, size_t(width * c.K), -wr, wr));
  const auto k = bf16_rounded(random_vec(rng, size_t(num_blocks * c.bs * row), -2.f, 2.f));
  const auto v = bf16_rounded(random_vec(rng, size_t(num_blocks * c.bs * row), -2.f, 2.f));
  const auto freq = inv_freq_of(hd, 500000.0);
  const auto qn = bf16_rounded(random_vec(rng, size_t(hd), 0.5f, 1.5f));
  const auto kn = bf16_rounded(random_vec(rng, size_t(hd), 0.5f, 1.5f));
  auto run = [&](Backend& b, DType dt, bool pad) { return run_op(b, dt, c, plan, pad, x, norm_w, w, k, v, freq, qn, kn); };
  const Outputs want = run(cpu, DType::f32, false);
  const Outputs got = run(fused, DType::bf16, c.padded);
  const Outputs ref = run(pair, DType::bf16, c.padded);

  // Which path ran: the epilogue leaves qkv unwritten, the unfused sequence writes it. h stays
  // unwritten whenever the norm runs inside the GEMV (bf16 norm weights), epilogue or not.
  const bool epilogue = !c.qk_norm && c.norm_dtype == DType::bf16;
  for (float e : got.qkv) REQUIRE(std::isnan(e) == epilogue);
  for (float e : ref.qkv) REQUIRE_FALSE(std::isnan(e));
  for (float e : got.h) REQUIRE(std::isnan(e) == (c.norm_dtype == DType::bf16));
  // q holds the roped queries either way (padding rows too: only the cache write is skipped).
  CHECK(rel_error(got.q, want.q) < 2 * kBf16OutputTol);
  CHECK(rel_error(got.q, ref.q) < kBf16OutputTol);
  if (c.padded) {
    for (float e : got.out) REQUIRE(e == 0.f);
    REQUIRE(got.k == k);
    REQUIRE(got.v == v);
    return;
  }
  CHECK(rel_error(got.out, want.out) < kAttentionTol);
  CHECK(rel_error(got.out, ref.out) < kBf16OutputTol);
  // The planned slot holds the new K/V row; every other slot its old value.
  const int64_t slot = plan.slot_mapping[0];
  for (int64_t s = 0; s < num_blocks * c.bs; ++s)
    for (int64_t e = 0; s != slot && e < row; ++e) {
      const size_t i = size_t(s * row + e);
      REQUIRE(got.k[i] == k[i]);
      REQUIRE(got.v[i] == v[i]);
    }
  auto new_row = [&](const Outputs& o) {  // the slot's K row, then its V row
    std::vector<float> r(o.k.begin() + slot * row, o.k.begin() + (slot + 1) * row);
    r.insert(r.end(), o.v.begin() + slot * row, o.v.begin() + (slot + 1) * row);
    return r;
  };
  CHECK(rel_error(new_row(got), new_row(want)) < 2 * kBf16OutputTol);
  CHECK(rel_error(new_row(got), new_row(ref)) < kBf16OutputTol);
}

}  // namespace

TEST_CASE("cuda rmsnorm_qkv_attention: RoPE in the qkv GEMV's epilogue matches the CPU and the CUDA sequence",
          "[cuda][attention]") {
  const bool early = GENERATE(false, true);  // the GEMV's first round of weights before pdl_wait()
  CAPTURE(early);
  using E = CudaBackendOptions::GemvEarly;
  using Rule = CudaBackendOptions::RopeInAttention;
  const E ew = early ? E::all : E::none;
  // RoPE inside decode attention off: by default the 8B shapes' query width (4096) keeps it there.
  auto fused = cuda_backend(
      CudaBackendOptions{.gemv_early_weights = ew, .rope_in_decode_attention = Rule::never, .gemv_rope = true});
  auto pair = cuda_backend(
      CudaBackendOptions{.gemv_early_weights = ew, .rope_in_decode_attention = Rule::never, .gemv_rope = false});
  auto cpu = cpu_reference();
  std::mt19937 rng(61);
  // Geometries of Llama-3.2-1B (hd 64, 32 q / 8 KV heads), the 8B shapes (hd 128, GQA 4) and GQA 1
  // and 16, small heads; hidden sizes giving every K split of the GEMV (one warp per column up to
  // four; eight is capped at four for whole rotation pairs per block).
  for (Geometry g : {Geometry{64, 8, 4}, Geometry{128, 8, 4}, Geometry{128, 8, 1}, Geometry{128, 2, 16},
                     Geometry{64, 2, 4}, Geometry{32, 2, 2}, Geometry{16, 2, 2}}) {
    for (int64_t K : {2048, 4096, 72, 1000 * 8}) {
      for (int32_t ctx : {1, 17, 300}) {
        CAPTURE(g.hd, g.nkv, g.group, K, ctx);
        check_case(*fused, *pair, *cpu, Case{g, K, ctx, 16, false, DType::bf16, false}, rng);
      }
    }
  }
  // A block size that is not a power of two; a padding row; the unfused sequence for q/k norms and
  // f32 norm weights.
  check_case(*fused, *pair, *cpu, Case{Geometry{64, 8, 4}, 2048, 70, 5, false, DType::bf16, false}, rng);
  check_case(*fused, *pair, *cpu, Case{Geometry{64, 8, 4}, 2048, 33, 16, false, DType::bf16, true}, rng);
  check_case(*fused, *pair, *cpu, Case{Geometry{128, 8, 2}, 2048, 40, 16, true, DType::bf16, false}, rng);
  check_case(*fused, *pair, *cpu, Case{Geometry{64, 8, 4}, 2048, 40, 16, false, DType::f32, false}, rng);
  // The last layer of a block-major pool (the decoder's layout): the epilogue's cache write, a
  // padding row, a block size that is not a power of two, and the unfused sequence.
  check_case(*fused, *pair, *cpu, Case{Geometry{64, 8, 4}, 2048, 300, 16, false, DType::bf16, false, 3}, rng);
  check_case(*fused, *pair, *cpu, Case{Geometry{128, 8, 4}, 4096, 17, 16, false, DType::bf16, false, 2}, rng);
  check_case(*fused, *pair, *cpu, Case{Geometry{64, 8, 4}, 2048, 33, 16, false, DType::bf16, true, 3}, rng);
  check_case(*fused, *pair, *cpu, Case{Geometry{64, 8, 4}, 2048, 70, 5, false, DType::bf16, false, 4}, rng);
  check_case(*fused, *pair, *cpu, Case{Geometry{128, 8, 2}, 2048, 40, 16, true, DType::bf16, false, 3}, rng);
}

TEST_CASE("cuda rmsnorm_qkv_attention rejects inconsistent tensors with an error", "[cuda][attention]") {
  auto gpu = cuda_backend(CudaBackendOptions{.gemv_rope = true});
  std::mt19937 rng(62);
  const Geometry g{64, 2, 2};
  const int64_t nq = 4, hd = 64, K = 256, width = (nq + 2 * g.nkv) * hd, bs = 16, blocks = 4;
  const BatchPlan plan = scattered_plan({{20, 1}}, int32_t(bs), int32_t(blocks), rng);
  auto view = gpu->stage_plan(plan);
  REQUIRE(view.has_value());
  DeviceTensor x = upload(*gpu, random_vec(rng, size_t(K)), DType::bf16, {1, K});
  DeviceTensor n = upload(*gpu, random_vec(rng, size_t(K), 0.5f, 1.5f), DType::bf16, {K});
  DeviceTensor w = upload(*gpu, random_vec(rng, size_t(width * K), -0.1f, 0.1f), DType::bf16, {width, K});
  DeviceTensor kc = poisoned(*gpu, DType::bf16, {blocks, bs, g.nkv, hd});
  DeviceTensor vc = poisoned(*gpu, DType::bf16, {blocks, bs, g.nkv, hd});
  DeviceTensor freq = upload(*gpu, inv_freq_of(hd, 10000.0), DType::f32, {hd / 2});
  DeviceTensor freq_short = upload(*gpu, inv_freq_of(hd - 2, 10000.0), DType::f32, {hd / 2 - 1});
  DeviceTensor h = poisoned(*gpu, DType::bf16, {1, K});
  DeviceTensor qkv = poisoned(*gpu, DType::bf16, {1, width});
  DeviceTensor q = poisoned(*gpu, DType::bf16, {1, nq, hd});
  DeviceTensor q5 = poisoned(*gpu, DType::bf16, {1, 5, hd});  // 5 query heads over 2 KV heads
  DeviceTensor out = poisoned(*gpu, DType::bf16, {1, nq, hd});
  Weight W;
  W.w = w.t;
  const Tensor none;
  auto call = [&](Tensor qt, Tensor f) {
    return gpu->rmsnorm_qkv_attention(out.t, x.t, n.t, W, h.t, qkv.t, qt, *view, f, none, none, 1e-5f,
                                      KvLayer{kc.t, vc.t}, 0.125f);
  };
  auto r1 = call(q5.t, freq.t);
  REQUIRE_FALSE(r1.has_value());
  CHECK(r1.error().code == Errc::shape_mismatch);
  auto r2 = call(q.t, freq_short.t);
  REQUIRE_FALSE(r2.has_value());
  CHECK(r2.error().code == Errc::shape_mismatch);
  // Nothing was written into the cache by the rejected calls.
  for (float e : download(*gpu, kc.t)) REQUIRE(std::isnan(e));
  REQUIRE(call(q.t, freq.t).has_value());
}
