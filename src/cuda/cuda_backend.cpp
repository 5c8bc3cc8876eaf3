// CudaBackend: the Backend contract on one NVIDIA GPU. Device memory comes
// from a caching allocator, the plan is staged once per step, every op is a
// kernel launch (or a cuBLASLt call) on one stream, and decode-only steps
// replay per-bucket CUDA graphs (run_step).
#include "cuda/cuda_backend.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/quantize.hpp"
#include "core/try.hpp"
#include "cuda/cuda_status.hpp"
#include "cuda/decode_attention.cuh"
#include "cuda/decode_layers.cuh"
#include "cuda/device_allocator.hpp"
#include "cuda/dispatch_policy.hpp"
#include "cuda/embedding.cuh"
#include "cuda/gather_rows.cuh"
#include "cuda/gemm.hpp"
#include "cuda/gemv.cuh"
#include "cuda/gemv_int8.cuh"
#include "cuda/gemv_int8_skinny.cuh"
#include "cuda/gemv_mma.cuh"
#include "cuda/gemv_skinny.cuh"
#include "cuda/kernel_preload.hpp"
#include "cuda/op_checks.hpp"
#include "cuda/plan_staging.hpp"
#include "cuda/prefill_attention.cuh"
#include "cuda/rmsnorm.cuh"
#include "cuda/rope_qkv.cuh"
#include "cuda/sampler.hpp"
#include "cuda/step_trace.hpp"
#include "cuda/silu_mul.cuh"

namespace photon {
namespace {

using cuda::Status;
using bf16_t = __nv_bfloat16;
// op_checks.hpp, dispatch_policy.hpp
using cuda::expect;
using cuda::expect_norm_weight;
using cuda::mismatch;
using cuda::shape_string;
using cuda::bucket_for;
using cuda::int8_skinny_enabled;
using cuda::int8_skinny_silu;
using cuda::is_decode;
using cuda::kClusterMergeMaxKeys;
using cuda::kGemvEarlyMinDim;
using cuda::kGemvEarlyWideN;
using cuda::kRopeInAttentionMinQueryWidth;
using cuda::one_row_skinny;
using cuda::one_row_skinny_max_nk;
using cuda::OneRowSkinny;
using cuda::override_from_env;
using cuda::skinny_max_n;
using cuda::skinny_silu_enabled;
using cuda::swiglu_gemv_min_k;

bf16_t* bf(const Tensor& t) { return static_cast<bf16_t*>(t.data); }

class CudaBackend final : public Backend {
 public:
  CudaBackend(const CudaBackendOptions& options, const cudaDeviceProp& prop, cudaStream_t stream)
      : options_(options), num_sms_(prop.multiProcessorCount), compute_major_(prop.major), stream_(stream),
        staging_(alloc_, stream), device_name_(prop.name) {}

  ~CudaBackend() override {
    cudaSetDevice(options_.device);
    cudaStreamSynchronize(stream_);
    for (cudaEvent_t e : done_events_)
      if (e != nullptr) cudaEventDestroy(e);
    for (auto& [key, g] : graphs_) cudaGraphExecDestroy(g.exec);
    graphs_.clear();
    sampler_.reset();
    gemm_.reset();
    gemm_workspace_ = Buffer();
    int8_workspace_ = Buffer();
    attention_workspace_ = Buffer();
    attention_arrivals_ = Buffer();
    persistent_partials_ = Buffer();
    persistent_sync_ = Buffer();
    cudaStreamDestroy(stream_);
  }

  Status init() {
    if (options_.preload_kernels) PHOTON_TRY(cuda::preload_kernel_modules());
    if (options_.plan_copy_stream) PHOTON_TRY(staging_.enable_copy_stream());
    PHOTON_ASSIGN_OR_RETURN(gemm_workspace_, allocate(options_.gemm_workspace_bytes));
    PHOTON_ASSIGN_OR_RETURN(gemm_, cuda::Gemm::create(gemm_workspace_.data(), gemm_workspace_.size()));
    PHOTON_ASSIGN_OR_RETURN(sampler_, cuda::Sampler::create(*this, compute_major_, num_sms_, stream_));
    // The step trace (a diagnostic of builds with PHOTON_CUDA_STEP_TRACE; step_trace.hpp): every
    // sampled graph step appends its kernels' timeline to the named file.
    if (const char* path = std::getenv("PHOTON_CUDA_STEP_TRACE"); path != nullptr && path[0] != '\0') {
      PHOTON_ASSIGN_OR_RETURN(step_trace_, cuda::StepTrace::open(path));
    }
    PHOTON_CUDA_TRY(cudaStreamSynchronize(stream_));
    return {};
  }

  std::string_view name() const noexcept override { return "cuda"; }
  DType activation_dtype() const noexcept override { return DType::bf16; }
  DType kv_dtype() const noexcept override { return DType::bf16; }
  bool supports_int8_weights() const noexcept override { return true; }
  DType weight_dtype(DType stored) const noexcept override {
    return stored == DType::i8 || stored == DType::i32 ? stored : DType::bf16;
  }

  // ---- memory ---------------------------------------------------------------
  // The attention kernels (decode, prefill) serve head_dim 16, 32, 64, 128 and 256.
  Result<void> check_head_dim(int32_t head_dim) const override {
    if (cuda::attention_serves_head_dim(head_dim)) return {};
    return fail(Errc::unsupported, "the CUDA backend's attention serves head_dim 16, 32, 64, 128 or 256; this model's "
                                   "is " + std::to_string(head_dim) + " (the CPU backend serves it)");
  }

