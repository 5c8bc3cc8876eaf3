#include "model/decoder.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <optional>

#include "core/try.hpp"
#include "model/decoder_weights.hpp"

namespace photon {

namespace {

// Activation buffers of one forward pass, sized for `tokens` scheduled
// tokens and `rows` logits rows (activation dtype; logits f32). Either one
// buffer per tensor, each of `tokens` (or `rows`) rows, or, with
// ModelLoadOptions::pack_activations, one buffer from which every step carves
// its tensors back to back for its own token and row counts (StepTensors).
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
  Buffer packed;     // pack_activations: all of the above, packed_bytes(tokens, rows) bytes
};

// One step's views of the workspace, for T scheduled tokens and R logits rows.
struct StepTensors {
  Tensor x, h, tmp, qkv, q, attn, gate_up, mlp, rows_h, logits;
};

// Each packed tensor starts at a multiple of this many bytes (the alignment a
// device allocation guarantees).
constexpr size_t kPackedAlign = 256;
constexpr size_t packed_extent(size_t bytes) { return (bytes + kPackedAlign - 1) / kPackedAlign * kPackedAlign; }

class DecoderModel final : public Model {
 public:
  DecoderModel(const ModelConfig& config, Backend& backend, DecoderWeights weights, bool pack_activations)
      : config_(config), backend_(backend), w_(std::move(weights)), pack_activations_(pack_activations) {}

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
    Workspace ws;
    if (pack_activations_) {
      PHOTON_ASSIGN_OR_RETURN(ws.packed, backend_.allocate(packed_bytes(T, R)));
    } else {
      std::optional<Error> error;
      for_each_tensor(T, R, [&](auto, Buffer Workspace::*own, DType dt, std::initializer_list<int64_t> dims) {
        if (error) return;
        Result<Buffer> buffer = backend_.allocate(Tensor::of(nullptr, dt, dims).nbytes());
        if (buffer) ws.*own = std::move(*buffer);
        else error = std::move(buffer).error();
      });
      if (error) return fail(std::move(*error));
    }
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

    const int64_t T = plan.num_tokens, R = plan.num_logits;
    const StepTensors st = step_tensors(T, R);
    const Tensor& x = st.x;
    const Tensor& h = st.h;
    const float eps = c.rms_norm_eps;
    // HF: scaling = head_dim ** -0.5
    const float scale = float(1.0 / std::sqrt(double(c.head_dim)));

    // x: the residual stream; the layers (Backend::decoder_layers) add each block's output
    // projection into it; h: the normed input of the LM head (rmsnorm_matmul may norm inside the
    // product and leave h unwritten).
    PHOTON_TRY(backend_.embed(x, w_.embed, plan));
    const DecoderScratch scratch{h, st.tmp, st.qkv, st.q, st.attn, st.gate_up, st.mlp};
    PHOTON_TRY(backend_.decoder_layers(x, w_.layers, kv_layers_, scratch, plan, {w_.inv_freq, eps, scale}));
    const Tensor& logits = st.logits;
    if (R == 0) return logits;
    if (plan.logits_of_every_token && R == T) {  // decode-only steps: the LM head reads every row
      PHOTON_TRY(backend_.rmsnorm_lm_head(logits, x, w_.final_norm, eps, w_.lm_head, w_.lm_head_screen, h));
      return logits;
    }
    PHOTON_TRY(backend_.rmsnorm(h, x, w_.final_norm, eps));
    const Tensor& rows_h = st.rows_h;
    PHOTON_TRY(backend_.gather_logit_rows(rows_h, h, plan));
    PHOTON_TRY(backend_.matmul(logits, rows_h, w_.lm_head));
    return logits;
  }

 private:
  // The tensors of one step of T tokens and R logits rows, in the order they are packed.
  template <typename Visit>
  void for_each_tensor(int64_t T, int64_t R, Visit&& visit) const {
    const ModelConfig& c = config_;
    const DType act = backend_.activation_dtype();
    const int64_t H = c.hidden_size, I = c.intermediate_size;
    visit(&StepTensors::x, &Workspace::x, act, std::initializer_list<int64_t>{T, H});
    visit(&StepTensors::h, &Workspace::h, act, std::initializer_list<int64_t>{T, H});
    visit(&StepTensors::tmp, &Workspace::tmp, act, std::initializer_list<int64_t>{T, H});
    visit(&StepTensors::qkv, &Workspace::qkv, act, std::initializer_list<int64_t>{T, c.qkv_dim()});
    visit(&StepTensors::q, &Workspace::q, act, std::initializer_list<int64_t>{T, c.num_heads, c.head_dim});
    visit(&StepTensors::attn, &Workspace::attn, act, std::initializer_list<int64_t>{T, c.num_heads, c.head_dim});
    visit(&StepTensors::gate_up, &Workspace::gate_up, act, std::initializer_list<int64_t>{T, 2 * I});
    visit(&StepTensors::mlp, &Workspace::mlp, act, std::initializer_list<int64_t>{T, I});
    visit(&StepTensors::logits, &Workspace::logits, DType::f32, std::initializer_list<int64_t>{R, c.vocab_size});
    visit(&StepTensors::rows_h, &Workspace::rows_h, act, std::initializer_list<int64_t>{R, H});
  }

  // Bytes of the packed workspace for T tokens and R rows (non-decreasing in both, so a buffer for
  // the largest T and R holds every smaller step's tensors).
  size_t packed_bytes(int64_t T, int64_t R) const {
    size_t bytes = 0;
    for_each_tensor(T, R, [&](auto, auto, DType dt, std::initializer_list<int64_t> dims) {
      bytes += packed_extent(Tensor::of(nullptr, dt, dims).nbytes());
    });
    return bytes;
  }

  // Views of the workspace for a step of T <= ws_.tokens tokens and R <= ws_.rows rows: packed
  // back to back from the packed buffer's start (a one-token step's activations and its logits row
  // then lie within ~0.6 MB at Llama-3.2-1B's shape), or each at the start of its own buffer.
  StepTensors step_tensors(int64_t T, int64_t R) const {
    StepTensors st;
    char* const base = static_cast<char*>(ws_.packed.data());
    size_t offset = 0;
    for_each_tensor(T, R, [&](Tensor StepTensors::*field, Buffer Workspace::*own, DType dt,
                              std::initializer_list<int64_t> dims) {
      if (!pack_activations_) {
        st.*field = (ws_.*own).tensor(dt, dims);
        return;
      }
      st.*field = Tensor::of(base + offset, dt, dims);
      offset += packed_extent((st.*field).nbytes());
    });
    return st;
  }

  ModelConfig config_;
  Backend& backend_;
  DecoderWeights w_;
  bool pack_activations_;  // ModelLoadOptions::pack_activations
  Buffer kv_buffer_;              // all layers' K and V
  std::vector<KvLayer> kv_layers_;  // [num_layers] views into kv_buffer_
  Workspace ws_;
};

}  // namespace

Result<std::unique_ptr<Model>> make_decoder_model(const ModelConfig& config, WeightSource& weights, Backend& backend,
                                                  const ModelLoadOptions& options) {
  PHOTON_TRY(config.validate());
  PHOTON_ASSIGN_OR_RETURN(DecoderWeights w, load_decoder_weights(config, weights, backend, options));
  return std::unique_ptr<Model>(std::make_unique<DecoderModel>(config, backend, std::move(w), options.pack_activations));
}

}  // namespace photon
