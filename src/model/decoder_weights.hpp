// The weights of a Llama / Qwen3 decoder in a backend's layout, loaded once
// from a WeightSource: shapes and dtypes validated against the config, q/k/v
// fused into one projection and gate/up into another, every tensor converted
// to Backend::weight_dtype(stored dtype) (norm weights included) and copied
// into backend memory. Nothing reads the source after loading.
// With ModelLoadOptions::int8_weights the four linear weights of each layer
// (qkv, o, gate_up, down) are quantized instead (i8 + f32 group scales,
// core/quantize.hpp); the embedding and the LM head keep their dtype.
//
// Ownership: `storage` owns every tensor's memory (backend buffers); the
// struct is move-only and must not outlive the backend.
#pragma once

#include <vector>

#include "core/backend.hpp"
#include "model/config.hpp"
#include "model/model.hpp"
#include "model/weight_source.hpp"
#include "photon/result.hpp"

namespace photon {

// DecoderLayerWeights (one layer) is declared in core/backend.hpp.
struct DecoderWeights {
  Weight embed;       // [V, H]
  Weight lm_head;     // [V, H]; views the embedding's memory when tied
  // lm_head's values quantized for the backend's screened draws
  // (ModelLoadOptions::lm_head_screen, Backend::rmsnorm_lm_head); q.w empty: none.
  LmHeadScreen lm_head_screen;
  Tensor final_norm;  // [H]
  Tensor inv_freq;    // [hd / 2] f32: RoPE inverse frequencies (rope_inv_freq)
  std::vector<DecoderLayerWeights> layers;
  std::vector<Buffer> storage;
};

// Errors: missing_tensor / shape_mismatch naming the file and tensor, and
// the backend's allocation or copy errors; with options.int8_weights:
// unsupported (!backend.supports_int8_weights()), invalid_argument (group
// size <= 0, or a non-finite value in a tensor to quantize, named).
Result<DecoderWeights> load_decoder_weights(const ModelConfig& config, WeightSource& source, Backend& backend,
                                            const ModelLoadOptions& options = {});

}  // namespace photon
