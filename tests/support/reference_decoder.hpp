// An independent, deliberately naive float64 forward pass of Hugging Face's
// LlamaForCausalLM / Qwen3ForCausalLM for one sequence, straight from the
// checkpoint's tensors: the oracle for checkpoints the shared goldens do not
// cover (odd vocab sizes, MQA, 3+ layers, untied Llama, tied Qwen3).
// It shares nothing with src/model but ModelConfig, rope_inv_freq (tested on
// its own against the formulas) and the WeightSource that reads the tensors.
#pragma once

#include <cmath>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/convert.hpp"
#include "model/config.hpp"
#include "model/hf_tensors.hpp"
#include "model/weight_source.hpp"

namespace photon::test {

class ReferenceDecoder {
 public:
  ReferenceDecoder(const ModelConfig& c, WeightSource& source) : c_(c) {
    for (const auto& e : expected_tensors(c)) {
      auto h = source.get(e.name);
      if (!h) throw std::runtime_error(h.error().message);
      std::vector<float> f(size_t(h->numel()));
      if (!convert_elements(h->data, h->dtype, f.data(), DType::f32, f.size()))
        throw std::runtime_error("reference decoder: non-float tensor " + e.name);
      w_[e.name] = std::vector<double>(f.begin(), f.end());
    }
  }

  // logits[t][v] at every position of `tokens` (positions 0..T-1).
  std::vector<std::vector<double>> forward(const std::vector<int32_t>& tokens) const {
    const int64_t T = int64_t(tokens.size()), H = c_.hidden_size, hd = c_.head_dim, nq = c_.num_heads,
                  nkv = c_.num_kv_heads, I = c_.intermediate_size, V = c_.vocab_size;
    const auto& emb = w_.at("model.embed_tokens.weight");
    std::vector<std::vector<double>> x(static_cast<size_t>(T), std::vector<double>(static_cast<size_t>(H)));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < H; ++i) x[size_t(t)][size_t(i)] = emb[size_t(tokens[size_t(t)] * H + i)];
    const std::vector<float> inv_freq = rope_inv_freq(c_.rope, c_.head_dim);
    for (int32_t l = 0; l < c_.num_layers; ++l) {
      auto W = [&](const char* s) -> const std::vector<double>& { return w_.at(layer_tensor_name(l, s)); };
      const size_t rows = static_cast<size_t>(T);
      std::vector<std::vector<double>> q(rows), k(rows), v(rows);
      for (int64_t t = 0; t < T; ++t) {
        const auto h = rmsnorm(x[size_t(t)], W("input_layernorm.weight"));
        q[size_t(t)] = linear(W("self_attn.q_proj.weight"), h, nq * hd);
        k[size_t(t)] = linear(W("self_attn.k_proj.weight"), h, nkv * hd);
        v[size_t(t)] = linear(W("self_attn.v_proj.weight"), h, nkv * hd);
        for (int64_t head = 0; head < nq; ++head) {
          if (c_.qk_norm) norm_head(q[size_t(t)], head, W("self_attn.q_norm.weight"));
          rotate(q[size_t(t)], head, t, inv_freq);
        }
        for (int64_t head = 0; head < nkv; ++head) {
          if (c_.qk_norm) norm_head(k[size_t(t)], head, W("self_attn.k_norm.weight"));
          rotate(k[size_t(t)], head, t, inv_freq);
        }
      }
      const double scale = 1.0 / std::sqrt(double(hd));
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> attn(size_t(nq * hd), 0.0);
        for (int64_t head = 0; head < nq; ++head) {
          const int64_t kvh = head / (nq / nkv);
          std::vector<double> s(static_cast<size_t>(t + 1));
          double mx = -INFINITY;
          for (int64_t j = 0; j <= t; ++j) {
            double dot = 0;
            for (int64_t d = 0; d < hd; ++d) dot += q[size_t(t)][size_t(head * hd + d)] * k[size_t(j)][size_t(kvh * hd + d)];
            s[size_t(j)] = dot * scale;
            mx = std::max(mx, s[size_t(j)]);
          }
          double sum = 0;
          for (auto& e : s) sum += (e = std::exp(e - mx));
          for (int64_t j = 0; j <= t; ++j)
            for (int64_t d = 0; d < hd; ++d)
              attn[size_t(head * hd + d)] += s[size_t(j)] / sum * v[size_t(j)][size_t(kvh * hd + d)];
        }
        const auto o = linear(W("self_attn.o_proj.weight"), attn, H);
        for (int64_t i = 0; i < H; ++i) x[size_t(t)][size_t(i)] += o[size_t(i)];
        const auto h = rmsnorm(x[size_t(t)], W("post_attention_layernorm.weight"));
        const auto g = linear(W("mlp.gate_proj.weight"), h, I);
        const auto u = linear(W("mlp.up_proj.weight"), h, I);
        std::vector<double> m(static_cast<size_t>(I));
        for (int64_t i = 0; i < I; ++i) m[size_t(i)] = g[size_t(i)] / (1.0 + std::exp(-g[size_t(i)])) * u[size_t(i)];
        const auto d = linear(W("mlp.down_proj.weight"), m, H);
        for (int64_t i = 0; i < H; ++i) x[size_t(t)][size_t(i)] += d[size_t(i)];
      }
    }
    const auto& head = c_.tie_word_embeddings ? emb : w_.at("lm_head.weight");
    std::vector<std::vector<double>> logits(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) logits[size_t(t)] = linear(head, rmsnorm(x[size_t(t)], w_.at("model.norm.weight")), V);
    return logits;
  }

 private:
  // W [out, in] @ x [in] -> [out]
  static std::vector<double> linear(const std::vector<double>& W, const std::vector<double>& x, int64_t out) {
    const size_t in = x.size();
    std::vector<double> y(size_t(out), 0.0);
    for (size_t o = 0; o < size_t(out); ++o)
      for (size_t i = 0; i < in; ++i) y[o] += W[o * in + i] * x[i];
    return y;
  }
  std::vector<double> rmsnorm(const std::vector<double>& x, const std::vector<double>& w) const {
    double ss = 0;
    for (double e : x) ss += e * e;
    const double r = 1.0 / std::sqrt(ss / double(x.size()) + double(c_.rms_norm_eps));
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = w[i] * x[i] * r;
    return y;
  }
  void norm_head(std::vector<double>& v, int64_t head, const std::vector<double>& w) const {
    const int64_t hd = c_.head_dim;
    std::vector<double> part(v.begin() + head * hd, v.begin() + (head + 1) * hd);
    part = rmsnorm(part, w);
    std::copy(part.begin(), part.end(), v.begin() + head * hd);
  }
  // HF rotate_half: dim i pairs with dim i + hd/2.
  void rotate(std::vector<double>& v, int64_t head, int64_t pos, const std::vector<float>& inv_freq) const {
    const int64_t half = c_.head_dim / 2;
    double* p = v.data() + head * c_.head_dim;
    for (int64_t i = 0; i < half; ++i) {
      const double a = double(pos) * double(inv_freq[size_t(i)]);
      const double x1 = p[i], x2 = p[i + half];
      p[i] = x1 * std::cos(a) - x2 * std::sin(a);
      p[i + half] = x2 * std::cos(a) + x1 * std::sin(a);
    }
  }

  ModelConfig c_;
  std::unordered_map<std::string, std::vector<double>> w_;
};

}  // namespace photon::test
