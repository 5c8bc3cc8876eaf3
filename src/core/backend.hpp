// Backend: the ops a forward pass is written against, implemented once per
// device (src/core/cpu_backend.* is the numerical oracle; src/cuda implements
// the same contract for NVIDIA GPUs).
//
// The model (src/model) calls these ops in order over one ragged batch; a
// backend is chosen at run time, once per engine, and every call is at op
// granularity (never per element). All tensors passed in are this backend's
// memory. Ops are asynchronous with respect to the host where the backend is
// (CUDA: one stream); copy_to_host and synchronize are the only waits.
//
// Shapes: T tokens, S sequences, R logits rows, H hidden, V vocab,
// nq / nkv query / KV heads, hd head dim, I intermediate size.
// Activations use activation_dtype() (CPU f32, CUDA bf16) unless an op says
// otherwise; accumulation is always fp32.
//
// Thread-compatibility: one thread at a time (the engine's stepping thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <span>
#include <string_view>

#include "core/batch_plan.hpp"
#include "core/sampling.hpp"
#include "core/sync_step_queue.hpp"
#include "core/tensor.hpp"
#include "photon/result.hpp"

namespace photon {

class Backend;

// Owning handle to backend memory; move-only; frees through its backend,
// which must outlive it.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Backend* owner, void* ptr, size_t bytes) noexcept : owner_(owner), ptr_(ptr), bytes_(bytes) {}
  Buffer(Buffer&& o) noexcept { swap(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    Buffer tmp(std::move(o));
    swap(tmp);
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  void* data() const noexcept { return ptr_; }
  size_t size() const noexcept { return bytes_; }
  // A view of the first numel * dtype bytes (caller guarantees they fit).
  Tensor tensor(DType dtype, std::initializer_list<int64_t> dims) const { return Tensor::of(ptr_, dtype, dims); }

 private:
  void swap(Buffer& o) noexcept {
    std::swap(owner_, o.owner_);
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
  }
  Backend* owner_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Device memory held through a backend's allocator (bytes; all 0 when the
// backend does not track them).
struct MemoryStats {
  size_t in_use = 0;       // held by live Buffers
  size_t peak_in_use = 0;  // the most ever held at once
  size_t cached = 0;       // freed by Buffers, kept for reuse
};

// One layer's paged KV cache: k and v each [num_blocks, block_size, nkv, hd],
// dtype kv_dtype() of the backend. A "row" is one slot's nkv * hd values.
// Block b's rows start block_stride rows after block b - 1's (0 = packed:
// block_size), so one allocation can hold every layer of a block together
// (docs/kv-cache-layout.md); block_stride is 0 or >= block_size. The views
// do not own memory; the model that made them does.
struct KvLayer {
  Tensor k;
  Tensor v;
  int64_t block_stride = 0;  // rows between consecutive blocks of k (and of v); 0 = block_size

  int64_t block_stride_rows() const noexcept { return block_stride != 0 ? block_stride : k.dim(1); }
  // The row of slot `slot` (= block * block_size + offset) from k's (and v's) base.
  int64_t row_of_slot(int64_t slot) const noexcept {
    const int64_t bs = k.dim(1);
    return slot / bs * block_stride_rows() + slot % bs;
  }
};

// One pre-norm decoder layer (Llama / Qwen3) in a backend's layout. Linear
// weights are [N, K] in the backend's dtype, or i8 [N, K] with scales
// [N, ceil(K / group)] when loaded with int8 weights.
struct DecoderLayerWeights {
  Weight qkv;                  // [(nq + 2 nkv) * hd, H]: q_proj rows, then k_proj, then v_proj
  Weight o;                    // [H, nq * hd]
  Weight gate_up;              // [2 I, H]: gate_proj rows, then up_proj
  Weight down;                 // [H, I]
  Tensor input_norm;           // [H]
  Tensor post_attention_norm;  // [H]
  Tensor q_norm;               // [hd] (Qwen3), empty otherwise
  Tensor k_norm;               // [hd] (Qwen3), empty otherwise
};

// Activation scratch of decoder_layers over T tokens (activation dtype; the
// caller owns it). A backend that runs the layers as one kernel may leave
// any of it unwritten.
struct DecoderScratch {
  Tensor h;        // [T, H]: the normed input of the next matmul
  Tensor tmp;      // [T, H]: matmul_add's scratch
  Tensor qkv;      // [T, (nq + 2 nkv) * hd]
  Tensor q;        // [T, nq, hd]: q after q-norm and RoPE
  Tensor attn;     // [T, nq, hd]
  Tensor gate_up;  // [T, 2 I]: matmul_silu's scratch
  Tensor mlp;      // [T, I]
};

struct DecoderLayersParams {
  Tensor inv_freq;         // [hd / 2] f32: RoPE inverse frequencies
  float eps = 1e-6f;       // RMSNorm epsilon (hidden norms and q/k norms)
  float attn_scale = 1.f;  // softmax scale (head_dim^-0.5)
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string_view name() const noexcept = 0;
  virtual DType activation_dtype() const noexcept = 0;
  virtual DType kv_dtype() const noexcept = 0;
  // The dtype this backend keeps a checkpoint weight of dtype `stored` in.
  virtual DType weight_dtype(DType stored) const noexcept = 0;
  // Whether matmul runs i8 weights with group-wise f32 scales (Weight, core/
  // tensor.hpp) of any positive group size. A backend that cannot keeps this
  // default, and loading a model with int8 weights on it fails with
  // unsupported (ModelLoadOptions::int8_weights).
  virtual bool supports_int8_weights() const noexcept { return false; }
  // Whether this backend's attention serves heads of head_dim elements: unsupported, saying which
  // it serves, otherwise. Model::load and Model::create_random ask before any weight is placed, and
  // Engine::open's "auto" backend choice asks before it picks a GPU. Default: any.
  virtual Result<void> check_head_dim(int32_t head_dim) const {
    (void)head_dim;
    return {};
  }

  // ---- memory -------------------------------------------------------------
  virtual Result<Buffer> allocate(size_t bytes) = 0;
  virtual Result<void> copy_to_device(void* dst, const void* host_src, size_t bytes) = 0;
  virtual Result<void> copy_to_host(void* host_dst, const void* src, size_t bytes) = 0;
  virtual Result<void> fill_zero(Tensor t) = 0;
  virtual Result<void> synchronize() = 0;
  // Bytes of device memory free now (CPU: available physical memory).
  virtual size_t free_memory() const noexcept = 0;

  virtual MemoryStats memory_stats() const noexcept { return {}; }

  // Copies the plan's arrays into fixed backend buffers (grown when needed).
  // The view stays valid until the next stage_plan.
  virtual Result<StepPlanView> stage_plan(const BatchPlan& plan) = 0;

  // One step's forward pass, written by the caller against the ops below.
  using StepForward = std::function<Result<Tensor>(const StepPlanView&)>;
  // Stages `plan`, runs forward over it and returns the first
  // plan.num_logits() rows of forward's result. A backend may instead record
  // forward once per padded batch shape and replay the recording on later
  // steps (CUDA: graphs for decode-only steps, padded to a batch-size
  // bucket), so forward must issue the same ops on the same buffers whenever
  // it sees the same staged shape, and keep the logits of the plan's rows at
  // the top of its result. The default stages and calls forward every time.
  virtual Result<Tensor> run_step(const BatchPlan& plan, const StepForward& forward) {
    Result<StepPlanView> view = stage_plan(plan);
    if (!view) return Unexpected{std::move(view).error()};
    Result<Tensor> out = forward(*view);
    if (!out || out->rank == 0) return out;
    return out->rows(0, plan.num_logits());
  }

  // run_step, then sample() over its logits (nothing when batch.num_rows is 0); outputs land in
  // host memory and this call waits for them. A backend may fold the sampling into its recording
  // of the step (CUDA: the one-pass sampler at the end of a decode graph, for batches it serves),
  // with the same results and errors as the separate calls. batch.num_rows must be 0 or
  // plan.num_logits().
  virtual Result<void> run_step_sampled(const BatchPlan& plan, const StepForward& forward, const SampleBatch& batch,
                                        const SampleOutput& out);

  // ---- overlapped steps (docs/step-overlap.md, stage 2) -----------------------------------------
  // run_step_sampled in two halves, so that a caller can issue step N + 1 before it reads step N's
  // tokens and do its own work (scheduling, detokenizing) while the device runs.
  // launch_step_sampled issues the step; finish_step_sampled waits for the oldest launched step not
  // yet finished and leaves its outputs in the `out` it was launched with. `out`'s arrays must stay
  // valid until then; plan and batch may be reused as soon as the launch returns.
  // prev_rows: empty, or plan.num_tokens() entries; token t with prev_rows[t] = r >= 0 takes as its
  // input the id that row r of the step launched just before this one samples (that step must not
  // be finished yet; plan.input_ids[t] is ignored). This is how a decode row names a token the
  // host has not seen.
  // At most two steps are launched and not finished. Errors: a launch error (invalid_argument for
  // misuse, the checks of run_step_sampled) leaves nothing launched; an error of the step's run
  // comes from its finish_step_sampled, as does every error when the previous step failed and
  // this one needed its ids.
  // The default runs the whole step inside the launch (run_step_sampled) and keeps its status for
  // the finish; overlaps_steps() says whether a backend does better (CUDA: the launch returns
  // once the step is queued on its stream).
  virtual Result<void> launch_step_sampled(const BatchPlan& plan, const StepForward& forward, const SampleBatch& batch,
                                           const SampleOutput& out, std::span<const int32_t> prev_rows = {});
  virtual Result<void> finish_step_sampled();
  virtual bool overlaps_steps() const noexcept { return false; }
  // Whether launch_step_sampled(plan, ..., batch, ...) would return before the step has run (CUDA:
  // a decode-only step of a sampled graph). A caller that overlaps launches such steps before it
  // finishes the one before, and finishes the one before first otherwise.
  virtual bool launch_returns_early(const BatchPlan& plan, const SampleBatch& batch) const {
    (void)plan;
    (void)batch;
    return false;
  }

  // ---- ops ----------------------------------------------------------------
  // out[T,H] = table.w[ids[t], :]  (ids staged: plan.input_ids)
  virtual Result<void> embed(Tensor out, const Weight& table, const StepPlanView& plan) = 0;
  // out[r,:] = x[r,:] * rsqrt(mean(x[r,:]^2) + eps) * w, rows = x.numel() / w.numel(); out may alias x.
  virtual Result<void> rmsnorm(Tensor out, Tensor x, Tensor w, float eps) = 0;
  // out[M,N] = x[M,K] @ W.w[N,K]^T; out dtype f32 or activation_dtype().
  virtual Result<void> matmul(Tensor out, Tensor x, const Weight& W) = 0;
  // From packed qkv[T, (nq + 2 nkv) * hd] (q heads, then k heads, then v heads):
  // optional per-head RMSNorm of q and k (q_norm / k_norm [hd], empty = none),
  // rotate-half RoPE of q and k at plan.positions with inv_freq[hd/2] (f32,
  // attention scaling already folded in by the caller if any), q written to
  // q_out[T, nq, hd], k and v written into the cache at plan.slot_mapping.
  virtual Result<void> rope_qkv(Tensor q_out, Tensor qkv, const StepPlanView& plan, Tensor inv_freq,
                                Tensor q_norm, Tensor k_norm, float eps, KvLayer cache) = 0;
  // out[T, nq, hd]: causal attention of each sequence's new queries over its
  // cached keys/values (positions 0 .. context_len-1 of its block table).
  // Query token t of sequence s sits at plan.positions[t] and sees keys 0..pos.
  virtual Result<void> attention(Tensor out, Tensor q, KvLayer cache, const StepPlanView& plan, float scale) = 0;
  // rope_qkv(q, qkv, ...) then attention(out, q, ...): one op so that a backend can fuse them
  // (CUDA: decode steps rotate q and the new K/V rows inside the attention kernel). q [T, nq, hd]
  // is scratch: the default leaves the roped q there, a fused backend may leave it untouched. The
  // cache is written as rope_qkv writes it; out matches the pair within the activation dtype's
  // rounding.
  virtual Result<void> rope_attention(Tensor out, Tensor q, Tensor qkv, const StepPlanView& plan, Tensor inv_freq,
                                      Tensor q_norm, Tensor k_norm, float eps, KvLayer cache, float scale);
  // out[T, I] = silu(gate_up[T, :I]) * gate_up[T, I:]
  virtual Result<void> silu_mul(Tensor out, Tensor gate_up) = 0;
  // out[R, H] = x[plan.logits_rows[r], :]
  virtual Result<void> gather_logit_rows(Tensor out, Tensor x, const StepPlanView& plan) = 0;

  // ---- fused ops ------------------------------------------------------------
  // residual[M,N] += x[M,K] @ W.w^T: a block's output projection added into
  // the residual stream, so a backend can fold the add into the product's
  // epilogue (CUDA: the one-row GEMV, cuBLASLt's beta = 1, the int8 GEMV).
  // The result matches matmul then add within the activation dtype's
  // rounding. scratch[M,N] receives the product where the backend forms it
  // (CPU) or is left untouched (CUDA); residual must not overlap x or scratch.
  virtual Result<void> matmul_add(Tensor residual, Tensor x, const Weight& W, Tensor scratch) = 0;
  // out[M,I] = silu(x @ W.w[:I]^T) * (x @ W.w[I:]^T) for W.w = [gate; up]
  // [2I, K]: the MLP's gate/up product and SwiGLU in one op, so a backend can
  // apply the activation in the product's epilogue (CUDA: the one-row GEMV).
  // The result matches matmul into scratch then silu_mul(out, scratch) within
  // the activation dtype's rounding. scratch[M,2I] receives the product where
  // the backend forms it (CPU) or may be left untouched (CUDA); out must not
  // overlap x or scratch.
  virtual Result<void> matmul_silu(Tensor out, Tensor x, const Weight& W, Tensor scratch) = 0;

  // out[M,N] = rmsnorm(x[M,K], norm_w, eps) @ W.w^T: a norm and the product that reads it, so
  // that a backend can norm the rows inside the product (CUDA: the one-row GEMV). h[M,K] is the
  // normed rows' place: the default (rmsnorm into h, then matmul) writes it, a fused backend may
  // leave it untouched. The result matches the pair within the activation dtype's rounding; out
  // must not overlap x or h.
  virtual Result<void> rmsnorm_matmul(Tensor out, Tensor x, Tensor norm_w, float eps, const Weight& W, Tensor h);
  // The LM head of a decode-only step: rmsnorm_matmul(logits, x, norm_w, eps, W, h). `screen` (q.w
  // empty: none) is a group-wise int8 copy of W's values (ModelLoadOptions::lm_head_screen, made
  // at the group lm_head_screen_group() asks for): a backend may, inside its own sampled steps
  // whose draws need only ids and their logprobs, leave the screen's product in logits and draw
  // exactly through its error bounds (docs/lm-head-screen.md: CUDA's sampled one-row graphs). The
  // logits a caller can read are always W's. The default ignores the screen.
  virtual Result<void> rmsnorm_lm_head(Tensor logits, Tensor x, Tensor norm_w, float eps, const Weight& W,
                                       const LmHeadScreen& screen, Tensor h) {
    (void)screen;
    return rmsnorm_matmul(logits, x, norm_w, eps, W, h);
  }
  // The int8 group size of the LM head screen this backend would use for a [vocab, hidden] head
  // (> 0; the loader makes the copy only then), or 0: none.
  virtual int32_t lm_head_screen_group(int64_t vocab, int64_t hidden) const noexcept {
    (void)vocab;
    (void)hidden;
    return 0;
  }
  // matmul_silu(out, rmsnorm(x, norm_w, eps), W, scratch) with h as in rmsnorm_matmul.
  virtual Result<void> rmsnorm_matmul_silu(Tensor out, Tensor x, Tensor norm_w, float eps, const Weight& W, Tensor h,
                                           Tensor scratch);
  // A decoder layer's attention up to its output rows: rmsnorm_matmul(qkv, x, norm_w, eps, W, h),
  // then rope_attention(out, q, qkv, plan, inv_freq, q_norm, k_norm, eps, cache, scale). One op so
  // that a backend can do rope_qkv's work in the product's epilogue (CUDA: one-token decode steps
  // without q/k norms). h, qkv and q are scratch: the default writes them, a fused backend may leave
  // any of them untouched. The cache is written as rope_qkv writes it; out matches the sequence
  // within the activation dtype's rounding.
  virtual Result<void> rmsnorm_qkv_attention(Tensor out, Tensor x, Tensor norm_w, const Weight& W, Tensor h,
                                             Tensor qkv, Tensor q, const StepPlanView& plan, Tensor inv_freq,
                                             Tensor q_norm, Tensor k_norm, float eps, KvLayer cache, float scale);

  // The decoder layers of one step over the residual stream x[T, H] (in and
  // out), layers[l] reading and writing caches[l]. Per layer:
  //   attn = rmsnorm_qkv_attention(x, input_norm, Wqkv): qkv = rmsnorm_matmul(x, input_norm, Wqkv)
  //     (h = rmsnorm(x); qkv = h @ Wqkv^T), then rope_attention(qkv) (rope_qkv: K/V into the
  //     cache, then attention); x += attn @ Wo^T;
  //   mlp = rmsnorm_matmul_silu(x, post_attention_norm, Wgate_up); x += mlp @ Wdown^T.
  // The default issues exactly those ops (src/core/backend.cpp), so it is every backend's
  // twin; a backend may override it for steps it can run faster as a whole (CUDA: one
  // persistent kernel for single-sequence decode steps), with the same bf16 rounding points.
  virtual Result<void> decoder_layers(Tensor x, std::span<const DecoderLayerWeights> layers,
                                      std::span<const KvLayer> caches, const DecoderScratch& scratch,
                                      const StepPlanView& plan, const DecoderLayersParams& params);

  // ---- sampling -----------------------------------------------------------
  // Samples one token per row of logits[R, V] (f32; may be overwritten as
  // scratch) as docs/sampling.md specifies. Outputs land in host memory; this
  // call waits for them.
  virtual Result<void> sample(Tensor logits, const SampleBatch& batch, const SampleOutput& out) = 0;

 protected:
  friend class Buffer;
  // Frees memory returned by allocate(); never fails, accepts nullptr.
  virtual void release(void* ptr) noexcept = 0;

 private:
  SyncStepQueue sync_steps_;  // the default launch_step_sampled's steps
};

inline Buffer::~Buffer() {
  if (owner_ != nullptr) owner_->release(ptr_);
}

}  // namespace photon
