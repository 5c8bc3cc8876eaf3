// The persistent decode kernel (the CUDA backend's decoder_layers for one-token steps) against
// its twins on fresh random layers: the per-op CUDA kernels (Backend's default decoder_layers on
// the same backend) and the CPU backend. Head dims 64 and 128, GQA 1/4/8, with and without
// Qwen3's q/k norms, hidden sizes that do not split evenly over the SMs, and contexts from 1 key
// to past 2,048 (one split to 16) over scattered blocks of a block-major KV pool.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "cuda_test_util.hpp"

using namespace photon;
using namespace photon::test;

namespace {

// A decoder shape: hidden, intermediate, attention geometry, q/k norms, layer count.
struct Shape {
  int64_t H, I;
  Geometry g;
  bool qk_norm;
  int layers;
};

struct HostLayer {
  std::vector<float> qkv, o, gate_up, down, input_norm, post_norm, q_norm, k_norm;
};

// Weights uniform in +-sqrt(3 / K) (unit-variance outputs), norms in [0.8, 1.2]; all bf16 values.
HostLayer random_layer(const Shape& s, std::mt19937& rng) {
  const int64_t hd = s.g.hd, nq = s.g.nkv * s.g.group, qkv_n = (nq + 2 * s.g.nkv) * hd;
  auto mat = [&](int64_t n, int64_t k) {
    const float a = float(std::sqrt(3.0 / double(k)));
    return bf16_rounded(random_vec(rng, size_t(n * k), -a, a));
  };
  HostLayer L;
  L.qkv = mat(qkv_n, s.H);
  L.o = mat(s.H, nq * hd);
  L.gate_up = mat(2 * s.I, s.H);
  L.down = mat(s.H, s.I);
  L.input_norm = bf16_rounded(random_vec(rng, size_t(s.H), 0.8f, 1.2f));
  L.post_norm = bf16_rounded(random_vec(rng, size_t(s.H), 0.8f, 1.2f));
  if (s.qk_norm) {
    L.q_norm = bf16_rounded(random_vec(rng, size_t(hd), 0.8f, 1.2f));
    L.k_norm = bf16_rounded(random_vec(rng, size_t(hd), 0.8f, 1.2f));
  }
  return L;
}

// Everything decoder_layers reads and writes, in one backend's memory. The caches are the
// decoder's block-major pool (docs/kv-cache-layout.md): [num_blocks][layer][k | v][bs][nkv][hd].
struct Placed {
  std::vector<DeviceTensor> keep;
  std::vector<DecoderLayerWeights> layers;
  std::vector<KvLayer> caches;  // views into kv_pool
  Tensor kv_pool;
  Tensor x, inv_freq;
  DecoderScratch scratch;
};

Placed place(Backend& b, const Shape& s, const std::vector<HostLayer>& host, const std::vector<std::vector<float>>& k,
             const std::vector<std::vector<float>>& v, const std::vector<float>& x, const std::vector<float>& freq,
             int64_t num_blocks, int64_t bs) {
  const DType act = b.activation_dtype(), kv = b.kv_dtype(), wt = b.weight_dtype(DType::bf16);
  const int64_t hd = s.g.hd, nkv = s.g.nkv, nq = nkv * s.g.group, qkv_n = (nq + 2 * nkv) * hd;
  Placed p;
  auto put = [&](const std::vector<float>& data, DType dt, std::initializer_list<int64_t> dims) {
    p.keep.push_back(upload(b, data, dt, dims));
    return p.keep.back().t;
  };
  auto out = [&](DType dt, std::initializer_list<int64_t> dims) {
    p.keep.push_back(poisoned(b, dt, dims));
    return p.keep.back().t;
  };
  for (size_t l = 0; l < host.size(); ++l) {
    const HostLayer& h = host[l];
    DecoderLayerWeights L;
    L.qkv.w = put(h.qkv, wt, {qkv_n, s.H});
    L.o.w = put(h.o, wt, {s.H, nq * hd});
    L.gate_up.w = put(h.gate_up, wt, {2 * s.I, s.H});
    L.down.w = put(h.down, wt, {s.H, s.I});
    L.input_norm = put(h.input_norm, wt, {s.H});
    L.post_attention_norm = put(h.post_norm, wt, {s.H});
    if (s.qk_norm) {
      L.q_norm = put(h.q_norm, wt, {hd});
      L.k_norm = put(h.k_norm, wt, {hd});
    }
    p.layers.push_back(L);
  }
  const int64_t L = int64_t(host.size()), part = bs * nkv * hd;  // part: one block's k (or v) of one layer
  std::vector<float> pool(size_t(num_blocks * L * 2 * part));
  for (int64_t blk = 0; blk < num_blocks; ++blk)
    for (int64_t l = 0; l < L; ++l) {
      std::copy_n(k[size_t(l)].begin() + blk * part, part, pool.begin() + (blk * L * 2 + 2 * l) * part);
      std::copy_n(v[size_t(l)].begin() + blk * part, part, pool.begin() + (blk * L * 2 + 2 * l + 1) * part);
    }
  p.kv_pool = put(pool, kv, {int64_t(pool.size())});
  auto* base = static_cast<char*>(p.kv_pool.data);
  for (int64_t l = 0; l < L; ++l) {
    const size_t es = dtype_size(kv);
    p.caches.push_back(KvLayer{Tensor::of(base + size_t(2 * l * part) * es, kv, {num_blocks, bs, nkv, hd}),
                               Tensor::of(base + size_t((2 * l + 1) * part) * es, kv, {num_blocks, bs, nkv, hd}),
                               2 * L * bs});
  }
  p.x = put(x, act, {1, s.H});
  p.inv_freq = put(freq, DType::f32, {hd / 2});
  p.scratch = DecoderScratch{out(act, {1, s.H}),     out(act, {1, s.H}),     out(act, {1, qkv_n}),
                             out(act, {1, nq, hd}),  out(act, {1, nq, hd}),  out(act, {1, 2 * s.I}),
                             out(act, {1, s.I})};
  return p;
}

// Chained bf16 rounding over a few layers (each layer's adds, norms and products round as the
// per-op kernels do, in another summation order): a few times one op's output tolerance.
constexpr double kLayersTol = 1e-2;

void check_shape(Backend& gpu, Backend& cpu, const Shape& s, const std::vector<int32_t>& contexts, std::mt19937& rng) {
  const int64_t bs = 16, hd = s.g.hd, nkv = s.g.nkv;
  std::vector<HostLayer> host;
  for (int l = 0; l < s.layers; ++l) host.push_back(random_layer(s, rng));
  const std::vector<float> freq = inv_freq_of(hd, 500000.0);
  const DecoderLayersParams params_eps{Tensor(), 1e-5f, float(1.0 / std::sqrt(double(hd)))};
  for (int32_t ctx : contexts) {
    CAPTURE(s.H, s.I, hd, nkv, s.g.group, s.qk_norm, s.layers, ctx);
    const int64_t num_blocks = (ctx + bs - 1) / bs + 7;
    BatchPlan plan = scattered_plan({{ctx, 1}}, int32_t(bs), int32_t(num_blocks), rng);
    std::vector<std::vector<float>> k, v;
    for (int l = 0; l < s.layers; ++l) {
      k.push_back(bf16_rounded(random_vec(rng, size_t(num_blocks * bs * nkv * hd), -2.f, 2.f)));
      v.push_back(bf16_rounded(random_vec(rng, size_t(num_blocks * bs * nkv * hd), -2.f, 2.f)));
    }
    const std::vector<float> x = bf16_rounded(random_vec(rng, size_t(s.H), -1.f, 1.f));

    Placed fused = place(gpu, s, host, k, v, x, freq, num_blocks, bs);
    Placed per_op = place(gpu, s, host, k, v, x, freq, num_blocks, bs);
    Placed ref = place(cpu, s, host, k, v, x, freq, num_blocks, bs);
    auto gview = gpu.stage_plan(plan);
    auto cview = cpu.stage_plan(plan);
    REQUIRE(gview.has_value());
    REQUIRE(cview.has_value());

    const int64_t launches = cuda_persistent_decode_launches(gpu);
    DecoderLayersParams p = params_eps;
    p.inv_freq = fused.inv_freq;
    REQUIRE(gpu.decoder_layers(fused.x, fused.layers, fused.caches, fused.scratch, *gview, p).has_value());
    REQUIRE(cuda_persistent_decode_launches(gpu) == launches + 1);  // the persistent kernel ran, no fallback
    p.inv_freq = per_op.inv_freq;
    REQUIRE(gpu.Backend::decoder_layers(per_op.x, per_op.layers, per_op.caches, per_op.scratch, *gview, p).has_value());
    p.inv_freq = ref.inv_freq;
    REQUIRE(cpu.decoder_layers(ref.x, ref.layers, ref.caches, ref.scratch, *cview, p).has_value());

    const std::vector<float> got = download(gpu, fused.x), twin = download(gpu, per_op.x), want = download(cpu, ref.x);
    CHECK(rel_error(got, twin) < kLayersTol);
    CHECK(rel_error(got, want) < kLayersTol);
    CHECK(rel_error(twin, want) < kLayersTol);
    // The caches: only the current token's K/V slot changed, to what the per-op kernels write.
    CHECK(rel_error(download(gpu, fused.kv_pool), download(gpu, per_op.kv_pool)) < 1e-3);
    CHECK(rel_error(download(gpu, fused.kv_pool), download(cpu, ref.kv_pool)) < 1e-3);
  }
}

}  // namespace

