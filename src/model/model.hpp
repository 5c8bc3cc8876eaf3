// Model: a decoder-only transformer (Llama 3.x, Qwen3) loaded from a Hugging
// Face folder into one Backend's memory, with its paged KV cache.
//
// Ownership: the Model borrows the Backend (which must outlive it) and owns
// its weights, KV cache and activation workspace (all backend memory).
// Thread-compatibility: one thread at a time (the engine's stepping thread).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/backend.hpp"
#include "core/thread_pool.hpp"
#include "model/config.hpp"
#include "photon/result.hpp"

namespace photon {

struct ModelLoadOptions {
  // Quantize the linear layers (q/k/v, o, gate/up, down) to symmetric
  // group-wise int8 on the host while loading (core/quantize.hpp); the
  // embedding, the LM head and the norms keep the backend's dtype. Needs
  // Backend::supports_int8_weights() (else unsupported).
  bool int8_weights = false;
  // Consecutive input features (along K) sharing one scale, > 0 (else
  // invalid_argument); a K that it does not divide ends in a shorter group.
  int32_t int8_group_size = 128;
  // With int8_weights: the LM head too (its own int8 copy when tied: the embedding stays for the
  // row gather). Decode steps of up to 16 rows read half its bytes; larger batches dequantize it
  // to bf16 every step on CUDA (about 5 N K bytes against 2 N K), so it is opt-in.
  bool int8_lm_head = false;
  // An int8 copy of a bf16 LM head for the backend's screened draws (docs/lm-head-screen.md: the
  // drawn ids are the bf16 head's, logprobs within the int8 error bound), made only where the
  // backend uses one (Backend::lm_head_screen_group: CUDA) and the head is not int8 already.
  // Costs V * H * (1 + 4 / group) bytes of memory (Llama-3.2-1B: 270 MB).
  bool lm_head_screen = true;
  // One activation workspace from which every forward pass carves its tensors back to back for
  // its own token count, instead of one buffer per tensor sized for the largest step: a decode
  // step's activations and logits then share a few pages. Same values either way (a diagnostic of
  // where the workspaces land, docs/performance.md rows 117-118: it removes the single stream's
  // placement spread but measured level with the default, so it stays opt-in).
  bool pack_activations = false;
  // With int8_weights: the rows of each linear weight are quantized in chunks on this pool's
  // threads and the calling one (the same codes and scales as without it); create_random also
  // draws its values on it (the same values). Not owned; null: the calling thread alone.
  // Engine::open passes one of EngineOptions::threads for an int8 load.
  ThreadPool* pool = nullptr;
};

class Model {
 public:
  virtual ~Model() = default;

  // Reads config.json and *.safetensors of `dir`, validates them, and uploads
  // the weights in the backend's layout. The architecture registry picks the
  // implementation from config.json's "architectures".
  // Errors: ModelConfig::load's, Checkpoint::open's, then missing_tensor /
  // shape_mismatch naming the tensor, and the backend's allocation errors;
  // with options.int8_weights: unsupported (the backend cannot run int8
  // weights), invalid_argument (group size <= 0, a non-finite weight value).
  static Result<std::unique_ptr<Model>> load(const std::string& dir, Backend& backend,
                                             const ModelLoadOptions& options = {});

  // A model of `config`'s shapes with seeded random bf16 weights (linear
  // weights uniform in +-1/sqrt(in), norm weights in [0.9, 1.1]), for
  // benchmarks of real model shapes whose weights are not at hand. The same
  // (config, seed) always gives the same weights (see RandomSource).
  static Result<std::unique_ptr<Model>> create_random(const ModelConfig& config, Backend& backend, uint64_t seed,
                                                      const ModelLoadOptions& options = {});

  virtual const ModelConfig& config() const noexcept = 0;

  // Bytes one KV block of `block_size` tokens takes over all layers (K and V).
  virtual size_t kv_bytes_per_block(int32_t block_size) const noexcept = 0;
  // Allocates the paged KV cache: num_blocks blocks of block_size tokens per
  // layer. Replaces any previous cache.
  virtual Result<void> init_kv_cache(int32_t num_blocks, int32_t block_size) = 0;
  // Sizes the activation workspace for up to max_tokens scheduled tokens and
  // max_logit_rows logits rows per step (grows on demand in forward otherwise).
  virtual Result<void> reserve(int32_t max_tokens, int32_t max_logit_rows) = 0;

  // One forward pass over a staged ragged batch: writes K/V of the new tokens
  // into the cache and the logits of plan.logits_rows into logits [R, V] (f32,
  // backend memory). Returns the logits tensor (a view of the workspace,
  // valid until the next forward).
  virtual Result<Tensor> forward(const StepPlanView& plan) = 0;
};

}  // namespace photon
