// The decoder-only transformer shared by Llama 3.x and Qwen3 (Qwen3 adds a
// per-head RMSNorm of q and k before RoPE), written against Backend ops.
// The forward pass is docs/architecture.md's "One engine step", step 4.
#pragma once

#include <memory>

#include "model/model.hpp"
#include "model/weight_source.hpp"

namespace photon {

// The ModelFactory of both registered architectures: loads the weights of
// `config` from `weights` into `backend` (see decoder_weights.hpp).
Result<std::unique_ptr<Model>> make_decoder_model(const ModelConfig& config, WeightSource& weights, Backend& backend,
                                                  const ModelLoadOptions& options);

}  // namespace photon
