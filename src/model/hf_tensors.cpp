#include "model/hf_tensors.hpp"

#include <fmt/format.h>

#include "model/config.hpp"

namespace photon {

std::string layer_tensor_name(int32_t layer, std::string_view suffix) {
  return fmt::format("model.layers.{}.{}", layer, suffix);
}

std::vector<ExpectedTensor> expected_tensors(const ModelConfig& c) {
  const int64_t V = c.vocab_size, H = c.hidden_size, I = c.intermediate_size, hd = c.head_dim;
  std::vector<ExpectedTensor> out;
  out.push_back({"model.embed_tokens.weight", {V, H}, TensorRole::embedding});
  for (int32_t l = 0; l < c.num_layers; ++l) {
    auto add = [&](std::string_view suffix, std::vector<int64_t> shape, TensorRole role) {
      out.push_back({layer_tensor_name(l, suffix), std::move(shape), role});
    };
    add("input_layernorm.weight", {H}, TensorRole::norm);
    add("self_attn.q_proj.weight", {c.q_dim(), H}, TensorRole::linear);
    add("self_attn.k_proj.weight", {c.kv_dim(), H}, TensorRole::linear);
    add("self_attn.v_proj.weight", {c.kv_dim(), H}, TensorRole::linear);
    add("self_attn.o_proj.weight", {H, c.q_dim()}, TensorRole::linear);
    if (c.qk_norm) {
      add("self_attn.q_norm.weight", {hd}, TensorRole::qk_norm);
      add("self_attn.k_norm.weight", {hd}, TensorRole::qk_norm);
    }
    add("post_attention_layernorm.weight", {H}, TensorRole::norm);
    add("mlp.gate_proj.weight", {I, H}, TensorRole::linear);
    add("mlp.up_proj.weight", {I, H}, TensorRole::linear);
    add("mlp.down_proj.weight", {H, I}, TensorRole::linear);
  }
  out.push_back({"model.norm.weight", {H}, TensorRole::norm});
  if (!c.tie_word_embeddings) out.push_back({"lm_head.weight", {V, H}, TensorRole::lm_head});
  return out;
}

}  // namespace photon
