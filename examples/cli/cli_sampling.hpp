// The sampling flags shared by the engine subcommands of the CLI
// (--temperature --top-k --top-p --min-p --seed --repetition-penalty
// --presence-penalty --frequency-penalty). Values are checked by the engine
// at submit (its error names the field).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>

#include "photon/engine.hpp"

namespace photon::cli {

struct SamplingFlags {
  SamplingOptions options;  // temperature 0 (greedy) unless --temperature is given
  int64_t seed = -1;        // -1: the engine picks one
};

// Adds the flags to `app`, writing into `flags` (which must outlive parsing).
void add_sampling_flags(CLI::App& app, SamplingFlags& flags);

// The options the flags describe.
SamplingOptions sampling_options(const SamplingFlags& flags);

}  // namespace photon::cli