  Result<Buffer> allocate(size_t bytes) override {
    PHOTON_CUDA_TRY(cudaSetDevice(options_.device));
    PHOTON_ASSIGN_OR_RETURN(void* p, alloc_.allocate(bytes));
    if (options_.log_allocations) std::fprintf(stderr, "photon cuda: allocated %zu at %p\n", bytes, p);
    return Buffer(this, p, bytes);
  }
  Result<void> copy_to_device(void* dst, const void* host_src, size_t bytes) override {
    if (bytes == 0) return {};
    if (dst == nullptr || host_src == nullptr) return fail(Errc::invalid_argument, "cuda copy_to_device: null pointer");
    PHOTON_CUDA_TRY(cudaSetDevice(options_.device));
    PHOTON_CUDA_TRY(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
    PHOTON_CUDA_TRY(cudaStreamSynchronize(stream_));  // host_src may be freed once we return
    return {};
  }
  Result<void> copy_to_host(void* host_dst, const void* src, size_t bytes) override {
    if (bytes == 0) return {};
    if (host_dst == nullptr || src == nullptr) return fail(Errc::invalid_argument, "cuda copy_to_host: null pointer");
    PHOTON_CUDA_TRY(cudaSetDevice(options_.device));
    PHOTON_CUDA_TRY(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    PHOTON_CUDA_TRY(cudaStreamSynchronize(stream_));
    return {};
  }
  Result<void> fill_zero(Tensor t) override {
    if (t.numel() == 0) return {};
    if (t.data == nullptr) return fail(Errc::invalid_argument, "cuda fill_zero: tensor has no data");
    PHOTON_CUDA_TRY(cudaMemsetAsync(t.data, 0, t.nbytes(), stream_));
    return {};
  }
  Result<void> synchronize() override {
    PHOTON_CUDA_TRY(cudaStreamSynchronize(stream_));
    return {};
  }
  size_t free_memory() const noexcept override {
    size_t free_b = 0, total_b = 0;
    if (cudaSetDevice(options_.device) != cudaSuccess || cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return free_b + alloc_.bytes_cached();
  }
  MemoryStats memory_stats() const noexcept override {
    return MemoryStats{alloc_.bytes_in_use(), alloc_.peak_bytes_in_use(), alloc_.bytes_cached()};
  }

  Result<StepPlanView> stage_plan(const BatchPlan& plan) override {
    PHOTON_CUDA_TRY(cudaSetDevice(options_.device));
    return staging_.stage(plan);
  }

  Result<Tensor> run_step(const BatchPlan& plan, const StepForward& forward) override;
  Result<void> run_step_sampled(const BatchPlan& plan, const StepForward& forward, const SampleBatch& batch,
                                const SampleOutput& out) override;
  Result<void> launch_step_sampled(const BatchPlan& plan, const StepForward& forward, const SampleBatch& batch,
                                   const SampleOutput& out, std::span<const int32_t> prev_rows) override;
  Result<void> finish_step_sampled() override;
  bool overlaps_steps() const noexcept override { return true; }
  bool launch_returns_early(const BatchPlan& plan, const SampleBatch& batch) const override {
    return sampled_graph_key(plan, batch, batch.num_rows > 0).has_value();
  }

  // ---- ops ------------------------------------------------------------------
  Result<void> embed(Tensor out, const Weight& table, const StepPlanView& plan) override {
    const char* op = "embed";
    PHOTON_TRY(expect(op, "out", out, DType::bf16));
    PHOTON_TRY(expect(op, "table", table.w, DType::bf16));
    if (table.w.rank != 2) return mismatch(op, "table must be [V, H], got " + shape_string(table.w));
    const int64_t V = table.w.dim(0), H = table.w.dim(1), T = plan.num_tokens;
    if (out.numel() != T * H) return mismatch(op, "out must be [T = " + std::to_string(T) + ", H = " + std::to_string(H) + "], got " + shape_string(out));
    PHOTON_TRY(current(op, plan));
    const auto& info = staging_.info();
    if (T > 0 && (info.min_input_id < 0 || info.max_input_id >= V))
      return fail(Errc::out_of_range, "cuda embed: token id " +
                                          std::to_string(info.min_input_id < 0 ? info.min_input_id : info.max_input_id) +
                                          " outside the embedding table's " + std::to_string(V) + " rows");
    embed_rows_ = V;
    return cuda::launch_embedding({bf(out), bf(table.w), plan.input_ids, int32_t(T), int32_t(H), int32_t(V)}, stream_);
  }

  Result<void> rmsnorm(Tensor out, Tensor x, Tensor w, float eps) override {
    const char* op = "rmsnorm";
    PHOTON_TRY(expect(op, "x", x, DType::bf16));
    PHOTON_TRY(expect(op, "out", out, DType::bf16));
    if (w.numel() <= 0 || x.numel() % w.numel() != 0 || out.numel() != x.numel())
      return mismatch(op, "x " + shape_string(x) + " and out " + shape_string(out) + " must be rows of w " + shape_string(w));
    PHOTON_TRY(expect_norm_weight(op, "w", w, w.numel()));
    cuda::RmsNormArgs a;
    a.out = bf(out);
    a.x = bf(x);
    a.weight = w.data;
    a.weight_f32 = w.dtype == DType::f32;
    a.rows = int32_t(x.numel() / w.numel());
    a.hidden = int32_t(w.numel());
    a.eps = eps;
    return cuda::launch_rmsnorm(a, stream_);
  }

  Result<void> matmul(Tensor out, Tensor x, const Weight& W) override { return product("matmul", out, x, W, false); }

  // residual += x @ W^T in the product's epilogue: the GEMV's add mode (one row), cuBLASLt with
  // beta = 1 (more rows, bf16 or dequantized int8 weights), the int8 GEMV's accumulate. The scratch
  // is never written.
  Result<void> matmul_add(Tensor residual, Tensor x, const Weight& W, Tensor scratch) override {
    const char* op = "matmul_add";
    PHOTON_TRY(expect(op, "residual", residual, DType::bf16));
    if (scratch.numel() != residual.numel())
      return mismatch(op, "scratch " + shape_string(scratch) + " must hold the product like residual " +
                              shape_string(residual));
    if (residual.numel() > 0 && (overlaps(residual, x) || overlaps(residual, scratch)))
      return fail(Errc::invalid_argument, "cuda matmul_add: residual overlaps x or scratch");
    return product(op, residual, x, W, true);
  }

  // out = silu(x @ Wg^T) * (x @ Wu^T): the one-row GEMV's SwiGLU mode (no [M, 2I] round trip, no
  // silu_mul kernel) for K >= kSwiGluGemvMinK, gemv_skinny's for 1..16 rows with I <= 8192;
  // otherwise the product into scratch (the GEMV, cuBLASLt, the int8 paths), then silu_mul.
  Result<void> matmul_silu(Tensor out, Tensor x, const Weight& W, Tensor scratch) override {
    const char* op = "matmul_silu";
    PHOTON_TRY(expect(op, "out", out, DType::bf16));
    if (W.w.rank != 2 || W.w.dim(0) % 2 != 0)
      return mismatch(op, "W must be [2I, K] (gate rows, then up rows), got " + shape_string(W.w));
    // scratch is the [M, 2I] product's place: the shapes of the unfused product.
    PHOTON_ASSIGN_OR_RETURN(const ProductShape ps, product_shape(op, scratch, x, W.w));
    const int64_t M = ps.M, I = ps.N / 2, K = ps.K;
    if (out.numel() != M * I)
      return mismatch(op, "out " + shape_string(out) + " must be [M = " + std::to_string(M) + ", I = " + std::to_string(I) + "]");
    if (out.numel() > 0 && (overlaps(out, x) || overlaps(out, scratch)))
      return fail(Errc::invalid_argument, "cuda matmul_silu: out overlaps x or scratch");
    if (M == 0) return {};
    if (W.w.dtype == DType::bf16 && M <= cuda::kGemvMaxRows && K >= swiglu_gemv_min_k() && I < (int64_t(1) << 30)) {
      cuda::GemvArgs g{out.data, bf(x), bf(W.w), int32_t(M), int32_t(I), int32_t(K), false, cuda::GemvMode::silu};
      set_gemv_policy(g);
      if (cuda::gemv_applies(g)) return cuda::launch_gemv(g, stream_);
    }
    // Decode batches: gemv_skinny's SwiGLU mode while I is within the skinny bound (Qwen3-8B's
    // I = 12288 measured slower than cuBLASLt + silu_mul at 16 rows: 4.96 against 4.82 ms/step).
    if (W.w.dtype == DType::bf16 && options_.skinny_decode_matmul && skinny_silu_enabled() && I <= skinny_max_n() &&
        (M >= 2 || one_row_skinny() != OneRowSkinny::none)) {
      cuda::GemvArgs g{out.data, bf(x), bf(W.w), int32_t(M), int32_t(I), int32_t(K), false, cuda::GemvMode::silu};
      if (cuda::gemv_skinny_applies(g)) return cuda::launch_gemv_skinny(g, num_sms_, stream_);
    }
    // int8 decode batches: gemv_int8_skinny's SwiGLU mode (the [M, 2I] product and silu_mul gone).
    if (W.w.dtype == DType::i8 && options_.skinny_decode_matmul && int8_skinny_enabled() && int8_skinny_silu() &&
        (M >= 2 || options_.int8_skinny_one_row >= 2) && I <= skinny_max_n() && W.w.data != nullptr &&
        W.scales.dtype == DType::f32 && W.scales.data != nullptr && W.group_size > 0 && W.scales.rank == 2 &&
        W.scales.dim(0) == 2 * I && W.scales.dim(1) == int8_group_count(K, W.group_size) &&
        K < (int64_t(1) << 31)) {
      cuda::GemvInt8Args g{out.data, bf(x), W.w.as<const int8_t>(), W.scales.as<const float>(), int32_t(M),
                           int32_t(I), int32_t(K), W.group_size, false, false, true};
      if (cuda::gemv_int8_skinny_applies(g)) return cuda::launch_gemv_int8_skinny(g, num_sms_, stream_);
    }
    PHOTON_TRY(product(op, scratch, x, W, false));
    return silu_mul(out, scratch.view({M, 2 * I}));
  }

  int32_t lm_head_screen_group(int64_t vocab, int64_t hidden) const noexcept override {
    const bool on = options_.lm_head_screen && options_.sample_in_graph && options_.int8_one_row_gemv &&
                    options_.gemv_norm;
    return on && hidden % 1024 == 0 && hidden * 2 <= cuda::kScreenMaxStagedBytes &&
                   cuda::sample_screened_shape(vocab, hidden, num_sms_)
               ? kScreenGroup
               : 0;
  }

  // Inside the recording of a sampled one-row graph (screen_armed_), the screen's product with
  // its bounds (GemvArgs::bound) when W is a bf16 head and `screen` its int8 copy; the sampler
  // then draws through them (screen_used_). Otherwise, or where the GEMV cannot serve it, W's.
  Result<void> rmsnorm_lm_head(Tensor logits, Tensor x, Tensor norm_w, float eps, const Weight& W,
                               const LmHeadScreen& screen, Tensor h) override {
    const Weight& q = screen.q;
    if (screen_armed_ && q.w.data != nullptr && W.w.dtype == DType::bf16 && W.w.rank == 2 && q.w.rank == 2 &&
        q.w.dim(0) == W.w.dim(0) && q.w.dim(1) == W.w.dim(1) && screen.row_abs.dtype == DType::f32 &&
        screen.row_abs.numel() == W.w.dim(0) && logits.dtype == DType::f32 &&
        cuda::sample_screened_shape(W.w.dim(0), W.w.dim(1), num_sms_)) {
      if (std::optional<cuda::GemvArgs> g = norm_gemv(logits, x, norm_w, eps, q, h, Tensor{}, false)) {
        const int64_t V = W.w.dim(0);
        if (screen_bound_.size() < size_t(V) * sizeof(float)) {
          screen_bound_ = Buffer();
          PHOTON_ASSIGN_OR_RETURN(screen_bound_, allocate(size_t(V) * sizeof(float)));
        }
        g->passes_grid = 4 * num_sms_;
        g->bound = static_cast<float*>(screen_bound_.data());
        g->row_abs = screen.row_abs.as<const float>();
        if (cuda::gemv_applies(*g)) {
          PHOTON_TRY(cuda::launch_gemv(*g, stream_));
          screen_used_ = cuda::ScreenArgs{g->bound, x.data, norm_w.data, eps, W.w.data, g->K,
                                          static_cast<unsigned long long*>(screen_rescored_.data()),
                                          std::clamp(options_.screen_prefetch_rows, 0, cuda::kScreenKeep)};
          return {};
        }
      }
    }
    return rmsnorm_matmul(logits, x, norm_w, eps, W, h);
  }

  // rmsnorm then the product; one-row products the GEMV serves norm x inside it instead
  // (GemvArgs::norm_w, options_.gemv_norm): no norm kernel, h left untouched.
  Result<void> rmsnorm_matmul(Tensor out, Tensor x, Tensor norm_w, float eps, const Weight& W, Tensor h) override {
    if (const std::optional<cuda::GemvArgs> g = norm_gemv(out, x, norm_w, eps, W, h, Tensor{}, false))
      return cuda::launch_gemv(*g, stream_);
    return Backend::rmsnorm_matmul(out, x, norm_w, eps, W, h);
  }
  Result<void> rmsnorm_matmul_silu(Tensor out, Tensor x, Tensor norm_w, float eps, const Weight& W, Tensor h,
                                   Tensor scratch) override {
    if (const std::optional<cuda::GemvArgs> g = norm_gemv(out, x, norm_w, eps, W, h, scratch, true))
      return cuda::launch_gemv(*g, stream_);
    return Backend::rmsnorm_matmul_silu(out, x, norm_w, eps, W, h, scratch);
  }

  // One-token decode steps of models without q/k norms (options_.gemv_rope) that do not rotate
  // inside decode attention (options_.rope_in_decode_attention: measured there at the 8B shapes),
  // when the qkv product runs on the GEMV with the norm inside: the GEMV does rope_qkv's work in its
  // epilogue (GemvArgs::rope; no rope_qkv kernel, h and qkv untouched, the roped q in q), then
  // attention. Everything else (and any inconsistent input, which the ops then report) runs the
  // default.
  Result<void> rmsnorm_qkv_attention(Tensor out, Tensor x, Tensor norm_w, const Weight& W, Tensor h, Tensor qkv,
                                     Tensor q, const StepPlanView& plan, Tensor inv_freq, Tensor q_norm,
                                     Tensor k_norm, float eps, KvLayer cache, float scale) override {
    if (options_.gemv_rope && plan.num_tokens == 1 && is_decode(plan) && q_norm.empty() && k_norm.empty() &&
        qkv.dtype == DType::bf16 && !rope_in_attention(plan, q)) {
      if (std::optional<cuda::GemvArgs> g = norm_gemv(qkv, x, norm_w, eps, W, h, Tensor{}, false)) {
        PHOTON_ASSIGN_OR_RETURN(const cuda::RopeQkvArgs r,
                                rope_args("rmsnorm_qkv_attention", q, qkv, plan, inv_freq, q_norm, k_norm, eps, cache));
        g->rope = {r.q_out,       r.k_cache,      r.v_cache,  r.positions, r.slot_mapping, r.inv_freq,
                   r.num_q_heads, r.num_kv_heads, r.head_dim, r.num_slots, r.block_size,   r.kv_block_stride};
        if (!overlaps(q, x) && cuda::gemv_applies(*g)) {
          PHOTON_TRY(cuda::launch_gemv(*g, stream_));
          return attention(out, q, cache, plan, scale);
        }
      }
    }
    return Backend::rmsnorm_qkv_attention(out, x, norm_w, W, h, qkv, q, plan, inv_freq, q_norm, k_norm, eps, cache,
                                          scale);
  }

  // Single-sequence decode steps: every layer in the persistent kernel (decode_layers.cuh) when the
  // weights and shapes are ones it serves; anything else (and any inconsistent input, which the ops
  // then report) runs the per-op sequence of the Backend default.
  Result<void> decoder_layers(Tensor x, std::span<const DecoderLayerWeights> layers, std::span<const KvLayer> caches,
                              const DecoderScratch& s, const StepPlanView& plan,
                              const DecoderLayersParams& p) override {
    if (!options_.persistent_decode || plan.num_tokens != 1 || plan.num_seqs != 1)
      return Backend::decoder_layers(x, layers, caches, s, plan, p);
    PHOTON_ASSIGN_OR_RETURN(const bool launched, persistent_decode(x, layers, caches, s, plan, p));
    if (launched) return {};
    return Backend::decoder_layers(x, layers, caches, s, plan, p);
  }

  Result<void> rope_qkv(Tensor q_out, Tensor qkv, const StepPlanView& plan, Tensor inv_freq, Tensor q_norm,
                        Tensor k_norm, float eps, KvLayer cache) override {
    PHOTON_ASSIGN_OR_RETURN(const cuda::RopeQkvArgs a, rope_args("rope_qkv", q_out, qkv, plan, inv_freq, q_norm, k_norm, eps, cache));
    if (a.num_tokens == 0) return {};
    return cuda::launch_rope_qkv(a, stream_);
  }

  // A KV cache layer's shape (cache_shape checks it); stride: rows between consecutive blocks.
  struct CacheShape {
    int64_t num_blocks, bs, nkv, hd, stride;
  };

  // rope_qkv's checks and launch arguments (num_tokens 0: nothing to do).
  Result<cuda::RopeQkvArgs> rope_args(const char* op, Tensor q_out, Tensor qkv, const StepPlanView& plan,
                                      Tensor inv_freq, Tensor q_norm, Tensor k_norm, float eps, KvLayer cache) {
    PHOTON_ASSIGN_OR_RETURN(const CacheShape cs, cache_shape(op, cache));
    PHOTON_TRY(expect(op, "q_out", q_out, DType::bf16));
    PHOTON_TRY(expect(op, "qkv", qkv, DType::bf16));
    PHOTON_TRY(expect(op, "inv_freq", inv_freq, DType::f32));
    const int64_t T = plan.num_tokens, hd = cs.hd;
    if (inv_freq.numel() != hd / 2) return mismatch(op, "inv_freq must have hd / 2 = " + std::to_string(hd / 2) + " elements");
    cuda::RopeQkvArgs a;
    if (T == 0) return a;
    if (q_out.numel() % (T * hd) != 0) return mismatch(op, "q_out " + shape_string(q_out) + " is not [T, nq, hd]");
    const int64_t nq = q_out.numel() / (T * hd);
    if (nq == 0 || nq % cs.nkv != 0) return mismatch(op, std::to_string(nq) + " query heads are not a multiple of " + std::to_string(cs.nkv) + " KV heads");
    if (qkv.numel() != T * (nq + 2 * cs.nkv) * hd)
      return mismatch(op, "qkv " + shape_string(qkv) + " must be [T, (nq + 2 nkv) * hd] = [" + std::to_string(T) + ", " +
                              std::to_string((nq + 2 * cs.nkv) * hd) + "]");
    const bool has_q = !q_norm.empty(), has_k = !k_norm.empty();
    if (has_q) PHOTON_TRY(expect_norm_weight(op, "q_norm", q_norm, hd));
    if (has_k) PHOTON_TRY(expect_norm_weight(op, "k_norm", k_norm, hd));
    if (has_q && has_k && q_norm.dtype != k_norm.dtype) return mismatch(op, "q_norm and k_norm must share a dtype");
    PHOTON_TRY(current(op, plan));
    PHOTON_TRY(staging_.check_cache(int32_t(cs.bs), cs.num_blocks));
    a.q_out = bf(q_out);
    a.qkv = bf(qkv);
    a.k_cache = bf(cache.k);
    a.v_cache = bf(cache.v);
    a.positions = plan.positions;
    a.slot_mapping = plan.slot_mapping;
    a.inv_freq = inv_freq.as<const float>();
    a.q_norm = has_q ? q_norm.data : nullptr;
    a.k_norm = has_k ? k_norm.data : nullptr;
    a.norm_f32 = (has_q ? q_norm.dtype : k_norm.dtype) == DType::f32;
    a.num_tokens = int32_t(T);
    a.num_q_heads = int32_t(nq);
    a.num_kv_heads = int32_t(cs.nkv);
    a.head_dim = int32_t(hd);
    a.num_slots = cs.num_blocks * cs.bs;
    a.block_size = int32_t(cs.bs);
    a.kv_block_stride = int32_t(cs.stride);
    a.eps = eps;
    return a;
  }

  // The single-pass kernel only where it serves the launch (its kernel file owns the conditions: the
  // group, the block table's span, alignment, RoPE inside); otherwise the split kernel.
  static void keep_single_pass_if_served(cuda::DecodeAttentionArgs& a) {
    if (a.single_pass_heads > 0 && !cuda::decode_attention_single_pass_applies(a)) a.single_pass_heads = 0;
  }

  // The fields the decode and prefill attention arguments share: out / q [T, nq, hd] over the paged
  // `cache` of shape cs, the plan's block tables and context lengths.
  template <class Args>
  static void set_paged_attention(Args& a, Tensor out, Tensor q, KvLayer cache, const StepPlanView& plan,
                                  const CacheShape& cs, int64_t nq) {
    a.out = bf(out);
    a.q = bf(q);
    a.k_cache = bf(cache.k);
    a.v_cache = bf(cache.v);
    a.block_tables = plan.block_tables;
    a.context_lens = plan.context_lens;
    a.num_seqs = plan.num_seqs;
    a.num_q_heads = int32_t(nq);
    a.num_kv_heads = int32_t(cs.nkv);
    a.head_dim = int32_t(cs.hd);
    a.block_size = int32_t(cs.bs);
    a.kv_block_stride = int32_t(cs.stride);
    a.max_blocks_per_seq = plan.max_blocks_per_seq;
  }

  // The decode kernel's arguments for out / q [S, nq, hd] over `cache` (one query per sequence, row
  // s is sequence s), its split workspace grown when needed.
  Result<cuda::DecodeAttentionArgs> decode_attention_args(Tensor out, Tensor q, KvLayer cache, const StepPlanView& plan,
                                                          float scale, const CacheShape& cs, int64_t nq) {
    const int64_t S = plan.num_seqs;
    cuda::DecodeAttentionArgs a;
    set_paged_attention(a, out, q, cache, plan, cs, nq);
    // Clusters hold at most 8 splits; past 2048 keys (the longest context the staged block-table
    // width allows; graphs are keyed by it) 16 splits merged through the workspace measured faster.
    // A cluster's blocks share one GPC, so clusters are used only while their grid fits in one
    // block per SM: 4 sequences in clusters of 8 (256 blocks) measured 1.188 ms/step, and
    // 1.097-1.108 with this rule (docs/performance.md, "Session 4 runs").
    a.cluster_merge = options_.decode_attention_clusters && compute_major_ >= 9 &&
                      int64_t(plan.max_blocks_per_seq) * cs.bs <= kClusterMergeMaxKeys &&
                      cuda::decode_attention_cluster_blocks(a.num_seqs, a.num_q_heads, a.num_kv_heads, num_sms_) <=
                          num_sms_;
    a.num_splits =
        cuda::decode_attention_splits(a.num_seqs, a.num_q_heads, a.num_kv_heads, num_sms_, a.cluster_merge);
    a.num_sms = num_sms_;
    a.scale = scale;
    // Batches of up to attention_single_pass_max_seqs: the single-pass kernel while the staged block
    // table keeps contexts within its bound (also with RoPE inside: rope_attention then sets qkv).
    const int32_t one = options_.attention_single_pass_heads >= 0
                            ? options_.attention_single_pass_heads
                            : cuda::decode_attention_single_pass_heads(int32_t(S), int32_t(nq), int32_t(cs.nkv), num_sms_);
    if (one > 0 && S <= options_.attention_single_pass_max_seqs) a.single_pass_heads = one;
    keep_single_pass_if_served(a);
    const cuda::DecodeWorkspace ws =
        a.cluster_merge ? cuda::DecodeWorkspace{}
                        : cuda::decode_attention_workspace(a.num_seqs, a.num_q_heads, a.num_kv_heads, a.head_dim,
                                                           a.num_splits);
    if (ws.partial_bytes() > 0) {
      if (attention_workspace_.size() < ws.partial_bytes()) {
        attention_workspace_ = Buffer();
        PHOTON_ASSIGN_OR_RETURN(attention_workspace_, allocate(ws.partial_bytes()));
      }
      // The counters return to zero after every launch; only a new buffer needs clearing.
      if (attention_arrivals_.size() < ws.arrival_bytes()) {
        attention_arrivals_ = Buffer();
        PHOTON_ASSIGN_OR_RETURN(attention_arrivals_, allocate(ws.arrival_bytes()));
        PHOTON_CUDA_TRY(cudaMemsetAsync(attention_arrivals_.data(), 0, attention_arrivals_.size(), stream_));
      }
      a.partial_out = static_cast<float*>(attention_workspace_.data());
      a.partial_ml = a.partial_out + ws.partial_out_floats;
      a.arrivals = static_cast<int32_t*>(attention_arrivals_.data());
    }
    return a;
  }

  // attention's checks for out / q [T, nq, hd] over `cache`: its shape and nq (nq 0 when T is 0).
  struct AttentionShape {
    CacheShape cs;
    int64_t nq = 0;
  };
  Result<AttentionShape> attention_shape(const char* op, Tensor out, Tensor q, KvLayer cache, const StepPlanView& plan,
                                         float scale) {
    AttentionShape r;
    PHOTON_ASSIGN_OR_RETURN(r.cs, cache_shape(op, cache));
    PHOTON_TRY(expect(op, "q", q, DType::bf16));
    PHOTON_TRY(expect(op, "out", out, DType::bf16));
    const int64_t T = plan.num_tokens, hd = r.cs.hd;
    if (T == 0) return r;
    if (q.numel() % (T * hd) != 0 || out.numel() != q.numel())
      return mismatch(op, "q " + shape_string(q) + " and out " + shape_string(out) + " must both be [T, nq, hd]");
    r.nq = q.numel() / (T * hd);
    if (r.nq == 0 || r.nq % r.cs.nkv != 0) return mismatch(op, std::to_string(r.nq) + " query heads are not a multiple of " + std::to_string(r.cs.nkv) + " KV heads");
    if (!std::isfinite(scale)) return fail(Errc::invalid_argument, std::string("cuda ") + op + ": scale must be finite");
    PHOTON_TRY(current(op, plan));
    PHOTON_TRY(staging_.check_cache(int32_t(r.cs.bs), r.cs.num_blocks));
    return r;
  }

  // Whether options_.rope_in_decode_attention selects this step (queries q [T, nq, hd]) for RoPE inside
  // decode attention.
  bool rope_in_attention(const StepPlanView& plan, Tensor q) const {
    using Rule = CudaBackendOptions::RopeInAttention;
    const Rule rule = options_.rope_in_decode_attention;
    return rule != Rule::never && plan.num_tokens > 0 && is_decode(plan) &&
           (rule == Rule::always ||
            (plan.num_seqs > 1 && q.numel() >= kRopeInAttentionMinQueryWidth * plan.num_tokens));
  }

  // Decode steps (one query per sequence) that options_.rope_in_decode_attention selects: one decode
  // attention kernel that also does rope_qkv's work (decode_attention.cuh); other steps run the pair.
  Result<void> rope_attention(Tensor out, Tensor q, Tensor qkv, const StepPlanView& plan, Tensor inv_freq,
                              Tensor q_norm, Tensor k_norm, float eps, KvLayer cache, float scale) override {
    if (!rope_in_attention(plan, q))
      return Backend::rope_attention(out, q, qkv, plan, inv_freq, q_norm, k_norm, eps, cache, scale);
    const char* op = "rope_attention";
    PHOTON_ASSIGN_OR_RETURN(const cuda::RopeQkvArgs r, rope_args(op, q, qkv, plan, inv_freq, q_norm, k_norm, eps, cache));
    PHOTON_ASSIGN_OR_RETURN(const AttentionShape sh, attention_shape(op, out, q, cache, plan, scale));
    PHOTON_ASSIGN_OR_RETURN(cuda::DecodeAttentionArgs a, decode_attention_args(out, q, cache, plan, scale, sh.cs, sh.nq));
    a.q = nullptr;
    a.qkv = r.qkv;
    a.positions = r.positions;
    a.slot_mapping = r.slot_mapping;
    a.inv_freq = r.inv_freq;
    a.q_norm = r.q_norm;
    a.k_norm = r.k_norm;
    a.norm_f32 = r.norm_f32;
    a.num_slots = r.num_slots;
    a.eps = r.eps;
    keep_single_pass_if_served(a);  // RoPE inside has its own requirements
    if (a.single_pass_heads > 0) ++single_pass_attention_launches_;
    return cuda::launch_decode_attention(a, stream_);
  }

  Result<void> attention(Tensor out, Tensor q, KvLayer cache, const StepPlanView& plan, float scale) override {
    const char* op = "attention";
    PHOTON_ASSIGN_OR_RETURN(const AttentionShape sh, attention_shape(op, out, q, cache, plan, scale));
    const int64_t nq = sh.nq;
    const CacheShape& cs = sh.cs;
    if (plan.num_tokens == 0) return {};
    if (is_decode(plan)) {  // one query per sequence, row s is sequence s
      PHOTON_ASSIGN_OR_RETURN(const cuda::DecodeAttentionArgs a, decode_attention_args(out, q, cache, plan, scale, cs, nq));
      if (a.single_pass_heads > 0) ++single_pass_attention_launches_;
      return cuda::launch_decode_attention(a, stream_);
    }

    const auto& info = staging_.info();
    const int64_t G = nq / cs.nkv;
    int64_t tiles = 0;
    for (int32_t s = 0; s < info.num_seqs; ++s)
      tiles += (int64_t(info.query_start[s + 1] - info.query_start[s]) * G + cuda::kPrefillTileRows - 1) /
               cuda::kPrefillTileRows;
    cuda::PrefillAttentionArgs a;
    set_paged_attention(a, out, q, cache, plan, cs, nq);
    a.query_start = plan.query_start;
    a.positions = plan.positions;
    a.num_tiles = int32_t(tiles);
    a.scale = scale;
    return cuda::launch_prefill_attention(a, stream_);
  }

  Result<void> silu_mul(Tensor out, Tensor gate_up) override {
    const char* op = "silu_mul";
    PHOTON_TRY(expect(op, "out", out, DType::bf16));
    PHOTON_TRY(expect(op, "gate_up", gate_up, DType::bf16));
    if (gate_up.rank < 1 || out.rank < 1 || gate_up.dim(0) != out.dim(0) || gate_up.numel() != 2 * out.numel())
      return mismatch(op, "gate_up " + shape_string(gate_up) + " must be [T, 2I] for out " + shape_string(out));
    const int64_t T = out.dim(0);
    if (T == 0) return {};
    return cuda::launch_silu_mul({bf(out), bf(gate_up), int32_t(T), int32_t(out.numel() / T)}, stream_);
  }

  Result<void> gather_logit_rows(Tensor out, Tensor x, const StepPlanView& plan) override {
    const char* op = "gather_logit_rows";
    if (out.dtype != x.dtype) return mismatch(op, "out " + shape_string(out) + " and x " + shape_string(x) + " differ in dtype");
    const int64_t R = plan.num_logits, T = plan.num_tokens;
    if (R == 0) return {};
    if (x.rank < 1 || x.dim(0) != T || out.rank < 1 || out.dim(0) != R || out.row_elems() != x.row_elems())
      return mismatch(op, "x " + shape_string(x) + " must be [T, H] and out " + shape_string(out) + " [R, H]");
    PHOTON_TRY(current(op, plan));
    return cuda::launch_gather_rows({out.data, x.data, plan.logits_rows, int32_t(R), int32_t(T),
                                     int64_t(x.row_elems() * int64_t(dtype_size(x.dtype)))},
                                    stream_);
  }

  Result<void> sample(Tensor logits, const SampleBatch& batch, const SampleOutput& out) override {
    PHOTON_CUDA_TRY(cudaSetDevice(options_.device));
    return sampler_->sample(logits, batch, out);
  }

  Result<double> copy_bandwidth(size_t bytes, int32_t iterations) {
    if (bytes == 0 || iterations < 1) return fail(Errc::invalid_argument, "cuda_copy_bandwidth: need bytes > 0 and iterations >= 1");
    PHOTON_CUDA_TRY(cudaSetDevice(options_.device));
    PHOTON_ASSIGN_OR_RETURN(Buffer src, allocate(bytes));
    PHOTON_ASSIGN_OR_RETURN(Buffer dst, allocate(bytes));
    PHOTON_CUDA_TRY(cudaMemsetAsync(src.data(), 1, bytes, stream_));
    cudaEvent_t start = nullptr, stop = nullptr;
    float median_ms = 0;
    PHOTON_CUDA_TRY(cudaEventCreate(&start));
    Status st = [&]() -> Status {
      PHOTON_CUDA_TRY(cudaEventCreate(&stop));
      std::vector<float> ms;
      for (int32_t i = 0; i <= iterations; ++i) {  // the first copy warms up
        PHOTON_CUDA_TRY(cudaEventRecord(start, stream_));
        PHOTON_CUDA_TRY(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, stream_));
        PHOTON_CUDA_TRY(cudaEventRecord(stop, stream_));
        PHOTON_CUDA_TRY(cudaEventSynchronize(stop));
        float t = 0;
        PHOTON_CUDA_TRY(cudaEventElapsedTime(&t, start, stop));
        if (i > 0) ms.push_back(t);
      }
      std::sort(ms.begin(), ms.end());
      median_ms = ms[ms.size() / 2];
      return {};
    }();
    cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
    PHOTON_TRY(st);
    return 2.0 * double(bytes) / (double(median_ms) * 1e-3);
  }
  const std::string& device_name() const noexcept { return device_name_; }
  int64_t persistent_launches() const noexcept { return persistent_launches_; }
  int64_t sampled_graph_steps() const noexcept { return sampled_graph_steps_; }
  int64_t device_id_steps() const noexcept { return device_id_steps_; }
  int64_t screened_steps() const noexcept { return screened_steps_; }
  // Waits for the stream, then reads the screened draws' count of rescored ids.
  Result<int64_t> screen_rescored_ids() const {
    if (screen_rescored_.data() == nullptr) return int64_t(0);
    PHOTON_CUDA_TRY(cudaStreamSynchronize(stream_));
    unsigned long long n = 0;
    PHOTON_CUDA_TRY(cudaMemcpy(&n, screen_rescored_.data(), sizeof n, cudaMemcpyDeviceToHost));
    return int64_t(n);
  }
  int64_t single_pass_attention_launches() const noexcept { return single_pass_attention_launches_; }

 protected:
  void release(void* ptr) noexcept override { alloc_.release(ptr); }

 private:
  static Result<CacheShape> cache_shape(const char* op, const KvLayer& cache) {
    PHOTON_TRY(expect(op, "cache.k", cache.k, DType::bf16));
    PHOTON_TRY(expect(op, "cache.v", cache.v, DType::bf16));
    if (cache.k.rank != 4 || cache.v.rank != 4 || cache.k.shape != cache.v.shape)
      return mismatch(op, "cache k and v must both be [num_blocks, block_size, nkv, hd], got " +
                              shape_string(cache.k) + " and " + shape_string(cache.v));
    const CacheShape cs{cache.k.dim(0), cache.k.dim(1), cache.k.dim(2), cache.k.dim(3), cache.block_stride_rows()};
    if (cs.num_blocks <= 0 || cs.bs <= 0 || cs.nkv <= 0 || cs.hd <= 0)
      return mismatch(op, "cache dimensions must be positive, got " + shape_string(cache.k));
    if (cs.stride < cs.bs)
      return fail(Errc::invalid_argument, std::string("cuda ") + op + ": cache block_stride " +
                                              std::to_string(cache.block_stride) + " must be 0 or at least block_size " +
                                              std::to_string(cs.bs));
    // The kernels form cache rows (block * stride + offset) in int32.
    if (cs.num_blocks * cs.stride > std::numeric_limits<int32_t>::max())
      return fail(Errc::out_of_range, std::string("cuda ") + op + ": " + std::to_string(cs.num_blocks) +
                                          " blocks of stride " + std::to_string(cs.stride) +
                                          " rows exceed the kernels' int32 row index");
    return cs;
  }
  // The shape of out[M, N] = x[M, K] @ w[N, K]^T: w of rank 2, x bf16 rows of K, out bf16 or f32
  // with M * N elements and data unless M = 0.
  struct ProductShape {
    int64_t M, N, K;
  };
  static Result<ProductShape> product_shape(const char* op, const Tensor& out, const Tensor& x, const Tensor& w) {
    PHOTON_TRY(expect(op, "x", x, DType::bf16));
    if (w.rank != 2) return mismatch(op, "W must be [N, K], got " + shape_string(w));
    if (out.dtype != DType::bf16 && out.dtype != DType::f32)
      return mismatch(op, "out must be bf16 or f32, got " + shape_string(out));
    const int64_t N = w.dim(0), K = w.dim(1);
    if (K <= 0 || x.numel() % K != 0) return mismatch(op, "x " + shape_string(x) + " is not rows of K = " + std::to_string(K));
    const int64_t M = x.numel() / K;
    if (out.numel() != M * N)
      return mismatch(op, "out " + shape_string(out) + " must be [M = " + std::to_string(M) + ", N = " + std::to_string(N) + "]");
    if (M > 0 && out.data == nullptr) return fail(Errc::invalid_argument, std::string("cuda ") + op + ": out has no data");
    return ProductShape{M, N, K};
  }
  // Launches decode_layers for a one-token step when every tensor has the shape and dtype it serves;
  // false (nothing launched) otherwise.
  Result<bool> persistent_decode(Tensor x, std::span<const DecoderLayerWeights> layers,
                                 std::span<const KvLayer> caches, const DecoderScratch& s, const StepPlanView& plan,
                                 const DecoderLayersParams& p) {
    if (layers.empty() || layers.size() != caches.size() || layers.size() > size_t(cuda::kDecodeLayersMaxLayers) ||
        x.dtype != DType::bf16 || x.rank != 2 || s.q.rank != 3 || s.qkv.dtype != DType::bf16 ||
        s.mlp.dtype != DType::bf16 || p.inv_freq.dtype != DType::f32 || !staging_.is_current(plan))
      return false;
    const int64_t H = x.dim(1), nq = s.q.dim(1), hd = s.q.dim(2);
    const auto bf16_vec = [](const Tensor& t, int64_t n) { return t.dtype == DType::bf16 && t.numel() == n && t.data; };
    const auto bf16_mat = [](const Weight& w, int64_t n, int64_t k) {
      return w.w.dtype == DType::bf16 && w.w.rank == 2 && w.w.dim(0) == n && w.w.dim(1) == k && w.w.data != nullptr;
    };
    const Result<CacheShape> cs0 = cache_shape("decoder_layers", caches[0]);
    if (!cs0.has_value()) return false;
    const int64_t nkv = cs0->nkv, I = layers[0].down.w.rank == 2 ? layers[0].down.w.dim(1) : 0;
    if (cs0->hd != hd || p.inv_freq.numel() != hd / 2 || x.dim(0) != 1 || s.qkv.numel() != (nq + 2 * nkv) * hd ||
        s.mlp.numel() != I || !cuda::decode_layers_applies(compute_major_, num_sms_, int32_t(H), int32_t(I),
                                                           int32_t(nq), int32_t(nkv), int32_t(hd)))
      return false;
    if (!staging_.check_cache(int32_t(cs0->bs), cs0->num_blocks).has_value()) return false;
    cuda::DecodeLayersArgs a;
    for (size_t l = 0; l < layers.size(); ++l) {
      const DecoderLayerWeights& L = layers[l];
      const Result<CacheShape> cs = cache_shape("decoder_layers", caches[l]);
      if (!cs.has_value() || cs->num_blocks != cs0->num_blocks || cs->bs != cs0->bs || cs->stride != cs0->stride ||
          cs->nkv != nkv || cs->hd != hd)
        return false;
      if (!bf16_mat(L.qkv, (nq + 2 * nkv) * hd, H) || !bf16_mat(L.o, H, nq * hd) || !bf16_mat(L.gate_up, 2 * I, H) ||
          !bf16_mat(L.down, H, I) || !bf16_vec(L.input_norm, H) || !bf16_vec(L.post_attention_norm, H) ||
          !(L.q_norm.empty() || bf16_vec(L.q_norm, hd)) || !(L.k_norm.empty() || bf16_vec(L.k_norm, hd)))
        return false;
      a.layers[l] = {bf(L.qkv.w), bf(L.o.w), bf(L.gate_up.w), bf(L.down.w), bf(L.input_norm),
                     bf(L.post_attention_norm), L.q_norm.empty() ? nullptr : bf(L.q_norm),
                     L.k_norm.empty() ? nullptr : bf(L.k_norm), bf(caches[l].k), bf(caches[l].v)};
    }
    const size_t partial_bytes = size_t(cuda::decode_layers_partial_floats(int32_t(nq), int32_t(hd))) * sizeof(float);
    if (persistent_partials_.size() < partial_bytes) {
      persistent_partials_ = Buffer();
      PHOTON_ASSIGN_OR_RETURN(persistent_partials_, allocate(partial_bytes));
    }
    if (persistent_sync_.size() == 0) {  // zero once: every launch leaves the counters at zero
      PHOTON_ASSIGN_OR_RETURN(persistent_sync_, allocate(2 * sizeof(unsigned)));
      PHOTON_CUDA_TRY(cudaMemsetAsync(persistent_sync_.data(), 0, persistent_sync_.size(), stream_));
    }
    a.num_layers = int32_t(layers.size());
    a.x = bf(x);
    a.qkv = bf(s.qkv);
    a.mlp = bf(s.mlp);
    a.partials = static_cast<float*>(persistent_partials_.data());
    a.sync = static_cast<unsigned*>(persistent_sync_.data());
    a.positions = plan.positions;
    a.context_lens = plan.context_lens;
    a.block_tables = plan.block_tables;
    a.slot_mapping = plan.slot_mapping;
    a.inv_freq = p.inv_freq.as<const float>();
    a.hidden = int32_t(H);
    a.intermediate = int32_t(I);
    a.num_q_heads = int32_t(nq);
    a.num_kv_heads = int32_t(nkv);
    a.head_dim = int32_t(hd);
    a.block_size = int32_t(cs0->bs);
    a.kv_block_stride = int32_t(cs0->stride);
    a.num_slots = cs0->num_blocks * cs0->bs;
    a.eps = p.eps;
    a.scale = p.attn_scale;
    a.max_in_flight = options_.persistent_max_in_flight;
    PHOTON_TRY(cuda::launch_decode_layers(a, num_sms_, stream_));
    ++persistent_launches_;
    return true;
  }

  // Ops that read the plan's arrays accept only the last staged plan.
  Status current(const char* op, const StepPlanView& plan) const {
    if (!staging_.is_current(plan))
      return fail(Errc::invalid_state, std::string("cuda ") + op + ": the plan view is not the last staged plan");
    return {};
  }

  // matmul with an i8 Weight (codes [N, K], f32 scales [N, ceil(K / group)]):
  // gemv_int8_skinny for 2..16 rows; one row on the one-row GEMV with x staged
  // (options_.int8_one_row_gemv, the shapes GemvArgs::w8 serves); the int8 GEMV
  // for other M <= kGemvInt8MaxRows, else the weight dequantized to bf16 into
  // int8_workspace_ (grown to the largest layer seen, N * K * 2 bytes, and
  // kept) and the bf16 cuBLASLt product.
  Status matmul_int8(const char* op, Tensor out, Tensor x, const Weight& W, bool accumulate) {
    PHOTON_TRY(expect(op, "W", W.w, DType::i8));
    PHOTON_ASSIGN_OR_RETURN(const ProductShape ps, product_shape(op, out, x, W.w));
    const int64_t M = ps.M, N = ps.N, K = ps.K;
    if (W.group_size <= 0) return mismatch(op, "int8 W needs a positive group size, got " + std::to_string(W.group_size));
    PHOTON_TRY(expect(op, "W.scales", W.scales, DType::f32));
    const int64_t groups = int8_group_count(K, W.group_size);
    if (W.scales.rank != 2 || W.scales.dim(0) != N || W.scales.dim(1) != groups)
      return mismatch(op, "int8 W.scales must be [N = " + std::to_string(N) + ", ceil(K / " +
                              std::to_string(W.group_size) + ") = " + std::to_string(groups) + "], got " +
                              shape_string(W.scales));
    if (M == 0) return {};
    if (N >= (int64_t(1) << 31) || K >= (int64_t(1) << 31))
      return mismatch(op, "int8 W " + shape_string(W.w) + " has a dimension beyond 2^31 - 1");
    const cuda::GemvInt8Args g{out.data, bf(x), W.w.as<const int8_t>(), W.scales.as<const float>(), int32_t(M),
                               int32_t(N), int32_t(K), W.group_size, out.dtype == DType::f32, accumulate};
    // Decode batches (2..16 rows) on the tensor-core W8A16 kernel with skinny_decode_matmul, in place
    // of the int8 GEMV (2..8 rows) and of dequantize + cuBLASLt (9..16); PHOTON_CUDA_INT8_SKINNY=0
    // keeps those (measurements). One row where options_.int8_skinny_one_row says so.
    const bool one_row_skinny = options_.int8_skinny_one_row >= 2 ||
                                (options_.int8_skinny_one_row == 1 && (N + 15) / 16 <= int64_t(num_sms_));
    if (options_.skinny_decode_matmul && int8_skinny_enabled() && (M >= 2 || one_row_skinny) &&
        cuda::gemv_int8_skinny_applies(g))
      return cuda::launch_gemv_int8_skinny(g, num_sms_, stream_);
    if (M == 1 && options_.int8_one_row_gemv) {
      cuda::GemvArgs o{out.data, bf(x), nullptr, 1, int32_t(N), int32_t(K), out.dtype == DType::f32,
                       accumulate ? cuda::GemvMode::add : cuda::GemvMode::plain};
      set_gemv_policy(o);
      if (set_int8_weights(o, W) && cuda::gemv_applies(o)) return cuda::launch_gemv(o, stream_);
    }
    if (M <= cuda::kGemvInt8MaxRows) return cuda::launch_gemv_int8(g, stream_);
    const size_t bytes = size_t(N) * size_t(K) * sizeof(bf16_t);
    if (int8_workspace_.size() < bytes) {
      int8_workspace_ = Buffer();
      PHOTON_ASSIGN_OR_RETURN(int8_workspace_, allocate(bytes));
    }
    auto* wide = static_cast<bf16_t*>(int8_workspace_.data());
    PHOTON_TRY(cuda::launch_dequantize_int8({wide, g.w, g.scales, N, int32_t(K), W.group_size}, stream_));
    return gemm_->run(out.data, out.dtype, x.data, wide, M, N, K, stream_, accumulate);
  }

  // Whether a one-row GEMV of N outputs and K inputs loads its first weights early
  // (options_.gemv_early_weights).
  bool gemv_early(int64_t N, int64_t K) const {
    using E = CudaBackendOptions::GemvEarly;
    switch (options_.gemv_early_weights) {
      case E::none: return false;
      case E::large: return N >= kGemvEarlyMinDim && K >= kGemvEarlyMinDim;
      case E::all: return true;
      case E::narrow_n: return N < kGemvEarlyWideN;
      case E::wide_n: return N >= kGemvEarlyWideN;
    }
    return false;
  }

  // The one-row GEMV with the norm folded in (plain mode, or SwiGLU mode with silu) when it serves
  // rmsnorm_matmul(_silu): options_.gemv_norm, one bf16 row x [1, K], bf16 norm weights [K] and
  // weights [N, K] (silu: [2N, K] with K >= the SwiGLU GEMV's bound), h [1, K], out [1, N] bf16
  // (or f32 without silu) overlapping neither x nor h, silu's scratch [1, 2N]. Otherwise nullopt:
  // the caller runs the unfused pair, which reports any error.
  std::optional<cuda::GemvArgs> norm_gemv(Tensor out, Tensor x, Tensor norm_w, float eps, const Weight& W, Tensor h,
                                          Tensor scratch, bool silu) const {
    const bool i8 =
        W.w.dtype == DType::i8 && options_.int8_one_row_gemv && !(silu && options_.int8_skinny_one_row >= 2);
    if (!options_.gemv_norm || (W.w.dtype != DType::bf16 && !i8) || W.w.rank != 2 || W.w.data == nullptr ||
        x.dtype != DType::bf16 || norm_w.dtype != DType::bf16 || norm_w.data == nullptr || x.data == nullptr ||
        out.data == nullptr)
      return std::nullopt;
    const int64_t rows = W.w.dim(0), K = W.w.dim(1), N = silu ? rows / 2 : rows;
    if (x.numel() != K || h.numel() != K || norm_w.numel() != K || out.numel() != N || N <= 0 ||
        N >= (int64_t(1) << 30) || K >= (int64_t(1) << 30))
      return std::nullopt;
    if (silu && (rows % 2 != 0 || K < swiglu_gemv_min_k() || out.dtype != DType::bf16 || scratch.numel() != rows))
      return std::nullopt;
    if (out.dtype != DType::bf16 && out.dtype != DType::f32) return std::nullopt;
    if (overlaps(out, x) || (h.data != nullptr && overlaps(out, h))) return std::nullopt;
    cuda::GemvArgs g{out.data, bf(x), bf(W.w), 1, int32_t(N), int32_t(K), out.dtype == DType::f32,
                     silu ? cuda::GemvMode::silu : cuda::GemvMode::plain};
    g.norm_w = static_cast<const bf16_t*>(norm_w.data);
    g.eps = eps;
    set_gemv_policy(g);
    if (i8 && !set_int8_weights(g, W)) return std::nullopt;
    // Short rows of many outputs (the LM head): one wave of blocks streaming many column groups.
    const int64_t row_bytes = int64_t(K) * (i8 ? 1 : 2);
    if (options_.gemv_passes_min_n > 0 && N >= options_.gemv_passes_min_n &&
        row_bytes <= options_.gemv_passes_max_row_bytes)
      g.passes_grid = 4 * num_sms_;
    if (!cuda::gemv_applies(g)) return std::nullopt;
    return g;
  }

  // g's weights as W's group-wise int8 codes and scales (GemvArgs::w8) when W is a consistent
  // int8 weight of g's shape ([N, K], SwiGLU [2N, K]); false otherwise.
  static bool set_int8_weights(cuda::GemvArgs& g, const Weight& W) {
    const int64_t rows = g.mode == cuda::GemvMode::silu ? 2 * int64_t(g.N) : int64_t(g.N);
    if (W.w.dtype != DType::i8 || W.w.rank != 2 || W.w.dim(0) != rows || W.w.dim(1) != g.K || W.group_size <= 0 ||
        W.scales.dtype != DType::f32 || W.scales.data == nullptr || W.scales.rank != 2 || W.scales.dim(0) != rows ||
        W.scales.dim(1) != int8_group_count(g.K, W.group_size))
      return false;
    g.w = nullptr;
    g.w8 = W.w.as<const int8_t>();
    g.scales = W.scales.as<const float>();
    g.group = W.group_size;
    return true;
  }

  // The one-row GEMV's options for g's shape (g.N outputs, g.K inputs): early weights, their K
  // split and rounds (options_.gemv_early_*), x staged in shared memory (options_.gemv_stage_x,
  // within the staged row's bound).
  void set_gemv_policy(cuda::GemvArgs& g) const {
    g.early_weights = gemv_early(g.N, g.K);
    g.early_half_ks = options_.gemv_early_half_ks;
    g.early_chunks = options_.gemv_early_chunks;
    g.unroll = g.mode == cuda::GemvMode::add    ? options_.gemv_unroll_add
               : g.mode == cuda::GemvMode::silu ? options_.gemv_unroll_silu
               : g.rope.q_out != nullptr        ? options_.gemv_unroll_rope
                                                : options_.gemv_unroll_plain;
    g.stage_x = options_.gemv_stage_x && int64_t(g.K) * 2 <= cuda::kGemvMaxStagedBytes;
  }

  // out = x @ W^T, or out += it (accumulate: matmul_add's residual, bf16), for bf16 or int8 W.
  Status product(const char* op, Tensor out, Tensor x, const Weight& W, bool accumulate) {
    if (W.w.dtype == DType::i8) return matmul_int8(op, out, x, W, accumulate);
    PHOTON_TRY(expect(op, "W", W.w, DType::bf16));
    PHOTON_ASSIGN_OR_RETURN(const ProductShape ps, product_shape(op, out, x, W.w));
    const int64_t M = ps.M, N = ps.N, K = ps.K;
    if (M == 0) return {};
    cuda::GemvArgs g{out.data, bf(x), bf(W.w), int32_t(M), int32_t(N), int32_t(K), out.dtype == DType::f32};
    if (accumulate) g.mode = cuda::GemvMode::add;
    const bool skinny = options_.skinny_decode_matmul && N <= skinny_max_n() && cuda::gemv_skinny_applies(g);
    if (M == 1 && skinny &&
        (one_row_skinny() == OneRowSkinny::all ||
         (one_row_skinny() == OneRowSkinny::bounded && N * K <= one_row_skinny_max_nk())))
      return cuda::launch_gemv_skinny(g, num_sms_, stream_);
    if (M <= cuda::kGemvMaxRows && N < (int64_t(1) << 31) && cuda::gemv_applies(g)) {
      set_gemv_policy(g);
      return cuda::launch_gemv(g, stream_);
    }
    // Decode batches' small matrices on the skinny tensor-core kernel (faster than cuBLASLt there).
    if (skinny) return cuda::launch_gemv_skinny(g, num_sms_, stream_);
    // Decode batches on tensor cores when asked (sm_90 clusters; cuBLASLt is faster so far).
    if (!accumulate && options_.mma_decode_matmul && compute_major_ >= 9 && N < (int64_t(1) << 31) &&
        cuda::gemv_mma_applies(g))
      return cuda::launch_gemv_mma(g, num_sms_, stream_);
    return gemm_->run(out.data, out.dtype, x.data, W.w.data, M, N, K, stream_, accumulate);
  }

  struct GraphKey {
    int32_t bucket, width;
    bool sampled = false;  // the graph ends with the one-pass sampler (run_step_sampled)
    int32_t region = 0;    // the plan region it reads (PlanStaging; sampled graphs alternate)
    bool operator<(const GraphKey& o) const {
      if (bucket != o.bucket) return bucket < o.bucket;
      if (width != o.width) return width < o.width;
      if (sampled != o.sampled) return sampled < o.sampled;
      return region < o.region;
    }
  };
  // The region a sampled graph's sampler stores the next step's ids in: the other one when
  // sampled graph steps alternate regions (plan_copy_stream), else its own.
  int32_t next_ids_region(int32_t region) const { return options_.plan_copy_stream ? 1 - region : region; }
  // A decode-only plan that graphs serve: its key (bucket, block-table width), else nullopt.
  std::optional<GraphKey> graph_key(const BatchPlan& plan) const;
  // The key of the graph that ends with the sampler for (plan, batch), where one serves them
  // (sample_in_graph, one row per sequence, has_out: outputs to write, the rows graph-eligible).
  std::optional<GraphKey> sampled_graph_key(const BatchPlan& plan, const SampleBatch& batch, bool has_out) const {
    std::optional<GraphKey> key = options_.sample_in_graph ? graph_key(plan) : std::nullopt;
    if (!key || batch.num_rows != plan.num_seqs() || !has_out || !sampler_->graph_eligible(batch, key->bucket))
      return std::nullopt;
    key->sampled = true;
    key->region = next_region_;
    return key;
  }
  struct StepGraph {
    cudaGraphExec_t exec = nullptr;
    Tensor result;                  // forward's result at capture (fixed address)
    uint64_t alloc_generation = 0;  // allocator state the captured buffers belong to
    uint64_t plan_epoch = 0;        // graph plan buffer the capture read
    int64_t embed_rows = 0;         // embedding rows seen at capture (token ids are checked against it)
    bool screened = false;          // its LM head runs through the screen (rmsnorm_lm_head)
    int32_t cache_block_size = 0;   // KV cache geometry seen at capture
    int64_t cache_num_blocks = 0;
    uint64_t sampler_epoch = 0;     // sampled graphs: the sampler's fixed buffers the capture used
  };
  void drop_graph(std::map<GraphKey, StepGraph>::iterator it) {
    cudaGraphExecDestroy(it->second.exec);
    graphs_.erase(it);
  }
  // The checks a replay needs that capture did on the host (token ids, cache geometry).
  Status check_replay(const StepGraph& g);
  Result<Tensor> replay(StepGraph& g, const BatchPlan& plan);
  Result<Tensor> capture(const GraphKey& key, const StepPlanView& view, const BatchPlan& plan, const StepForward& forward);
  // Records forward (and, for sampled keys, the sampler over its logits) into a new graph of
  // graphs_ without launching it; nullptr when the forward pass cannot be captured (graphs_failed_
  // is then set). Errors of forward itself are returned.
  Result<StepGraph*> record(const GraphKey& key, const StepPlanView& view, const StepForward& forward);

  // A step of launch_step_sampled, until its finish_step_sampled. Graph steps end with the
  // one-pass sampler, whose results land in the sampler's result slot `slot` when `done` fires;
  // other steps ran inside their launch and carry their status.
  struct LaunchedStep {
    bool graph = false;
    bool completed = false;  // status holds the outcome; out holds the results when it is ok
    Result<void> status;
    int32_t slot = 0;
    int32_t rows = 0;  // batch.num_rows
    cudaEvent_t done = nullptr;  // graph steps: recorded after the graph (one of done_events_)
    std::array<float, cuda::kOnePassMaxRows> temperatures{};  // graph steps: for the overflow message
    SampleOutput out;
  };
  // A step that ran (or failed) inside its launch.
  static LaunchedStep ran_here(Result<void> status, const SampleBatch& batch, const SampleOutput& out) {
    LaunchedStep step;
    step.completed = true;
    step.status = std::move(status);
    step.rows = batch.num_rows;
    step.out = out;
    return step;
  }
  // Waits for a graph step and reads its results into its out (once).
  void complete(LaunchedStep& step);
  // launch_step_sampled's graph path: `graph` found valid or recorded for `key`; ids_on_device:
  // the previous graph step's sampler left this plan's input ids in the graph buffer.
  Result<void> launch_graph_step(const GraphKey& key, StepGraph& graph, const BatchPlan& plan, const SampleBatch& batch,
                                 const SampleOutput& out, bool ids_on_device);

  cuda::DeviceAllocator alloc_;  // first member: outlives every buffer below
  CudaBackendOptions options_;
  int32_t num_sms_;
  int32_t compute_major_;
  cudaStream_t stream_;
  cuda::PlanStaging staging_;
  Buffer gemm_workspace_;
  std::unique_ptr<cuda::Gemm> gemm_;
  Buffer int8_workspace_;  // bf16 copy of one int8 weight for large-M products (matmul_int8)
  Buffer attention_workspace_;  // decode split partials
  Buffer attention_arrivals_;   // decode split arrival counters (zero between launches)
  Buffer persistent_partials_;  // decode_layers' attention partials
  Buffer persistent_sync_;      // decode_layers' grid barrier counters (zero between launches)
  Buffer screen_bound_;         // [V] f32: the LM head screen's bounds (rmsnorm_lm_head)
  Buffer screen_rescored_;      // one u64: the ids the screened draws rescored, summed (ScreenArgs::rescored)
  static constexpr int32_t kScreenGroup = 128;  // the screen's int8 group (lm_head_screen_group)
  bool screen_armed_ = false;   // recording a sampled one-row graph: rmsnorm_lm_head may screen
  std::optional<cuda::ScreenArgs> screen_used_;  // set by rmsnorm_lm_head when it screened
  int64_t screened_steps_ = 0;  // sampled graph steps replayed with the LM head screen
  int64_t persistent_launches_ = 0;
  int64_t sampled_graph_steps_ = 0;  // run_step_sampled steps replayed with the sampler inside
  int64_t device_id_steps_ = 0;      // of those, steps whose input ids the step before left on the device
  int64_t single_pass_attention_launches_ = 0;  // decode attention launches of the single-pass kernel
  std::unique_ptr<cuda::Sampler> sampler_;
  std::unique_ptr<cuda::StepTrace> step_trace_;  // PHOTON_CUDA_STEP_TRACE: sampled graph steps traced
  int64_t embed_rows_ = 0;
  std::map<GraphKey, StepGraph> graphs_;
  bool graphs_failed_ = false;  // a capture failed once: run every step eagerly
  std::string device_name_;
  std::deque<LaunchedStep> launched_;  // oldest first; at most two
  std::array<cudaEvent_t, 2> done_events_{};  // graph steps' completion events, one per result slot
  int32_t next_slot_ = 0;  // the sampler result slot of the next graph step
  int32_t next_region_ = 0;  // the plan region of the next sampled graph step
  // The last launched step was a graph step whose sampler stored its `ids_rows` ids as the graph
  // buffer's input ids (the next graph step may take them where they are).
  int32_t ids_rows_ = 0;
};

std::optional<CudaBackend::GraphKey> CudaBackend::graph_key(const BatchPlan& plan) const {
  const int32_t S = plan.num_seqs();
  bool graphable = options_.cuda_graphs && !graphs_failed_ && S >= 1 && S <= options_.max_graph_batch &&
                   plan.num_tokens() == S && plan.num_logits() == S;
  for (int32_t s = 0; graphable && s < S; ++s)
    graphable = plan.logits_rows[size_t(s)] == s && plan.query_start[size_t(s) + 1] == s + 1;
  if (!graphable) return std::nullopt;
  int32_t width = 16;
  while (width < plan.max_blocks_per_seq) width *= 2;
  return GraphKey{bucket_for(S), width};
}

Result<Tensor> CudaBackend::run_step(const BatchPlan& plan, const StepForward& forward) {
  PHOTON_CUDA_TRY(cudaSetDevice(options_.device));
  const std::optional<GraphKey> key = graph_key(plan);
  ids_rows_ = 0;  // a plan staged here replaces the graph buffer's input ids
  if (!key) return Backend::run_step(plan, forward);
  PHOTON_ASSIGN_OR_RETURN(const StepPlanView view, staging_.stage_padded(plan, key->bucket, key->width, key->region));
  auto it = graphs_.find(*key);
  if (it != graphs_.end()) {
    if (it->second.alloc_generation == alloc_.generation() && it->second.plan_epoch == staging_.graph_buffer_epoch())
      return replay(it->second, plan);
    drop_graph(it);
  }
  return capture(*key, view, plan, forward);
}

Result<void> CudaBackend::run_step_sampled(const BatchPlan& plan, const StepForward& forward, const SampleBatch& batch,
                                          const SampleOutput& out) {
  if (!launched_.empty())
    return fail(Errc::invalid_argument, "run_step_sampled: launched steps are not finished");
  PHOTON_TRY(launch_step_sampled(plan, forward, batch, out, {}));
  return finish_step_sampled();
}

Result<void> CudaBackend::launch_step_sampled(const BatchPlan& plan, const StepForward& forward,
                                             const SampleBatch& batch, const SampleOutput& out,
                                             std::span<const int32_t> prev_rows) {
  PHOTON_CUDA_TRY(cudaSetDevice(options_.device));
  if (launched_.size() >= 2)
    return fail(Errc::invalid_argument, "launch_step_sampled: two steps are launched and not finished");
  if (!prev_rows.empty() && prev_rows.size() != size_t(plan.num_tokens()))
    return fail(Errc::invalid_argument, "launch_step_sampled: prev_rows must be empty or one entry per token");
  bool takes_ids = false, in_place = true;  // in place: token t takes row t
  for (size_t t = 0; t < prev_rows.size(); ++t) {
    takes_ids = takes_ids || prev_rows[t] >= 0;
    in_place = in_place && prev_rows[t] == int32_t(t);
  }
  if (takes_ids && launched_.empty())
    return fail(Errc::invalid_argument, "launch_step_sampled: tokens take previous ids, but no step is launched");

  // The graph this step replays, if any (found or recorded; recording launches nothing).
  const std::optional<GraphKey> key = sampled_graph_key(plan, batch, out.token_ids != nullptr);
  StepGraph* g = nullptr;
  if (key) {
    if (auto it = graphs_.find(*key); it != graphs_.end()) {
      if (it->second.alloc_generation == alloc_.generation() &&
          it->second.plan_epoch == staging_.graph_buffer_epoch() && it->second.sampler_epoch == sampler_->graph_epoch())
        g = &it->second;
      else
        drop_graph(it);
    }
  }
  const uint64_t epoch = staging_.graph_buffer_epoch();  // the buffers the step before's sampler wrote
  if (key && g == nullptr) {
    // Recording launches nothing and needs only the plan's addresses: ids the step before has not
    // sampled yet are left out of the staging (the launch below stages the plan again).
    PHOTON_TRY(sampler_->prepare_graph());
    PHOTON_ASSIGN_OR_RETURN(const StepPlanView view,
                            staging_.stage_padded(plan, key->bucket, key->width, key->region, {}, takes_ids));
    PHOTON_ASSIGN_OR_RETURN(g, record(*key, view, forward));
  }
  // The previous graph step left these ids in this graph's plan region: take them there, without
  // waiting.
  const bool ids_on_device = takes_ids && in_place && g != nullptr && ids_rows_ >= plan.num_tokens() &&
                             launched_.back().graph && launched_.back().rows >= plan.num_tokens() &&
                             g->embed_rows >= g->result.dim(1) && staging_.graph_buffer_epoch() == epoch;
  const BatchPlan* p = &plan;
  BatchPlan resolved;
  if (takes_ids && !ids_on_device) {  // wait for the previous step and take its ids on the host
    LaunchedStep& prev = launched_.back();
    complete(prev);
    if (!prev.status) {
      launched_.push_back(ran_here(fail(prev.status.error().code, "the step before failed: " + prev.status.error().message),
                                   batch, out));
      ids_rows_ = 0;
      return {};
    }
    resolved = plan;
    PHOTON_TRY(resolved.take_previous_ids(prev_rows, std::span<const int32_t>(prev.out.token_ids, size_t(prev.rows))));
    p = &resolved;
  }
  if (g == nullptr) {  // not a graph step (or it cannot be captured): run it here
    launched_.push_back(ran_here(Backend::run_step_sampled(*p, forward, batch, out), batch, out));
    ids_rows_ = 0;
    return {};
  }
  return launch_graph_step(*key, *g, *p, batch, out, ids_on_device);
}

Result<void> CudaBackend::launch_graph_step(const GraphKey& key, StepGraph& g, const BatchPlan& plan,
                                            const SampleBatch& batch, const SampleOutput& out, bool ids_on_device) {
  static_assert(sizeof(cuda::SampleRowParams) <= cuda::PlanStaging::kSideRowBytes);
  std::array<cuda::SampleRowParams, cuda::kOnePassMaxRows> params;
  const int32_t slot = next_slot_;
  PHOTON_TRY(sampler_->graph_params(batch, g.result.dim(1), key.bucket, slot, params.data()));
  PHOTON_TRY(staging_.stage_padded(plan, key.bucket, key.width, key.region,
                                   std::as_bytes(std::span(params.data(), size_t(key.bucket))), ids_on_device));
  PHOTON_TRY(check_replay(g));
  cudaEvent_t& done = done_events_[size_t(slot)];
  if (done == nullptr) PHOTON_CUDA_TRY(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  if (step_trace_) PHOTON_TRY(step_trace_->begin(stream_));
  PHOTON_CUDA_TRY(cudaGraphLaunch(g.exec, stream_));
  PHOTON_CUDA_TRY(cudaEventRecord(done, stream_));
  ++sampled_graph_steps_;
  device_id_steps_ += ids_on_device ? 1 : 0;
  screened_steps_ += g.screened ? 1 : 0;
  LaunchedStep step;
  step.graph = true;
  step.slot = slot;
  step.rows = batch.num_rows;
  step.done = done;
  for (int32_t r = 0; r < batch.num_rows; ++r) step.temperatures[size_t(r)] = params[size_t(r)].temperature;
  step.out = out;
  launched_.push_back(step);
  next_slot_ = 1 - slot;
  next_region_ = next_ids_region(key.region);
  ids_rows_ = key.bucket;
  if (step_trace_) PHOTON_TRY(step_trace_->end(stream_, sampled_graph_steps_, plan.num_seqs()));
  return {};
}

void CudaBackend::complete(LaunchedStep& step) {
  if (step.completed) return;
  step.completed = true;
  if (const cudaError_t e = cudaEventSynchronize(step.done); e != cudaSuccess) {
    step.status = cuda::cuda_failure(e, "cudaEventSynchronize(step.done)", __FILE__, __LINE__);
    return;
  }
  step.status = sampler_->graph_results(step.slot, step.rows,
                                        std::span<const float>(step.temperatures.data(), size_t(step.rows)), step.out);
}

Result<void> CudaBackend::finish_step_sampled() {
  if (launched_.empty()) return fail(Errc::invalid_argument, "finish_step_sampled: no step is launched");
  PHOTON_CUDA_TRY(cudaSetDevice(options_.device));
  complete(launched_.front());
  Result<void> status = std::move(launched_.front().status);
  launched_.pop_front();
  return status;
}

Status CudaBackend::check_replay(const StepGraph& g) {
  const auto& info = staging_.info();
  if (g.embed_rows > 0 && (info.min_input_id < 0 || info.max_input_id >= g.embed_rows))
    return fail(Errc::out_of_range, "cuda embed: token id " +
                                        std::to_string(info.min_input_id < 0 ? info.min_input_id : info.max_input_id) +
                                        " outside the embedding table's " + std::to_string(g.embed_rows) + " rows");
  if (g.cache_block_size > 0) PHOTON_TRY(staging_.check_cache(g.cache_block_size, g.cache_num_blocks));
  return {};
}

Result<Tensor> CudaBackend::replay(StepGraph& g, const BatchPlan& plan) {
  PHOTON_TRY(check_replay(g));
  PHOTON_CUDA_TRY(cudaGraphLaunch(g.exec, stream_));
  return g.result.rows(0, plan.num_logits());
}

Result<CudaBackend::StepGraph*> CudaBackend::record(const GraphKey& key, const StepPlanView& view,
                                                    const StepForward& forward) {
  embed_rows_ = 0;
  screen_used_.reset();
  const bool arm = key.sampled && key.bucket == 1 && options_.lm_head_screen;
  if (arm && screen_rescored_.data() == nullptr) {  // zeroed once, outside any capture
    PHOTON_ASSIGN_OR_RETURN(screen_rescored_, allocate(sizeof(unsigned long long)));
    PHOTON_CUDA_TRY(cudaMemsetAsync(screen_rescored_.data(), 0, sizeof(unsigned long long), stream_));
  }
  PHOTON_CUDA_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
  screen_armed_ = arm;  // for this forward only
  Result<Tensor> out = forward(view);
  screen_armed_ = false;
  if (out && key.sampled) {
    const auto* params = static_cast<const cuda::SampleRowParams*>(staging_.graph_side(key.region));
    if (Status st = sampler_->launch_in_graph(*out, params, staging_.graph_input_ids(next_ids_region(key.region)),
                                              screen_used_ ? &*screen_used_ : nullptr);
        !st)
      out = Unexpected{std::move(st).error()};
  }
  const bool screened = screen_used_.has_value();
  screen_used_.reset();
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
  if (!out) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    return Unexpected{std::move(out).error()};
  }
  cudaGraphExec_t exec = nullptr;
  cudaError_t inst = end;
  if (end == cudaSuccess) {
    inst = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
  }
  if (inst != cudaSuccess) {
    // The forward pass did something a graph cannot hold: from now on run eagerly.
    (void)cudaGetLastError();
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    graphs_failed_ = true;
    return static_cast<StepGraph*>(nullptr);
  }
  StepGraph g;
  g.exec = exec;
  g.result = *out;
  g.alloc_generation = alloc_.generation();
  g.plan_epoch = staging_.graph_buffer_epoch();
  g.embed_rows = embed_rows_;
  g.cache_block_size = staging_.checked_block_size();
  g.cache_num_blocks = staging_.checked_num_blocks();
  g.sampler_epoch = sampler_->graph_epoch();
  g.screened = screened;
  auto [it, inserted] = graphs_.emplace(key, g);
  return &it->second;
}

Result<Tensor> CudaBackend::capture(const GraphKey& key, const StepPlanView& view, const BatchPlan& plan,
                                    const StepForward& forward) {
  PHOTON_ASSIGN_OR_RETURN(StepGraph* g, record(key, view, forward));
  if (g == nullptr) return Backend::run_step(plan, forward);
  PHOTON_CUDA_TRY(cudaGraphLaunch(g->exec, stream_));
  return g->result.rows(0, plan.num_logits());
}

}  // namespace

Result<double> cuda_copy_bandwidth(Backend& backend, size_t bytes, int32_t iterations) {
  auto* cuda = dynamic_cast<CudaBackend*>(&backend);
  if (cuda == nullptr) return fail(Errc::invalid_argument, "cuda_copy_bandwidth: not a CUDA backend");
  return cuda->copy_bandwidth(bytes, iterations);
}

int64_t cuda_persistent_decode_launches(const Backend& backend) {
  const auto* cuda = dynamic_cast<const CudaBackend*>(&backend);
  return cuda != nullptr ? cuda->persistent_launches() : 0;
}

int64_t cuda_single_pass_attention_launches(const Backend& backend) {
  const auto* cuda = dynamic_cast<const CudaBackend*>(&backend);
  return cuda != nullptr ? cuda->single_pass_attention_launches() : 0;
}

int64_t cuda_sampled_graph_steps(const Backend& backend) {
  const auto* cuda = dynamic_cast<const CudaBackend*>(&backend);
  return cuda != nullptr ? cuda->sampled_graph_steps() : 0;
}

int64_t cuda_device_id_steps(const Backend& backend) {
  const auto* cuda = dynamic_cast<const CudaBackend*>(&backend);
  return cuda != nullptr ? cuda->device_id_steps() : 0;
}

int64_t cuda_screened_steps(const Backend& backend) {
  const auto* cuda = dynamic_cast<const CudaBackend*>(&backend);
  return cuda != nullptr ? cuda->screened_steps() : 0;
}

Result<int64_t> cuda_screen_rescored_ids(const Backend& backend) {
  const auto* cuda = dynamic_cast<const CudaBackend*>(&backend);
  return cuda != nullptr ? cuda->screen_rescored_ids() : Result<int64_t>(int64_t(0));
}

std::string cuda_device_name(const Backend& backend) {
  const auto* cuda = dynamic_cast<const CudaBackend*>(&backend);
  return cuda != nullptr ? cuda->device_name() : std::string();
}

Result<std::unique_ptr<Backend>> make_cuda_backend(const CudaBackendOptions& options) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return fail(Errc::cuda_error, std::string("no usable CUDA device: cudaGetDeviceCount failed: ") +
                                      cudaGetErrorString(err) + " (" + cudaGetErrorName(err) + ")");
  }
  if (count == 0) return fail(Errc::cuda_error, "no usable CUDA device: the driver reports none");
  if (options.device < 0 || options.device >= count)
    return fail(Errc::invalid_argument, "CUDA device " + std::to_string(options.device) + " does not exist (" +
                                            std::to_string(count) + " present)");
  if (options.gemm_workspace_bytes < (size_t(1) << 20))
    return fail(Errc::invalid_argument, "CudaBackendOptions::gemm_workspace_bytes must be at least 1 MiB");
  if (options.max_graph_batch < 0) return fail(Errc::invalid_argument, "CudaBackendOptions::max_graph_batch must be >= 0");
  if (options.attention_single_pass_heads < -1 || options.attention_single_pass_heads == 3 ||
      options.attention_single_pass_heads > 4)
    return fail(Errc::invalid_argument, "CudaBackendOptions::attention_single_pass_heads must be -1, 0, 1, 2 or 4");
  if (options.attention_single_pass_max_seqs < 0)
    return fail(Errc::invalid_argument, "CudaBackendOptions::attention_single_pass_max_seqs must be >= 0");
  if (options.gemv_passes_min_n < 0 || options.gemv_passes_max_row_bytes < 0)
    return fail(Errc::invalid_argument, "CudaBackendOptions::gemv_passes_min_n and gemv_passes_max_row_bytes must be >= 0");
  if (options.gemv_early_chunks < 1 || options.gemv_early_chunks > 8)
    return fail(Errc::invalid_argument, "CudaBackendOptions::gemv_early_chunks must be 1 to 8");
  for (int32_t u : {options.gemv_unroll_add, options.gemv_unroll_silu, options.gemv_unroll_rope, options.gemv_unroll_plain})
    if (u != 2 && u != 4 && u != 8)
      return fail(Errc::invalid_argument, "CudaBackendOptions::gemv_unroll_* must be 2, 4 or 8");
  if (options.persistent_max_in_flight < 0)
    return fail(Errc::invalid_argument, "CudaBackendOptions::persistent_max_in_flight must be >= 0");
  PHOTON_CUDA_TRY(cudaSetDevice(options.device));
  cudaDeviceProp prop{};
  PHOTON_CUDA_TRY(cudaGetDeviceProperties(&prop, options.device));
  if (prop.major < 8)
    return fail(Errc::unsupported, std::string("CUDA device ") + prop.name + " has compute capability " +
                                       std::to_string(prop.major) + "." + std::to_string(prop.minor) +
                                       "; photon's kernels need 8.0 or newer");
  cudaStream_t stream = nullptr;
  PHOTON_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CudaBackendOptions opts = options;
  if (const char* e = std::getenv("PHOTON_CUDA_SKINNY"); e != nullptr && e[0] != '\0')
    opts.skinny_decode_matmul = e[0] == '1';
  if (const char* e = std::getenv("PHOTON_CUDA_GEMV_EARLY"); e != nullptr) {
    using E = CudaBackendOptions::GemvEarly;
    switch (e[0]) {
      case '0': opts.gemv_early_weights = E::none; break;
      case '1': opts.gemv_early_weights = E::all; break;
      case 'd': opts.gemv_early_weights = E::narrow_n; break;
      case 'h': opts.gemv_early_weights = E::wide_n; break;
      default: break;
    }
  }
  override_from_env("PHOTON_CUDA_GEMV_EARLY_HALF_KS", opts.gemv_early_half_ks);
  if (const char* e = std::getenv("PHOTON_CUDA_GEMV_EARLY_CHUNKS"); e != nullptr && e[0] >= '1' && e[0] <= '8' && e[1] == '\0')
    opts.gemv_early_chunks = e[0] - '0';
  if (const char* e = std::getenv("PHOTON_CUDA_GEMV_UNROLL"); e != nullptr && std::strlen(e) == 4) {
    int32_t* u[4] = {&opts.gemv_unroll_add, &opts.gemv_unroll_silu, &opts.gemv_unroll_rope, &opts.gemv_unroll_plain};
    for (int i = 0; i < 4; ++i)
      if (e[i] == '2' || e[i] == '4' || e[i] == '8') *u[i] = e[i] - '0';
  }
  if (const char* e = std::getenv("PHOTON_CUDA_GEMV_PASSES_MIN_N"); e != nullptr && e[0] >= '0' && e[0] <= '9')
    opts.gemv_passes_min_n = std::atoll(e);
  if (const char* e = std::getenv("PHOTON_CUDA_GEMV_PASSES_MAX_ROW_BYTES"); e != nullptr && e[0] >= '0' && e[0] <= '9')
    opts.gemv_passes_max_row_bytes = std::atoll(e);
  if (const char* e = std::getenv("PHOTON_CUDA_ROPE_IN_ATTENTION"); e != nullptr && (e[0] == '0' || e[0] == '1'))
    opts.rope_in_decode_attention =
        e[0] == '1' ? CudaBackendOptions::RopeInAttention::always : CudaBackendOptions::RopeInAttention::never;
  if (const char* e = std::getenv("PHOTON_CUDA_PERSISTENT_INFLIGHT"); e != nullptr && e[0] >= '0' && e[0] <= '9')
    opts.persistent_max_in_flight = int32_t(std::atoi(e));
  override_from_env("PHOTON_CUDA_SAMPLE_IN_GRAPH", opts.sample_in_graph);
  override_from_env("PHOTON_CUDA_PLAN_COPY_STREAM", opts.plan_copy_stream);
  override_from_env("PHOTON_CUDA_LM_HEAD_SCREEN", opts.lm_head_screen);
  if (const char* e = std::getenv("PHOTON_CUDA_SCREEN_PREFETCH_ROWS"); e != nullptr && e[0] >= '0' && e[0] <= '9')
    opts.screen_prefetch_rows = int32_t(std::atoi(e));
  override_from_env("PHOTON_CUDA_LOG_ALLOCATIONS", opts.log_allocations);
  override_from_env("PHOTON_CUDA_GEMV_NORM", opts.gemv_norm);
  override_from_env("PHOTON_CUDA_GEMV_STAGE_X", opts.gemv_stage_x);
  override_from_env("PHOTON_CUDA_GEMV_ROPE", opts.gemv_rope);
  override_from_env("PHOTON_CUDA_PRELOAD", opts.preload_kernels);
  override_from_env("PHOTON_CUDA_INT8_GEMV", opts.int8_one_row_gemv);
  if (const char* e = std::getenv("PHOTON_CUDA_INT8_SKINNY_M1"); e != nullptr && e[0] >= '0' && e[0] <= '2' && e[1] == '\0')
    opts.int8_skinny_one_row = e[0] - '0';
  if (const char* e = std::getenv("PHOTON_CUDA_ATTN_ONE"); e != nullptr && (e[0] == '0' || e[0] == '1' || e[0] == '2' || e[0] == '4'))
    opts.attention_single_pass_heads = e[0] - '0';
  if (const char* e = std::getenv("PHOTON_CUDA_ATTN_ONE_MAX_SEQS"); e != nullptr && e[0] >= '0' && e[0] <= '9')
    opts.attention_single_pass_max_seqs = int32_t(std::atoi(e));
  auto backend = std::make_unique<CudaBackend>(opts, prop, stream);
  PHOTON_TRY(backend->init());
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace photon
