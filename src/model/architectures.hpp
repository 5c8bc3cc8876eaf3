// The architecture registry: each supported Hugging Face "architectures"
// name, the config defaults transformers applies for it, and the factory that
// builds its Model. One table (architectures.cpp); read-only, no global
// mutable state.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "photon/result.hpp"

namespace photon {

class Backend;
class Model;
class WeightSource;
struct ModelConfig;
struct ModelLoadOptions;

// Builds a model of `config` from the tensors of `weights` in `backend`'s memory.
using ModelFactory = Result<std::unique_ptr<Model>> (*)(const ModelConfig& config, WeightSource& weights,
                                                       Backend& backend, const ModelLoadOptions& options);

struct Architecture {
  std::string_view hf_name;  // config.json "architectures" entry
  bool qk_norm;              // per-head q/k RMSNorm (Qwen3)
  // transformers' defaults for keys config.json may omit:
  double default_rms_norm_eps;
  int64_t default_max_position_embeddings;
  int64_t default_bos_token_id;  // -1: none
  int64_t default_eos_token_id;  // -1: none
  ModelFactory factory;
};

// nullptr when `hf_name` is not supported.
const Architecture* find_architecture(std::string_view hf_name) noexcept;
// "LlamaForCausalLM, Qwen3ForCausalLM" for messages.
std::string_view supported_architectures() noexcept;

}  // namespace photon
