// ModelRunner: the device half of one engine step (forward pass + sampling),
// behind one call so that the engine core can be driven by the real
// Backend + Model (BackendModelRunner) or by a test double.
//
// Ownership: the engine core owns its runner.
// Thread-compatibility: one thread at a time (the engine's stepping thread).
#pragma once

#include "core/batch_plan.hpp"
#include "core/sampling.hpp"
#include "photon/result.hpp"

namespace photon {

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  // Runs the model over `plan` (writing the new tokens' K/V into the cache)
  // and samples one token for each plan.logits_rows entry: batch.num_rows ==
  // plan.num_logits(), outputs in host memory. With no logits rows it only
  // runs the forward pass.
  virtual Result<void> execute(const BatchPlan& plan, const SampleBatch& batch, const SampleOutput& out) = 0;
};

}  // namespace photon
