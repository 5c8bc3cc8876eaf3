// The Hugging Face tensor names and shapes a Llama / Qwen3 decoder reads
// (nn.Linear weights are [out_features, in_features]). The one place these
// names and shapes are spelled; the loader, the random-weight source and the
// tests all use it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace photon {

struct ModelConfig;

enum class TensorRole : uint8_t {
  embedding,  // model.embed_tokens.weight [V, H]
  lm_head,    // lm_head.weight [V, H] (untied models only)
  norm,       // RMSNorm weights [H]
  qk_norm,    // Qwen3 per-head q_norm / k_norm [hd]
  linear,     // projection weights [out, in]
};

struct ExpectedTensor {
  std::string name;
  std::vector<int64_t> shape;
  TensorRole role;
};

// "model.layers.<layer>.<suffix>"
std::string layer_tensor_name(int32_t layer, std::string_view suffix);

// Every tensor the decoder reads for `config`, in checkpoint order: the
// embedding, per layer the attention (q, k, v, o, [q_norm, k_norm]), MLP
// (gate, up, down) and norms, the final norm, and lm_head unless tied.
std::vector<ExpectedTensor> expected_tensors(const ModelConfig& config);

}  // namespace photon
