// CPU backend op costs at Llama-3-8B-like shapes (one layer's matmuls,
// attention, the sampler over a 128256-token vocabulary).
// Usage: photon_cpu_ops_bench [--benchmark_filter=...]; the thread count is
// the last argument of each benchmark (workers besides the caller).
// Bandwidth model: a decode matmul must read its N*K weights once
// (bytes_per_second counts those); FLOP/s counts 2*M*N*K.
#include <benchmark/benchmark.h>

#include <cmath>
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "core/batch_plan.hpp"
#include "core/cpu_backend.hpp"
#include "core/dtype.hpp"
#include "core/quantize.hpp"

using namespace photon;

namespace {

std::unique_ptr<Backend> backend(int64_t threads) {
  auto b = make_cpu_backend(CpuBackendOptions{.num_threads = int32_t(threads)});
  if (!b.has_value()) std::fprintf(stderr, "%s\n", b.error().message.c_str());
  return std::move(*b);
}

std::vector<float> randoms(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// args: M, N, K, threads; weights bf16.
void BM_matmul_bf16(benchmark::State& state) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  auto be = backend(state.range(3));
  std::vector<uint16_t> w(size_t(N * K));
  const auto wf = randoms(w.size(), 1);
  for (size_t i = 0; i < w.size(); ++i) w[i] = f32_to_bf16(wf[i]);
  auto x = randoms(size_t(M * K), 2);
  std::vector<float> out(size_t(M * N));
  const Weight W{Tensor::of(w.data(), DType::bf16, {N, K}), {}, 0};
  for (auto _ : state) {
    auto r = be->matmul(Tensor::of(out.data(), DType::f32, {M, N}), Tensor::of(x.data(), DType::f32, {M, K}), W);
    if (!r.has_value()) state.SkipWithError(r.error().message.c_str());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * N * K * 2);
  state.counters["GFLOP/s"] =
      benchmark::Counter(double(state.iterations()) * 2.0 * double(M * N * K) * 1e-9, benchmark::Counter::kIsRate);
}
// decode: qkv (4096 -> 6144), down (14336 -> 4096); prefill chunk of 64 tokens.
BENCHMARK(BM_matmul_bf16)
    ->ArgNames({"M", "N", "K", "threads"})
    ->Args({1, 6144, 4096, 0})
    ->Args({1, 6144, 4096, 1})
    ->Args({1, 4096, 14336, 1})
    ->Args({8, 6144, 4096, 1})
    ->Args({64, 6144, 4096, 0})
    ->Args({64, 6144, 4096, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// args: M, N, K, threads; weights group-wise int8 (groups of 128 along K,
// core/quantize.hpp), the layout EngineOptions::weights = "int8" loads.
// Bytes counted: the i8 codes plus the f32 scales.
void BM_matmul_int8(benchmark::State& state) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2), group = 128;
  const int64_t groups = int8_group_count(K, group);
  auto be = backend(state.range(3));
  const auto wf = randoms(size_t(N * K), 1);
  std::vector<int8_t> q(wf.size());
  std::vector<float> scales(size_t(N * groups));
  for (int64_t n = 0; n < N; ++n)
    quantize_row_int8(wf.data() + n * K, K, group, q.data() + n * K, scales.data() + n * groups);
  auto x = randoms(size_t(M * K), 2);
  std::vector<float> out(size_t(M * N));
  const Weight W{Tensor::of(q.data(), DType::i8, {N, K}), Tensor::of(scales.data(), DType::f32, {N, groups}),
                 int32_t(group)};
  for (auto _ : state) {
    auto r = be->matmul(Tensor::of(out.data(), DType::f32, {M, N}), Tensor::of(x.data(), DType::f32, {M, K}), W);
    if (!r.has_value()) state.SkipWithError(r.error().message.c_str());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * (N * K + N * groups * 4));
  state.counters["GFLOP/s"] =
      benchmark::Counter(double(state.iterations()) * 2.0 * double(M * N * K) * 1e-9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_matmul_int8)
    ->ArgNames({"M", "N", "K", "threads"})
    ->Args({1, 6144, 4096, 0})
    ->Args({1, 4096, 14336, 1})
    ->Args({64, 6144, 4096, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// args: sequences (one decode token each), context length, threads.
// nq 32, nkv 8, hd 128, block size 16, blocks scattered.
void BM_attention_decode(benchmark::State& state) {
  const int32_t S = int32_t(state.range(0)), ctx = int32_t(state.range(1));
  const int64_t nq = 32, nkv = 8, hd = 128, bs = 16;
  auto be = backend(state.range(2));
  const int32_t blocks_per_seq = (ctx + int32_t(bs) - 1) / int32_t(bs);
  const int64_t num_blocks = int64_t(S) * blocks_per_seq;
  std::vector<int32_t> perm(static_cast<size_t>(num_blocks));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(3));
  BatchPlan plan;
  for (int32_t s = 0; s < S; ++s) {
    const int32_t id = 1;
    plan.add_sequence(&id, 1, ctx - 1, perm.data() + s * blocks_per_seq, blocks_per_seq, int32_t(bs), true);
  }
  plan.finalize();
  auto view = be->stage_plan(plan);
  auto k = randoms(size_t(num_blocks * bs * nkv * hd), 4), v = randoms(k.size(), 5);
  auto q = randoms(size_t(S * nq * hd), 6);
  std::vector<float> out(q.size());
  const KvLayer cache{Tensor::of(k.data(), DType::f32, {num_blocks, bs, nkv, hd}),
                      Tensor::of(v.data(), DType::f32, {num_blocks, bs, nkv, hd})};
  for (auto _ : state) {
    auto r = be->attention(Tensor::of(out.data(), DType::f32, {S, nq, hd}),
                           Tensor::of(q.data(), DType::f32, {S, nq, hd}), cache, *view, 1.0f / std::sqrt(float(hd)));
    if (!r.has_value()) state.SkipWithError(r.error().message.c_str());
    benchmark::DoNotOptimize(out.data());
  }
  // K and V of every query head's kv head are read once per query head group member.
  state.SetBytesProcessed(int64_t(state.iterations()) * S * ctx * nq * hd * 2 * 4);
}
BENCHMARK(BM_attention_decode)
    ->ArgNames({"seqs", "ctx", "threads"})
    ->Args({8, 1024, 0})
    ->Args({8, 1024, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// args: rows, threads, top-p in percent; V = 128256, temperature 0.8, 5 logprobs. top-p 95: the
// draw along the sorted order pi; 100: no rule cuts, the Gumbel-max draw (docs/sampling.md, section 5).
void BM_sample(benchmark::State& state) {
  const int32_t R = int32_t(state.range(0));
  const float top_p = float(state.range(2)) / 100.0f;
  const int64_t V = 128256;
  auto be = backend(state.range(1));
  std::vector<float> logits(size_t(R * V));
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 3.0f);
  for (float& x : logits) x = d(rng);
  std::vector<SamplingParams> params(static_cast<size_t>(R));
  for (auto& p : params) {
    p.temperature = 0.8f;
    p.top_p = top_p;
    p.num_logprobs = 5;
  }
  std::vector<uint64_t> steps(size_t(R), 0);
  std::vector<int32_t> ids(static_cast<size_t>(R)), top_ids(size_t(R * 5));
  std::vector<float> lps(static_cast<size_t>(R)), top_lps(size_t(R * 5));
  SampleBatch b;
  b.num_rows = R;
  b.params = params.data();
  b.steps = steps.data();
  b.max_logprobs = 5;
  const SampleOutput out{ids.data(), lps.data(), top_ids.data(), top_lps.data()};
  for (auto _ : state) {
    auto r = be->sample(Tensor::of(logits.data(), DType::f32, {R, V}), b, out);
    if (!r.has_value()) state.SkipWithError(r.error().message.c_str());
    for (auto& s : steps) ++s;
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * R);
}
BENCHMARK(BM_sample)
    ->ArgNames({"rows", "threads", "top_p_pct"})
    ->Args({8, 0, 95})
    ->Args({8, 1, 95})
    ->Args({8, 0, 100})
    ->Args({8, 1, 100})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
