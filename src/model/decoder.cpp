#include "model/decoder.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/try.hpp"
#include "model/decoder_weights.hpp"

namespace photon {

namespace {

// Activation buffers of one forward pass, sized for `tokens` scheduled
// tokens and `rows` logits rows (activation dtype; logits f32).
struct Workspace {
  int32_t tokens = 0;
  int32_t rows = 0;
  Buffer x, h, tmp;  // [T, H] residual stream, normed input of the next matmul, matmul output
  Buffer qkv;        // [T, (nq + 2 nkv) hd]
  Buffer q;          // [T, nq, hd] after q-norm and RoPE
  Buffer attn;       // [T, nq, hd]
  Buffer gate_up;    // [T, 2 I]
  Buffer mlp;        // [T, I]
  Buffer rows_h;     // [R, H]
  Buffer logits;     // [R, V] f32
};

class DecoderModel final : public Model {
 public:
  DecoderModel(const ModelConfig& config, Backend& backend, DecoderWeights weights)
      : config_(config), backend_(backend), w_(std::move(weights)) {}

  const ModelConfig& config() const noexcept override { return config_; }

  size_t kv_bytes_per_block(int32_t block_size) const noexcept override {
    return size_t(config_.num_layers) * 2 * size_t(block_size) * size_t(config_.kv_dim()) *
           dtype_size(backend_.kv_dtype());
  }

  Result<void> init_kv_cache(int32_t num_blocks, int32_t block_size) override {
    if (num_blocks < 1 || block_size < 1)
      return fail(Errc::invalid_argument,
                  fmt::format("KV cache needs num_blocks >= 1 and block_size >= 1 (got {}, {})", num_blocks, block_size));
    kv_layers_.clear();
    kv_buffer_ = Buffer();
    const size_t bytes = kv_bytes_per_block(block_size) * size_t(num_blocks);
    PHOTON_ASSIGN_OR_RETURN(kv_buffer_, backend_.allocate(bytes));
    // Block-major (docs/kv-cache-layout.md): [num_blocks][layer][k | v][block_size][nkv][hd], so the
    // blocks a sequence holds are contiguous runs whatever the pool size, and layer l's k (v) rows of
    // block b sit b * 2 * L * block_size rows after its base.
    const DType dt = backend_.kv_dtype();
    // One layer's k (or v) of one block.
    const size_t part_bytes = size_t(block_size) * size_t(config_.kv_dim()) * dtype_size(dt);
    auto* base = static_cast<char*>(kv_buffer_.data());
    const std::initializer_list<int64_t> dims = {num_blocks, block_size, config_.num_kv_heads, config_.head_dim};
    for (int32_t l = 0; l < config_.num_layers; ++l) {
      KvLayer layer;
      layer.k = Tensor::of(base + (2 * size_t(l)) * part_bytes, dt, dims);
      layer.v = Tensor::of(base + (2 * size_t(l) + 1) * part_bytes, dt, dims);
      layer.block_stride = 2 * int64_t(config_.num_layers) * block_size;
      kv_layers_.push_back(layer);
    }
    PHOTON_TRY(backend_.fill_zero(Tensor::of(kv_buffer_.data(), DType::i8, {int64_t(bytes)})));
    return {};
  }

  Result<void> reserve(int32_t max_tokens, int32_t max_logit_rows) override {
    if (max_tokens < 1 || max_logit_rows < 0)
      return fail(Errc::invalid_argument, fmt::format("reserve({}, {}): need max_tokens >= 1, max_logit_rows >= 0",
                                                      max_tokens, max_logit_rows));
    if (max_tokens <= ws_.tokens && max_logit_rows <= ws_.rows) return {};
    const int64_t T = std::max(max_tokens, ws_.tokens), R = std::max({max_logit_rows, ws_.rows, 1});
    const size_t a = dtype_size(backend_.activation_dtype());
    const ModelConfig& c = config_;
    Workspace ws;
    PHOTON_ASSIGN_OR_RETURN(ws.x, backend_.allocate(size_t(T) * size_t(c.hidden_size) * a));
    PHOTON_ASSIGN_OR_RETURN(ws.h, backend_.allocate(size_t(T) * size_t(c.hidden_size) * a));
    PHOTON_ASSIGN_OR_RETURN(ws.tmp, backend_.allocate(size_t(T) * size_t(c.hidden_size) * a));
    PHOTON_ASSIGN_OR_RETURN(ws.qkv, backend_.allocate(size_t(T) * size_t(c.qkv_dim()) * a));
    PHOTON_ASSIGN_OR_RETURN(ws.q, backend_.allocate(size_t(T) * size_t(c.q_dim()) * a));
    PHOTON_ASSIGN_OR_RETURN(ws.attn, backend_.allocate(size_t(T) * size_t(c.q_dim()) * a));
    PHOTON_ASSIGN_OR_RETURN(ws.gate_up, backend_.allocate(size_t(T) * 2 * size_t(c.intermediate_size) * a));
    PHOTON_ASSIGN_OR_RETURN(ws.mlp, backend_.allocate(size_t(T) * size_t(c.intermediate_size) * a));
    PHOTON_ASSIGN_OR_RETURN(ws.rows_h, backend_.allocate(size_t(R) * size_t(c.hidden_size) * a));
    PHOTON_ASSIGN_OR_RETURN(ws.logits, backend_.allocate(size_t(R) * size_t(c.vocab_size) * sizeof(float)));
    ws.tokens = int32_t(T);
    ws.rows = int32_t(R);
    ws_ = std::move(ws);
    return {};
  }

