#include "model/decoder_weights.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <initializer_list>
#include <string>
#include <unordered_map>

#include "core/convert.hpp"
#include "core/quantize.hpp"
#include "core/try.hpp"
#include "model/hf_tensors.hpp"

namespace photon {

namespace {

// Fetches tensors by name, checks them against the config's expected
// shapes, and uploads them (row-stacked when several) in the backend's dtype.
class Uploader {
 public:
  Uploader(const ModelConfig& config, WeightSource& source, Backend& backend, std::vector<Buffer>& storage)
      : source_(source), backend_(backend), storage_(storage) {
    for (auto& e : expected_tensors(config)) expected_.emplace(e.name, std::move(e));
  }

  // The named tensors stacked along dim 0 (all share the trailing dims).
  Result<Tensor> stacked(std::initializer_list<std::string> names) {
    int64_t rows = 0;
    int64_t row_elems = 1;
    bool one_d = false;
    for (const auto& n : names) {
      PHOTON_ASSIGN_OR_RETURN(const ExpectedTensor* e, expected(n));
      rows += e->shape[0];
      one_d = e->shape.size() == 1;
      row_elems = one_d ? 1 : e->shape[1];
    }
    DType to = DType::f32;
    size_t done_elems = 0;
    for (const auto& n : names) {
      PHOTON_ASSIGN_OR_RETURN(HostTensor h, fetch(n));
      if (done_elems == 0) {
        to = backend_.weight_dtype(h.dtype);
        staging_.resize(size_t(rows * row_elems) * dtype_size(to));
      }
      const size_t count = size_t(h.numel());
      if (!convert_elements(h.data, h.dtype, staging_.data() + done_elems * dtype_size(to), to, count))
        return fail(Errc::unsupported, fmt::format("{}: tensor '{}': backend {} cannot hold {} weights as {}",
                                                   h.origin, h.name, backend_.name(), dtype_name(h.dtype),
                                                   dtype_name(to)));
      done_elems += count;
    }
    const size_t bytes = staging_.size();
    PHOTON_ASSIGN_OR_RETURN(Buffer buf, backend_.allocate(bytes));
    PHOTON_TRY(backend_.copy_to_device(buf.data(), staging_.data(), bytes));
    Tensor t = one_d ? buf.tensor(to, {rows}) : buf.tensor(to, {rows, row_elems});
    storage_.push_back(std::move(buf));
    return t;
  }

  Result<Tensor> single(const std::string& name) { return stacked({name}); }

  // The embedding table or the LM head: always in the backend's weight dtype.
  Result<Weight> table(const std::string& name) {
    Weight w;
    PHOTON_ASSIGN_OR_RETURN(w.w, stacked({name}));
    return w;
  }

  // A linear layer's [N, K] weight (several stacked along N): in the
  // backend's weight dtype, or quantized to int8 groups of int8_group
  // (> 0) along K when that is set (on `pool`'s threads when not null).
  Result<Weight> linear(std::initializer_list<std::string> names, int32_t int8_group, ThreadPool* pool) {
    if (int8_group > 0) return quantized(names, int8_group, pool);
    Weight w;
    PHOTON_ASSIGN_OR_RETURN(w.w, stacked(names));
    return w;
  }

