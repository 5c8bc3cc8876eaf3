// The LM head screen (docs/lm-head-screen.md): the int8 GEMV's bound mode against its formula in
// double and the bf16 product it stands for, the screened draw against the one-pass kernel over the
// bf16 head's logits (its CPU twin is the bf16 product then the one-pass draw, which the CUDA
// sampler tests compare with the CPU sampler), and a model's sampled one-row steps with the screen
// against the same steps without it.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "core/quantize.hpp"
#include "core/tensor.hpp"
#include "cuda/gemv.cuh"
#include "cuda/sampling.cuh"
#include "cuda_test_util.hpp"
#include "model/config.hpp"
#include "model/model.hpp"

namespace photon::test {
namespace {

constexpr int32_t kGroup = 128;

int32_t num_sms() {
  int n = 0;
  REQUIRE(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, 0) == cudaSuccess);
  return n;
}

template <class T>
std::vector<T> download_raw(Backend& b, const void* src, size_t n) {
  std::vector<T> v(n);
  REQUIRE(b.copy_to_host(v.data(), src, n * sizeof(T)).has_value());
  return v;
}

// One head on the device: bf16 weights [V, K] and their int8 screen, the row x and norm weights.
struct Head {
  int64_t V, K;
  std::vector<float> w, x, g;  // host values (bf16-exact)
  HostInt8 q;
  std::vector<float> row_abs;  // sum of |w| per row, rounded up
  DeviceTensor dw, dx, dg, drow_abs;
  DeviceInt8 dq;
  Weight bf16_weight() const { return weight_of(dw); }
};

Head make_head(Backend& b, std::vector<float> w, std::vector<float> x, std::vector<float> g, int64_t V, int64_t K) {
  Head h{V, K, bf16_rounded(std::move(w)), bf16_rounded(std::move(x)), bf16_rounded(std::move(g)), {}, {}, {}, {}, {}, {}, {}};
  h.q = HostInt8{std::vector<int8_t>(size_t(V * K)), {}, V, K, int8_group_count(K, kGroup), kGroup};
  h.q.scales.resize(size_t(V * h.q.groups));
  for (int64_t n = 0; n < V; ++n)
    REQUIRE(quantize_row_int8(h.w.data() + n * K, K, kGroup, h.q.codes.data() + n * K, h.q.scales.data() + n * h.q.groups));
  h.row_abs.resize(size_t(V));
  for (int64_t n = 0; n < V; ++n) {
    double sum = 0;
    for (int64_t k = 0; k < K; ++k) sum += std::abs(double(h.w[size_t(n * K + k)]));
    h.row_abs[size_t(n)] = std::nextafter(float(sum), std::numeric_limits<float>::infinity());
  }
  h.drow_abs = upload(b, h.row_abs, DType::f32, {V});
  h.dw = upload(b, h.w, DType::bf16, {V, K});
  h.dq = upload_int8(b, h.q);
  h.dx = upload(b, h.x, DType::bf16, {1, K});
  h.dg = upload(b, h.g, DType::bf16, {K});
  return h;
}

constexpr float kEps = 1e-5f;

// The bf16 head's logits through the backend's own LM head product (what an unscreened step reads).
std::vector<float> exact_logits(Backend& b, const Head& h, DeviceTensor& out) {
  DeviceTensor scratch = poisoned(b, DType::bf16, {1, h.K});
  REQUIRE(b.rmsnorm_matmul(out.t, h.dx.t, h.dg.t, kEps, h.bf16_weight(), scratch.t).has_value());
  return download(b, out.t);
}

// The screen's logits and bounds (GemvArgs::bound), launched directly.
void screen_logits(Backend& b, const Head& h, DeviceTensor& out, DeviceTensor& bound) {
  REQUIRE(b.synchronize().has_value());
  cuda::GemvArgs a;
  a.out = out.t.data;
  a.x = static_cast<const __nv_bfloat16*>(h.dx.t.data);
  a.M = 1;
  a.N = int32_t(h.V);
  a.K = int32_t(h.K);
  a.out_f32 = true;
  a.norm_w = static_cast<const __nv_bfloat16*>(h.dg.t.data);
  a.eps = kEps;
  a.w8 = h.dq.codes.t.as<const int8_t>();
  a.scales = h.dq.scales.t.as<const float>();
  a.group = kGroup;
  a.passes_grid = 4 * num_sms();
  a.bound = bound.t.as<float>();
  a.row_abs = h.drow_abs.t.as<const float>();
  REQUIRE(cuda::gemv_applies(a));
  REQUIRE(cuda::launch_gemv(a, nullptr).has_value());
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
}

// The screen's values in double from the host copies, with x quantized to int16 as the kernel does
// (fp32 scale, round to nearest even): logits r * sx * sum over groups of scale * (codes . qx), and the
// bound (screen_bound) with the column's sum over 16-code chunks of scale * sum |qx|; plus
// r * max|y| * row_abs / 4096 (the bound's rounding term) as the logits' tolerance.
struct ScreenRef {
  std::vector<double> logits, bound, tol;
};
ScreenRef screen_in_double(const Head& h) {
  std::vector<float> y(size_t(h.K));
  double ss = 0;
  float ymax = 0.f;
  for (int64_t k = 0; k < h.K; ++k) {
    y[size_t(k)] = bf16_to_f32(f32_to_bf16(h.x[size_t(k)] * h.g[size_t(k)]));
    ymax = std::max(ymax, std::abs(y[size_t(k)]));
    ss += double(h.x[size_t(k)]) * h.x[size_t(k)];
  }
  const double r = 1.0 / std::sqrt(ss / double(h.K) + kEps);
  const float sx = ymax / 32767.f, inv = ymax > 0.f ? 32767.f / ymax : 0.f;
  std::vector<int> qx(size_t(h.K));
  for (int64_t k = 0; k < h.K; ++k)
    qx[size_t(k)] = std::clamp(int(std::nearbyint(y[size_t(k)] * inv)), -32767, 32767);
  ScreenRef out;
  const int64_t groups = h.q.groups;
  for (int64_t n = 0; n < h.V; ++n) {
    double dot = 0, qsum = 0;
    for (int64_t k = 0; k < h.K; ++k) {
      const double sc = h.q.scales[size_t(n * groups + k / kGroup)];
      dot += sc * double(h.q.codes[size_t(n * h.K + k)]) * qx[size_t(k)];
      qsum += sc * std::abs(qx[size_t(k)]);
    }
    out.logits.push_back(r * double(sx) * dot);
    out.bound.push_back(double(cuda::screen_bound(float(r), sx, ymax, float(qsum), h.row_abs[size_t(n)])));
    out.tol.push_back(r * double(ymax) * h.row_abs[size_t(n)] / 4096.0);
  }
  return out;
}

// One row drawn by the one-pass kernel over `logits` (screen null) or by the screened kernel over
// the screen's logits with `screen`.
struct Draw {
  int32_t id = -2, status = -2;
  float logprob = 0.f;
  int64_t rescored = -1;  // screened draws: ScreenArgs::rescored's count
};

// The ids a screened greedy draw rescores: those whose zt + e reaches the row's best zt - e.
int64_t greedy_rescored(const std::vector<float>& zt, const std::vector<float>& e) {
  float best_lo = -INFINITY;
  for (size_t i = 0; i < zt.size(); ++i) best_lo = std::max(best_lo, zt[i] - e[i]);
  int64_t n = 0;
  for (size_t i = 0; i < zt.size(); ++i) n += zt[i] + e[i] >= best_lo ? 1 : 0;
  return n;
}
Draw draw(Backend& b, const Tensor& logits, int64_t V, const cuda::SampleRowParams& p, const cuda::ScreenArgs* screen) {
  const int32_t sms = num_sms();
  const size_t ws = screen != nullptr ? cuda::screened_workspace_bytes(int32_t(V), sms)
                                      : size_t(cuda::one_pass_slices(1, int32_t(V), sms)) * cuda::kOnePassPartialBytes;
  auto partials = b.allocate(ws);
  auto arrivals = b.allocate(64);
  auto outs = b.allocate(64);
  REQUIRE(partials.has_value());
  REQUIRE(arrivals.has_value());
  REQUIRE(outs.has_value());
  REQUIRE(b.fill_zero(Tensor::of(arrivals->data(), DType::i8, {64})).has_value());
  REQUIRE(b.synchronize().has_value());
  auto* o = static_cast<char*>(outs->data());
  cuda::SampleArgs a;
  a.logits = logits.as<float>();
  a.inline_params[0] = p;
  a.out_ids = reinterpret_cast<int32_t*>(o);
  a.out_status = reinterpret_cast<int32_t*>(o + 16);
  a.out_logprob = reinterpret_cast<float*>(o + 32);
  a.num_rows = 1;
  a.vocab = int32_t(V);
  a.one_pass = true;
  a.one_pass_partials = partials->data();
  a.one_pass_arrivals = static_cast<int32_t*>(arrivals->data());
  // arrivals: the counter at 0, the rescored ids' count (u64) at 8, both zero.
  auto* rescored = reinterpret_cast<unsigned long long*>(static_cast<char*>(arrivals->data()) + 8);
  if (screen != nullptr) {
    cuda::ScreenArgs sa = *screen;
    sa.rescored = rescored;
    REQUIRE(cuda::sample_screened_applies(a, sa, sms));
    REQUIRE(cuda::launch_sample_screened(a, sa, sms, nullptr).has_value());
  } else {
    REQUIRE(cuda::launch_sample_one_pass(a, sms, nullptr).has_value());
  }
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  Draw d;
  d.id = download_raw<int32_t>(b, o, 1)[0];
  d.status = download_raw<int32_t>(b, o + 16, 1)[0];
  d.logprob = download_raw<float>(b, o + 32, 1)[0];
  CHECK(download_raw<int32_t>(b, arrivals->data(), 1)[0] == 0);  // left ready for the next launch
  if (screen != nullptr) d.rescored = int64_t(download_raw<unsigned long long>(b, rescored, 1)[0]);
  return d;
}

}  // namespace

