// ModelConfig: the architecture hyper-parameters of a decoder-only model,
// read from a Hugging Face config.json (LlamaForCausalLM, Qwen3ForCausalLM).
//
// Accepted forms: transformers v4 (`rope_theta` + `rope_scaling` null or
// {"rope_type"|"type": "default"|"llama3", ...}) and v5 (`rope_parameters`
// holding rope_type, rope_theta and the scaling factors). Keys that
// transformers defaults are defaulted the same way (num_key_value_heads =
// num_attention_heads, head_dim = hidden_size / num_attention_heads,
// rms_norm_eps 1e-6, rope_theta 10000, tie_word_embeddings false, ...); the
// shape keys have no default. Errors name the file and the key:
// missing_config_key, invalid_config (wrong type or range), unknown_architecture,
// unsupported (a valid HF setting photon does not serve, e.g. attention_bias).
// Thread-compatibility: a plain value.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "photon/result.hpp"

namespace photon {

enum class RopeType : uint8_t { standard, llama3 };

struct RopeConfig {
  RopeType type = RopeType::standard;
  double theta = 10000.0;
  // llama3 scaling only (transformers' _compute_llama3_parameters):
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 0;
};

// The most decoder layers a config may declare: 32x the deepest released
// decoder (Llama 3.1 405B: 126). A config.json is read before its checkpoint,
// and the loader lists the expected tensors of every layer up front, so an
// unbounded count (2^31 - 1) would exhaust memory before any tensor is found
// missing.
inline constexpr int32_t kMaxDecoderLayers = 4096;

struct ModelConfig {
  std::string architecture;  // the registered "architectures" entry, e.g. "LlamaForCausalLM"
  int32_t vocab_size = 0;    // V
  int32_t hidden_size = 0;   // H
  int32_t intermediate_size = 0;  // I
  int32_t num_layers = 0;        // [1, kMaxDecoderLayers]
  int32_t num_heads = 0;     // nq
  int32_t num_kv_heads = 0;  // nkv (divides nq; 1 = MQA)
  int32_t head_dim = 0;      // hd (even; independent of H / nq)
  int32_t max_position_embeddings = 0;
  float rms_norm_eps = 1e-6f;
  RopeConfig rope;
  bool tie_word_embeddings = false;  // LM head = embedding table
  bool qk_norm = false;              // per-head RMSNorm of q and k before RoPE (Qwen3)
  std::vector<int32_t> eos_token_ids;  // may be empty
  int32_t bos_token_id = -1;           // -1 when absent

  int32_t q_dim() const noexcept { return num_heads * head_dim; }
  int32_t kv_dim() const noexcept { return num_kv_heads * head_dim; }
  int32_t qkv_dim() const noexcept { return q_dim() + 2 * kv_dim(); }

  // Parses config.json text; `source` names the file in messages.
  static Result<ModelConfig> parse(std::string_view json_text, std::string_view source);
  // Reads `<dir>/config.json` (file_not_found when absent).
  static Result<ModelConfig> load(const std::string& dir);

  // Range and consistency checks that parse applies; also for configs built
  // in code (Model::create_random). invalid_config naming the field.
  Result<void> validate() const;
};

// RoPE inverse frequencies inv_freq[head_dim / 2] exactly as transformers
// computes them (fp32 arithmetic, the same operation order): default
// 1 / theta^(2i/hd), or the llama3 piecewise rescaling of it.
std::vector<float> rope_inv_freq(const RopeConfig& rope, int32_t head_dim);

}  // namespace photon