  Result<Tensor> forward(const StepPlanView& plan) override {
    const ModelConfig& c = config_;
    if (kv_layers_.empty()) return fail(Errc::invalid_state, "forward before init_kv_cache");
    if (plan.num_tokens < 1 || plan.num_seqs < 1)
      return fail(Errc::invalid_argument, fmt::format("forward over an empty batch ({} tokens, {} sequences)",
                                                      plan.num_tokens, plan.num_seqs));
    if (plan.max_context_len > c.max_position_embeddings)
      return fail(Errc::capacity_exceeded, fmt::format("a sequence reaches {} tokens; the model's "
                                                       "max_position_embeddings is {}",
                                                       plan.max_context_len, c.max_position_embeddings));
    PHOTON_TRY(reserve(plan.num_tokens, plan.num_logits));

    const int64_t T = plan.num_tokens, R = plan.num_logits, H = c.hidden_size, I = c.intermediate_size;
    const DType act = backend_.activation_dtype();
    const Tensor x = ws_.x.tensor(act, {T, H});
    const Tensor h = ws_.h.tensor(act, {T, H});
    const Tensor tmp = ws_.tmp.tensor(act, {T, H});
    const Tensor qkv = ws_.qkv.tensor(act, {T, c.qkv_dim()});
    const Tensor q = ws_.q.tensor(act, {T, c.num_heads, c.head_dim});
    const Tensor attn = ws_.attn.tensor(act, {T, c.num_heads, c.head_dim});
    const Tensor gate_up = ws_.gate_up.tensor(act, {T, 2 * I});
    const Tensor mlp = ws_.mlp.tensor(act, {T, I});
    const float eps = c.rms_norm_eps;
    // HF: scaling = head_dim ** -0.5
    const float scale = float(1.0 / std::sqrt(double(c.head_dim)));

    // x: the residual stream; the layers (Backend::decoder_layers) add each block's output
    // projection into it; h: the normed input of the LM head (rmsnorm_matmul may norm inside the
    // product and leave h unwritten).
    PHOTON_TRY(backend_.embed(x, w_.embed, plan));
    const DecoderScratch scratch{h, tmp, qkv, q, attn, gate_up, mlp};
    PHOTON_TRY(backend_.decoder_layers(x, w_.layers, kv_layers_, scratch, plan, {w_.inv_freq, eps, scale}));
    const Tensor logits = ws_.logits.tensor(DType::f32, {R, c.vocab_size});
    if (R == 0) return logits;
    if (plan.logits_of_every_token && R == T) {  // decode-only steps: the LM head reads every row
      PHOTON_TRY(backend_.rmsnorm_lm_head(logits, x, w_.final_norm, eps, w_.lm_head, w_.lm_head_screen, h));
      return logits;
    }
    PHOTON_TRY(backend_.rmsnorm(h, x, w_.final_norm, eps));
    const Tensor rows_h = ws_.rows_h.tensor(act, {R, H});
    PHOTON_TRY(backend_.gather_logit_rows(rows_h, h, plan));
    PHOTON_TRY(backend_.matmul(logits, rows_h, w_.lm_head));
    return logits;
  }

 private:
  ModelConfig config_;
  Backend& backend_;
  DecoderWeights w_;
  Buffer kv_buffer_;              // all layers' K and V
  std::vector<KvLayer> kv_layers_;  // [num_layers] views into kv_buffer_
  Workspace ws_;
};

}  // namespace

Result<std::unique_ptr<Model>> make_decoder_model(const ModelConfig& config, WeightSource& weights, Backend& backend,
                                                  const ModelLoadOptions& options) {
  PHOTON_TRY(config.validate());
  PHOTON_ASSIGN_OR_RETURN(DecoderWeights w, load_decoder_weights(config, weights, backend, options));
  return std::unique_ptr<Model>(std::make_unique<DecoderModel>(config, backend, std::move(w)));
}

}  // namespace photon