TEST_CASE("cuda LM head screen: the int8 product in bound mode matches its formula, and its bound covers the "
          "bf16 product",
          "[cuda]") {
  // The passes kernel in tiles of 4 (K = 2048, 4096) and 2 (K = 1024, 3072), N past and below one
  // wave of column groups. Weights of random magnitude per row (scales differ by row and group).
  auto gpu = cuda_backend(CudaBackendOptions{.gemv_passes_min_n = 1, .gemv_passes_max_row_bytes = 1 << 20});
  std::mt19937 rng(71);
  struct Shape {
    int64_t V, K;
  };
  for (Shape s : {Shape{128256, 2048}, Shape{151936, 1024}, Shape{9001, 4096}, Shape{20000, 3072}}) {
    CAPTURE(s.V, s.K);
    std::vector<float> w(size_t(s.V * s.K));
    std::uniform_real_distribution<float> mag(0.005f, 0.1f);
    for (int64_t n = 0; n < s.V; ++n) {
      const float m = mag(rng);
      std::uniform_real_distribution<float> d(-m, m);
      for (int64_t k = 0; k < s.K; ++k) w[size_t(n * s.K + k)] = d(rng);
    }
    const Head h = make_head(*gpu, std::move(w), random_vec(rng, size_t(s.K), -3.f, 3.f),
                             random_vec(rng, size_t(s.K), 0.5f, 1.5f), s.V, s.K);
    DeviceTensor exact_out = poisoned(*gpu, DType::f32, {1, s.V});
    const std::vector<float> z = exact_logits(*gpu, h, exact_out);
    DeviceTensor zt_out = poisoned(*gpu, DType::f32, {1, s.V}), bound = poisoned(*gpu, DType::f32, {s.V});
    screen_logits(*gpu, h, zt_out, bound);
    const std::vector<float> zt = download(*gpu, zt_out.t), eps = download(*gpu, bound.t);
    const ScreenRef want = screen_in_double(h);
    int64_t off_formula = 0, uncovered = 0, bound_off = 0;
    double worst_ratio = 0;
    for (int64_t n = 0; n < s.V; ++n) {
      const size_t i = size_t(n);
      off_formula += !(std::abs(double(zt[i]) - want.logits[i]) <= want.tol[i]) ? 1 : 0;
      uncovered += !(std::abs(double(z[i]) - double(zt[i])) <= double(eps[i])) ? 1 : 0;
      bound_off += !(std::abs(double(eps[i]) / want.bound[i] - 1.0) < 1e-4) ? 1 : 0;
      worst_ratio = std::max(worst_ratio, std::abs(double(z[i]) - double(zt[i])) / double(eps[i]));
    }
    INFO("largest |z - zt| / bound: " << worst_ratio);
    CHECK(off_formula == 0);
    CHECK(uncovered == 0);
    CHECK(bound_off == 0);
  }
}