TEST_CASE("cuda persistent decode layers match the per-op kernels and the CPU", "[cuda][decode_layers]") {
  auto gpu = cuda_backend(CudaBackendOptions{.persistent_decode = true});
  auto cpu = cpu_reference();
  std::mt19937 rng(61);
  // GQA 4, hd 64, H not a multiple of the SM count, 3 layers.
  check_shape(*gpu, *cpu, Shape{520, 1376, Geometry{64, 2, 4}, false, 3}, {1, 2, 63, 64, 65, 130, 700, 2100}, rng);
  // GQA 1, hd 128 with q/k norms: q_dim above H.
  check_shape(*gpu, *cpu, Shape{256, 512, Geometry{128, 4, 1}, true, 2}, {1, 17, 129, 1000}, rng);
  // GQA 8 (two passes of query heads per item), hd 64 with q/k norms.
  check_shape(*gpu, *cpu, Shape{1024, 2816, Geometry{64, 1, 8}, true, 2}, {5, 300, 4097}, rng);
  // Llama-3.2-1B's and Qwen3-8B's layer shapes (stages of 16 and 24 KiB).
  check_shape(*gpu, *cpu, Shape{2048, 8192, Geometry{64, 8, 4}, false, 1}, {140, 1500}, rng);
  check_shape(*gpu, *cpu, Shape{4096, 12288, Geometry{128, 8, 4}, true, 1}, {140}, rng);
}

