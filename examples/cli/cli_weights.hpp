// The weight flags the model subcommands share (generate, batch, bench):
// --int8, --int8-lm-head and --int8-group, and what they mean for the engine
// (EngineOptions::weights) and for a direct model load (ModelLoadOptions).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "model/model.hpp"

namespace photon::cli {

struct WeightFlags {
  bool int8 = false;          // --int8: the linear layers quantized to group-wise int8 at load
  bool int8_lm_head = false;  // --int8-lm-head: --int8 with the LM head quantized too
  int32_t group = 128;        // --int8-group: input features per scale
  bool any_int8() const { return int8 || int8_lm_head; }
};

// Adds the flags to `app`, writing into `flags` (which must outlive parsing).
void add_weight_flags(CLI::App& app, WeightFlags& flags);

// EngineOptions::weights for the flags: "auto", "int8" or "int8-lm-head".
std::string engine_weights(const WeightFlags& flags);

// The int8 fields of `load` (int8_weights, int8_lm_head, int8_group_size) set from the flags.
void set_load_weights(const WeightFlags& flags, ModelLoadOptions& load);

}  // namespace photon::cli
