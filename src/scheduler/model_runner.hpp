// ModelRunner: the device half of one engine step (forward pass + sampling),
// behind one call so that the engine core can be driven by the real
// Backend + Model (BackendModelRunner) or by a test double.
//
// Ownership: the engine core owns its runner.
// Thread-compatibility: one thread at a time (the engine's stepping thread).
#pragma once

#include <span>

#include "core/batch_plan.hpp"
#include "core/sampling.hpp"
#include "core/sync_step_queue.hpp"
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

  // execute in two halves (Backend::launch_step_sampled and finish_step_sampled say how), so that
  // the engine can schedule step N + 1 while step N runs: launch issues the step, finish waits
  // for the oldest launched step's outputs (in the `out` of its launch). prev_rows: empty, or one
  // entry per plan token; r >= 0 makes the token's input the id that row r of the step launched
  // just before (still unfinished) samples. The default runs execute inside the launch.
  virtual Result<void> launch(const BatchPlan& plan, const SampleBatch& batch, const SampleOutput& out,
                              std::span<const int32_t> prev_rows) {
    return sync_steps_.launch(plan, prev_rows, out.token_ids, batch.num_rows,
                              [&](const BatchPlan& p) { return execute(p, batch, out); });
  }
  virtual Result<void> finish() { return sync_steps_.finish(); }
  // Whether launch returns before a step has run, for some steps (the CUDA backend), and for this
  // one (Backend::overlaps_steps, launch_returns_early).
  virtual bool overlaps_steps() const noexcept { return false; }
  virtual bool launch_returns_early(const BatchPlan& plan, const SampleBatch& batch) const {
    (void)plan;
    (void)batch;
    return false;
  }

 private:
  SyncStepQueue sync_steps_;  // the default launch's steps
};

}  // namespace photon