TEST_CASE("cuda persistent decode layers with the weight loads in flight capped", "[cuda][decode_layers]") {
  auto cpu = cpu_reference();
  std::mt19937 rng(67);
  for (const int32_t cap : {1, 2, 3}) {
    INFO("max_in_flight " << cap);
    auto gpu = cuda_backend(CudaBackendOptions{.persistent_decode = true, .persistent_max_in_flight = cap});
    check_shape(*gpu, *cpu, Shape{520, 1376, Geometry{64, 2, 4}, false, 3}, {1, 65, 700}, rng);
    check_shape(*gpu, *cpu, Shape{2048, 8192, Geometry{64, 8, 4}, false, 2}, {140}, rng);
  }
}

TEST_CASE("cuda decoder_layers falls back to the per-op kernels where the persistent kernel does not apply",
          "[cuda][decode_layers]") {
  auto gpu = cuda_backend(CudaBackendOptions{.persistent_decode = false});
  auto cpu = cpu_reference();
  std::mt19937 rng(62);
  const Shape s{256, 512, Geometry{64, 2, 2}, false, 1};
  std::vector<HostLayer> host{random_layer(s, rng)};
  const int64_t bs = 16, num_blocks = 9;
  std::vector<std::vector<float>> k{bf16_rounded(random_vec(rng, size_t(num_blocks * bs * 2 * 64)))};
  std::vector<std::vector<float>> v{bf16_rounded(random_vec(rng, size_t(num_blocks * bs * 2 * 64)))};
  const std::vector<float> x = bf16_rounded(random_vec(rng, size_t(s.H)));
  const std::vector<float> freq = inv_freq_of(64, 10000.0);
  Placed g = place(*gpu, s, host, k, v, x, freq, num_blocks, bs);
  Placed c = place(*cpu, s, host, k, v, x, freq, num_blocks, bs);
  BatchPlan plan = scattered_plan({{40, 1}}, int32_t(bs), int32_t(num_blocks), rng);
  auto gview = gpu->stage_plan(plan);
  auto cview = cpu->stage_plan(plan);
  REQUIRE(gview.has_value());
  REQUIRE(cview.has_value());
  REQUIRE(gpu->decoder_layers(g.x, g.layers, g.caches, g.scratch, *gview, {g.inv_freq, 1e-5f, 0.125f}).has_value());
  REQUIRE(cpu->decoder_layers(c.x, c.layers, c.caches, c.scratch, *cview, {c.inv_freq, 1e-5f, 0.125f}).has_value());
  CHECK(cuda_persistent_decode_launches(*gpu) == 0);
  CHECK(rel_error(download(*gpu, g.x), download(*cpu, c.x)) < kLayersTol);
  // A layer/cache count mismatch is an error, not a crash.
  auto bad = gpu->decoder_layers(g.x, g.layers, std::span<const KvLayer>(), g.scratch, *gview, {g.inv_freq, 1e-5f, 0.125f});
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().code == Errc::invalid_argument);
}