  // What quantized() quantizes: the stored values, or (weight_dtype) the values the backend holds
  // when it keeps the tensor in its own dtype (Backend::weight_dtype of the stored one).
  enum class Rounding { stored, weight_dtype };
  // i8 [rows, K] and f32 scales [rows, ceil(K / group)], quantized row by row
  // (through one f32 row of scratch per thread), in chunks of rows on `pool`
  // when there is one. row_abs (not null): [rows] each row's sum of |value|
  // (summed in double, rounded up to f32).
  Result<Weight> quantized(std::initializer_list<std::string> names, int32_t group, ThreadPool* pool,
                           Rounding rounding = Rounding::stored, std::vector<float>* row_abs = nullptr) {
    int64_t rows = 0, K = 0;
    for (const auto& n : names) {
      PHOTON_ASSIGN_OR_RETURN(const ExpectedTensor* e, expected(n));
      if (e->shape.size() != 2) return fail(Errc::internal, "decoder loader quantizes the 1-D tensor " + n);
      rows += e->shape[0];
      K = e->shape[1];
    }
    const int64_t groups = int8_group_count(K, group);
    if (row_abs != nullptr) row_abs->assign(size_t(rows), 0.f);
    staging_.resize(size_t(rows * K));
    scales_.resize(size_t(rows * groups));
    const int32_t threads = pool != nullptr ? pool->max_concurrency() : 1;
    rows_.resize(size_t(threads));
    for (auto& row : rows_) row.resize(size_t(K));
    int64_t r0 = 0;  // the first stacked row of the tensor being quantized
    for (const auto& n : names) {
      PHOTON_ASSIGN_OR_RETURN(HostTensor h, fetch(n));
      const size_t row_bytes = size_t(K) * dtype_size(h.dtype);
      // The lowest row that fails (an unconvertible dtype fails on every row; a non-finite value
      // on its own), so the message does not depend on how the rows were split.
      std::atomic<int64_t> bad_convert{h.shape[0]}, bad_value{h.shape[0]};
      auto lower = [](std::atomic<int64_t>& at, int64_t i) {
        for (int64_t cur = at.load(); i < cur && !at.compare_exchange_weak(cur, i);) {
        }
      };
      const DType held = rounding == Rounding::weight_dtype ? backend_.weight_dtype(h.dtype) : DType::f32;
      auto quantize_rows = [&](int32_t worker, int64_t begin, int64_t end) {
        float* row = rows_[size_t(worker)].data();
        std::vector<uint8_t> narrow(held == DType::f32 ? 0 : size_t(K) * dtype_size(held));
        for (int64_t i = begin; i < end; ++i) {
          if (!convert_elements(h.data + size_t(i) * row_bytes, h.dtype, row, DType::f32, size_t(K)) ||
              (held != DType::f32 && (!convert_elements(row, DType::f32, narrow.data(), held, size_t(K)) ||
                                      !convert_elements(narrow.data(), held, row, DType::f32, size_t(K))))) {
            lower(bad_convert, i);
            return;
          }
          if (row_abs != nullptr) {
            double sum = 0;
            for (int64_t k = 0; k < K; ++k) sum += std::abs(double(row[k]));
            float f = float(sum);
            if (double(f) < sum) f = std::nextafter(f, std::numeric_limits<float>::infinity());
            (*row_abs)[size_t(r0 + i)] = f;
          }
          auto* q = reinterpret_cast<int8_t*>(staging_.data()) + (r0 + i) * K;
          if (!quantize_row_int8(row, K, group, q, scales_.data() + (r0 + i) * groups)) lower(bad_value, i);
        }
      };
      if (pool != nullptr) pool->parallel_for_indexed(0, h.shape[0], quantize_rows);
      else quantize_rows(0, 0, h.shape[0]);
      if (bad_convert.load() < h.shape[0])
        return fail(Errc::internal, fmt::format("{}: tensor '{}': cannot widen {} to f32", h.origin, h.name,
                                                dtype_name(h.dtype)));
      if (bad_value.load() < h.shape[0])
        return fail(Errc::invalid_argument,
                    fmt::format("{}: tensor '{}' row {} holds a non-finite value (NaN or inf); int8 weight "
                                "quantization needs finite weights",
                                h.origin, h.name, bad_value.load()));
      r0 += h.shape[0];
    }
    Weight w;
    PHOTON_ASSIGN_OR_RETURN(w.w, upload(staging_.data(), DType::i8, rows, K));
    PHOTON_ASSIGN_OR_RETURN(w.scales, upload(scales_.data(), DType::f32, rows, groups));
    w.group_size = group;
    return w;
  }

  // A [rows, cols] tensor of `dtype` copied from host memory into a new backend buffer.
  Result<Tensor> upload(const void* host, DType dtype, int64_t rows, int64_t cols) {
    const size_t bytes = size_t(rows * cols) * dtype_size(dtype);
    PHOTON_ASSIGN_OR_RETURN(Buffer buf, backend_.allocate(bytes));
    PHOTON_TRY(backend_.copy_to_device(buf.data(), host, bytes));
    Tensor t = buf.tensor(dtype, {rows, cols});
    storage_.push_back(std::move(buf));
    return t;
  }

 private:
  Result<const ExpectedTensor*> expected(const std::string& name) const {
    auto it = expected_.find(name);
    if (it == expected_.end()) return fail(Errc::internal, "decoder loader asks for unlisted tensor " + name);
    return &it->second;
  }

  Result<HostTensor> fetch(const std::string& name) {
    PHOTON_ASSIGN_OR_RETURN(const ExpectedTensor* e, expected(name));
    PHOTON_ASSIGN_OR_RETURN(HostTensor h, source_.get(name));
    if (h.shape != e->shape)
      return fail(Errc::shape_mismatch, fmt::format("{}: tensor '{}' has shape {}, config.json implies [{}]", h.origin,
                                                    name, h.shape_string(), fmt::join(e->shape, ", ")));
    if (!is_float_dtype(h.dtype))
      return fail(Errc::shape_mismatch, fmt::format("{}: tensor '{}' has dtype {}; weights must be F32, BF16 or F16",
                                                    h.origin, name, dtype_name(h.dtype)));
    return h;
  }