TEST_CASE("cuda screened draw gives the one-pass kernel's ids over the bf16 head's logits", "[cuda]") {
  // Random heads as Model::create_random draws them (uniform +-1/sqrt(K)), a head with a dominant
  // row, rows in identical pairs (exact ties: the lower id wins), every row identical and x = 0 (every
  // id a candidate: the last block's scan), and a NaN in x (a bad logit). Greedy rows
  // and Gumbel-max rows at several temperatures and seeds. Ids and statuses equal; logprobs within
  // the bound of the ids not rescored (the largest bound); at greedy rows, the count of rescored ids
  // as the host finds it from the screen's logits and bounds (none where that set is one id: the
  // sole survivor's logit only feeds the logprob). Both paths run, and the draws with seed 99
  // prefetch each block's best row and first 3 candidate rows (ScreenArgs::prefetch_rows).
  auto gpu = cuda_backend({});
  std::mt19937 rng(73);
  int64_t single_draws = 0, rescoring_draws = 0;
  enum class Kind { random, dominant, pairs, identical, zero_x, nan_x };
  struct Case {
    int64_t V, K;
    Kind kind;
  };
  for (Case c : {Case{128256, 2048, Kind::random}, Case{151936, 1024, Kind::random}, Case{128256, 2048, Kind::dominant},
                 Case{32768, 4096, Kind::pairs}, Case{8192, 1024, Kind::identical}, Case{32000, 2048, Kind::zero_x},
                 Case{32000, 2048, Kind::nan_x}}) {
    CAPTURE(c.V, c.K, int(c.kind));
    const float lim = 1.f / std::sqrt(float(c.K));
    std::vector<float> w = random_vec(rng, size_t(c.V * c.K), -lim, lim);
    if (c.kind == Kind::dominant)
      for (int64_t k = 0; k < c.K; ++k) w[size_t(777 * c.K + k)] *= 8.f;
    if (c.kind == Kind::pairs)
      for (int64_t n = 1; n < c.V; n += 2) std::copy_n(w.begin() + (n - 1) * c.K, c.K, w.begin() + n * c.K);
    if (c.kind == Kind::identical)
      for (int64_t n = 1; n < c.V; ++n) std::copy_n(w.begin(), c.K, w.begin() + n * c.K);
    std::vector<float> x = random_vec(rng, size_t(c.K), -2.f, 2.f);
    if (c.kind == Kind::zero_x) std::fill(x.begin(), x.end(), 0.f);
    if (c.kind == Kind::nan_x) x[5] = std::numeric_limits<float>::quiet_NaN();
    const Head h = make_head(*gpu, std::move(w), std::move(x), random_vec(rng, size_t(c.K), 0.8f, 1.2f), c.V, c.K);
    DeviceTensor exact_out = poisoned(*gpu, DType::f32, {1, c.V});
    (void)exact_logits(*gpu, h, exact_out);
    DeviceTensor zt_out = poisoned(*gpu, DType::f32, {1, c.V}), bound = poisoned(*gpu, DType::f32, {c.V});
    screen_logits(*gpu, h, zt_out, bound);
    const std::vector<float> eps = download(*gpu, bound.t), zt = download(*gpu, zt_out.t);
    float max_bound = 0.f;
    for (float e : eps) max_bound = std::max(max_bound, e);
    cuda::ScreenArgs screen{bound.t.as<const float>(), h.dx.t.data, h.dg.t.data, kEps, h.dw.t.data,
                            int32_t(c.K)};
    for (float t : {0.f, 0.5f, 1.f, 2.f})
      for (uint64_t seed : {uint64_t(1), uint64_t(99)})
        for (uint64_t step : {uint64_t(0), uint64_t(7)}) {
          CAPTURE(t, seed, step);
          cuda::SampleRowParams p;
          p.temperature = t;
          p.seed = seed;
          p.step = step;
          screen.prefetch_rows = seed == 99 ? 4 : 0;
          const Draw want = draw(*gpu, exact_out.t, c.V, p, nullptr);
          const Draw got = draw(*gpu, zt_out.t, c.V, p, &screen);
          CHECK(got.status == want.status);
          CHECK(got.id == want.id);
          if (want.status == cuda::kSampleOk) {
            ++(got.rescored == 0 ? single_draws : rescoring_draws);
            INFO("logprob " << got.logprob << " against " << want.logprob << ", largest bound " << max_bound);
            CHECK(std::abs(got.logprob - want.logprob) <= max_bound + 1e-5f);
            if (c.kind == Kind::random) CHECK(std::abs(got.logprob - want.logprob) < 2e-3f);
          }
          if (t == 0.f && want.status == cuda::kSampleOk) {
            // The ids the bounds cannot rule out, however many (all of them where every row or x
            // is equal: the last block's scan).
            const int64_t kept = greedy_rescored(zt, eps);
            CHECK(got.rescored == (kept == 1 ? 0 : kept));
            if (c.kind == Kind::identical || c.kind == Kind::zero_x) CHECK(kept == c.V);
            if (c.kind == Kind::random) CHECK(kept < 64);
          }
          if (t == 0.f && (c.kind == Kind::identical || c.kind == Kind::zero_x)) CHECK(got.id == 0);
          if (t == 0.f && c.kind == Kind::pairs) CHECK(got.id % 2 == 0);  // ties go to the lower id
        }
  }
  CHECK(single_draws > 0);
  CHECK(rescoring_draws > 0);
}

