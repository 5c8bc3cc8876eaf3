// What the model subcommands of the CLI share: loading a model folder on the
// CPU backend (for commands below the engine, e.g. logits) and reading --tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "model/model.hpp"
#include "photon/result.hpp"

namespace photon::cli {

struct LoadedModel {
  std::unique_ptr<Backend> backend;  // declared first: outlives the model
  std::unique_ptr<Model> model;
};

// The folder's model on the CPU backend with `threads` worker threads
// (< 0: one per hardware thread besides the caller).
Result<LoadedModel> load_model(const std::string& dir, int32_t threads);

// "1,2,3" -> ids, each checked against the vocabulary; out_of_range / invalid_argument.
Result<std::vector<int32_t>> parse_token_list(const std::string& text, int32_t vocab_size);

// capacity_exceeded when `total` positions do not fit max_position_embeddings.
Result<void> check_positions(const ModelConfig& config, int64_t total, const std::string& what);

// Logits of every position of `tokens` ([T][V], f32), one forward pass.
Result<std::vector<std::vector<float>>> prompt_logits(LoadedModel& m, std::span<const int32_t> tokens);

}  // namespace photon::cli