  WeightSource& source_;
  Backend& backend_;
  std::vector<Buffer>& storage_;
  std::unordered_map<std::string, ExpectedTensor> expected_;
  std::vector<uint8_t> staging_;
  std::vector<float> scales_;  // int8 scales being built
  std::vector<std::vector<float>> rows_;  // per thread: one weight row widened to f32
};

// An int8 request the backend cannot serve, or a bad group size.
Result<void> check_int8_options(const ModelLoadOptions& o, const Backend& backend) {
  if (!o.int8_weights) return {};
  if (o.int8_group_size <= 0)
    return fail(Errc::invalid_argument,
                fmt::format("int8 weights: group size {} must be positive", o.int8_group_size));
  if (!backend.supports_int8_weights())
    return fail(Errc::unsupported, fmt::format("int8 weights: backend {} cannot run int8 matmuls; load the "
                                               "checkpoint's dtype or use the cpu backend",
                                               backend.name()));
  return {};
}

}  // namespace

Result<DecoderWeights> load_decoder_weights(const ModelConfig& c, WeightSource& source, Backend& backend,
                                            const ModelLoadOptions& options) {
  PHOTON_TRY(check_int8_options(options, backend));
  const int32_t group = options.int8_weights ? options.int8_group_size : 0;  // 0: not quantized
  DecoderWeights w;
  Uploader up(c, source, backend, w.storage);
  // The embedding is a row gather, not a matmul, and the LM head (the
  // embedding itself when tied) maps straight to the logits, where sampling
  // is most sensitive: both keep their dtype.
  PHOTON_ASSIGN_OR_RETURN(w.embed, up.table("model.embed_tokens.weight"));
  w.layers.resize(size_t(c.num_layers));
  for (int32_t l = 0; l < c.num_layers; ++l) {
    DecoderLayerWeights& L = w.layers[size_t(l)];
    auto name = [l](std::string_view suffix) { return layer_tensor_name(l, suffix); };
    PHOTON_ASSIGN_OR_RETURN(L.input_norm, up.single(name("input_layernorm.weight")));
    PHOTON_ASSIGN_OR_RETURN(L.qkv, up.linear({name("self_attn.q_proj.weight"), name("self_attn.k_proj.weight"),
                                              name("self_attn.v_proj.weight")},
                                             group, options.pool));
    PHOTON_ASSIGN_OR_RETURN(L.o, up.linear({name("self_attn.o_proj.weight")}, group, options.pool));
    if (c.qk_norm) {
      PHOTON_ASSIGN_OR_RETURN(L.q_norm, up.single(name("self_attn.q_norm.weight")));
      PHOTON_ASSIGN_OR_RETURN(L.k_norm, up.single(name("self_attn.k_norm.weight")));
    }
    PHOTON_ASSIGN_OR_RETURN(L.post_attention_norm, up.single(name("post_attention_layernorm.weight")));
    PHOTON_ASSIGN_OR_RETURN(
        L.gate_up, up.linear({name("mlp.gate_proj.weight"), name("mlp.up_proj.weight")}, group, options.pool));
    PHOTON_ASSIGN_OR_RETURN(L.down, up.linear({name("mlp.down_proj.weight")}, group, options.pool));
  }
  PHOTON_ASSIGN_OR_RETURN(w.final_norm, up.single("model.norm.weight"));
  const std::string head_name = c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
  if (group > 0 && options.int8_lm_head) {
    PHOTON_ASSIGN_OR_RETURN(w.lm_head, up.linear({head_name}, group, options.pool));
  } else if (c.tie_word_embeddings) {
    w.lm_head = w.embed;
  } else {
    PHOTON_ASSIGN_OR_RETURN(w.lm_head, up.table(head_name));
  }
  if (w.lm_head.w.dtype != DType::i8 && options.lm_head_screen) {
    if (const int32_t screen_group = backend.lm_head_screen_group(c.vocab_size, c.hidden_size); screen_group > 0) {
      // The values the head holds (the backend's dtype), so that the screen's bound covers them.
      std::vector<float> row_abs;
      PHOTON_ASSIGN_OR_RETURN(w.lm_head_screen.q, up.quantized({head_name}, screen_group, options.pool,
                                                               Uploader::Rounding::weight_dtype, &row_abs));
      PHOTON_ASSIGN_OR_RETURN(w.lm_head_screen.row_abs,
                              up.upload(row_abs.data(), DType::f32, int64_t(row_abs.size()), 1));
      w.lm_head_screen.row_abs = w.lm_head_screen.row_abs.view({int64_t(row_abs.size())});
    }
  }

  const std::vector<float> inv_freq = rope_inv_freq(c.rope, c.head_dim);
  const size_t bytes = inv_freq.size() * sizeof(float);
  PHOTON_ASSIGN_OR_RETURN(Buffer buf, backend.allocate(bytes));
  PHOTON_TRY(backend.copy_to_device(buf.data(), inv_freq.data(), bytes));
  w.inv_freq = buf.tensor(DType::f32, {int64_t(inv_freq.size())});
  w.storage.push_back(std::move(buf));
  return w;
}

}  // namespace photon