namespace {

// A Llama shape whose head the screen serves (hidden 1024), small enough to build in a second.
ModelConfig screen_test_config() {
  nlohmann::json j = {{"architectures", {"LlamaForCausalLM"}},
                      {"hidden_size", 1024},
                      {"intermediate_size", 2048},
                      {"num_hidden_layers", 2},
                      {"num_attention_heads", 16},
                      {"num_key_value_heads", 4},
                      {"head_dim", 64},
                      {"vocab_size", 32000},
                      {"rms_norm_eps", 1e-5},
                      {"rope_theta", 500000.0},
                      {"max_position_embeddings", 4096},
                      {"tie_word_embeddings", true},
                      {"torch_dtype", "bfloat16"}};
  auto c = ModelConfig::parse(j.dump(), "screen-test config.json");
  REQUIRE(c.has_value());
  return *c;
}

}  // namespace

TEST_CASE("cuda sampled one-row steps with the LM head screen give the tokens of the bf16 head", "[cuda]") {
  // Two backends and models of the same random weights, the screen on (the default) and off: 40
  // decode steps of one sequence, greedy and seeded, run one at a time and overlapped (the screened
  // kernel stores the id for the next step's embedding); then three sequences, which the screen does
  // not serve. Ids equal, logprobs within 2e-3; the screened steps counted.
  auto on = cuda_backend({});
  auto off = cuda_backend(CudaBackendOptions{.lm_head_screen = false});
  const ModelConfig config = screen_test_config();
  REQUIRE(on->lm_head_screen_group(config.vocab_size, config.hidden_size) == kGroup);
  REQUIRE(off->lm_head_screen_group(config.vocab_size, config.hidden_size) == 0);
  auto mon = Model::create_random(config, *on, 5);
  auto moff = Model::create_random(config, *off, 5);
  REQUIRE(mon.has_value());
  REQUIRE(moff.has_value());
  constexpr int32_t kBlock = 16, kSteps = 40, blocks_per_seq = 8;
  for (bool overlapped : {false, true})
    for (float t : {0.f, 0.9f}) {
      CAPTURE(overlapped, t);
      for (int32_t S : {1, 3}) {
        CAPTURE(S);
        REQUIRE((*mon)->init_kv_cache(S * blocks_per_seq, kBlock).has_value());
        REQUIRE((*moff)->init_kv_cache(S * blocks_per_seq, kBlock).has_value());
        std::vector<SamplingParams> params(static_cast<size_t>(S));
        for (int32_t s = 0; s < S; ++s) {
          params[size_t(s)].temperature = t;
          params[size_t(s)].seed = 40 + uint64_t(s);
        }
        // Runs kSteps steps (a prefill of 9 tokens, then decode) on backend b, model m.
        auto run = [&](Backend& b, Model& m, bool overlap, std::vector<std::vector<int32_t>>& ids,
                       std::vector<std::vector<float>>& lps) {
          ids.assign(size_t(S), std::vector<int32_t>{});
          lps.assign(size_t(S), std::vector<float>{});
          for (int32_t s = 0; s < S; ++s)
            for (int i = 0; i < 9; ++i) ids[size_t(s)].push_back((s * 131 + i * 17) % config.vocab_size);
          auto fwd = [&](const StepPlanView& v) { return m.forward(v); };
          std::vector<int32_t> out_ids[2];
          std::vector<float> out_lp[2];
          for (int32_t step = 0; step < kSteps; ++step) {
            BatchPlan plan;
            for (int32_t s = 0; s < S; ++s) {
              std::vector<int32_t> table(static_cast<size_t>(blocks_per_seq));
              std::iota(table.begin(), table.end(), s * blocks_per_seq);
              const auto& v = ids[size_t(s)];
              const int32_t n = step == 0 ? int32_t(v.size()) : 1;
              plan.add_sequence(v.data() + v.size() - size_t(n), n, int32_t(v.size()) - n, table.data(),
                                blocks_per_seq, kBlock, true);
            }
            plan.finalize();
            std::vector<uint64_t> steps(static_cast<size_t>(S), static_cast<uint64_t>(step));
            SampleBatch batch;
            batch.num_rows = S;
            batch.params = params.data();
            batch.steps = steps.data();
            const int slot = step % 2;
            out_ids[slot].assign(size_t(S), -1);
            out_lp[slot].assign(size_t(S), 0.f);
            SampleOutput o{out_ids[slot].data(), out_lp[slot].data()};
            auto take = [&](int sl) {
              for (int32_t s = 0; s < S; ++s) {
                ids[size_t(s)].back() = out_ids[sl][size_t(s)];
                lps[size_t(s)].push_back(out_lp[sl][size_t(s)]);
              }
            };
            if (!overlap) {
              REQUIRE(b.run_step_sampled(plan, fwd, batch, o).has_value());
              for (int32_t s = 0; s < S; ++s) ids[size_t(s)].push_back(-1);
              take(slot);
              continue;
            }
            std::vector<int32_t> prev_rows;
            if (step >= 1)
              for (int32_t s = 0; s < S; ++s) prev_rows.push_back(s);
            REQUIRE(b.launch_step_sampled(plan, fwd, batch, o, prev_rows).has_value());
            if (step >= 1) {
              REQUIRE(b.finish_step_sampled().has_value());
              // step - 1's samples replace the placeholders before step's (pushed below).
              for (int32_t s = 0; s < S; ++s) {
                auto& v = ids[size_t(s)];
                v[v.size() - 1] = out_ids[1 - slot][size_t(s)];
                lps[size_t(s)].push_back(out_lp[1 - slot][size_t(s)]);
              }
            }
            for (int32_t s = 0; s < S; ++s) ids[size_t(s)].push_back(-1);
            if (step == kSteps - 1) {
              REQUIRE(b.finish_step_sampled().has_value());
              take(slot);
            }
          }
        };
        std::vector<std::vector<int32_t>> ids_on, ids_off;
        std::vector<std::vector<float>> lp_on, lp_off;
        const int64_t screened_before = cuda_screened_steps(*on);
        const int64_t rescored_before = cuda_screen_rescored_ids(*on).value();
        run(*on, **mon, overlapped, ids_on, lp_on);
        run(*off, **moff, false, ids_off, lp_off);
        CHECK(cuda_screened_steps(*off) == 0);
        CHECK(cuda_screen_rescored_ids(*off).value() == 0);
        // Every decode step of one sequence ran screened (the prefill is not graphed), each rescoring
        // far fewer than all ids (none where one id survives the bounds).
        const int64_t screened = cuda_screened_steps(*on) - screened_before;
        const int64_t rescored = cuda_screen_rescored_ids(*on).value() - rescored_before;
        CHECK(screened == (S == 1 ? kSteps - 1 : 0));
        CHECK(rescored <= screened * 64);
        for (int32_t s = 0; s < S; ++s) {
          CAPTURE(s);
          CHECK(ids_on[size_t(s)] == ids_off[size_t(s)]);
          REQUIRE(lp_on[size_t(s)].size() == lp_off[size_t(s)].size());
          float worst = 0.f;
          for (size_t i = 0; i < lp_on[size_t(s)].size(); ++i)
            worst = std::max(worst, std::abs(lp_on[size_t(s)][i] - lp_off[size_t(s)][i]));
          CHECK(worst < 2e-3f);
        }
      }
    }
}

}  // namespace photon::test
