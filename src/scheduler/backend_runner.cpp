#include "scheduler/backend_runner.hpp"

#include "core/try.hpp"

namespace photon {

Result<void> BackendModelRunner::execute(const BatchPlan& plan, const SampleBatch& batch, const SampleOutput& out) {
  // run_step stages the plan and runs the forward pass; the CUDA backend
  // replays decode-only steps from per-batch-size CUDA graphs.
  PHOTON_ASSIGN_OR_RETURN(Tensor logits,
                          backend_->run_step(plan, [this](const StepPlanView& view) { return model_->forward(view); }));
  if (batch.num_rows == 0) return {};  // a step of prefill chunks only: nothing to sample
  return backend_->sample(logits, batch, out);
}

}  // namespace photon
