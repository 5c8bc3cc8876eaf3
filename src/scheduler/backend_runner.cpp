#include "scheduler/backend_runner.hpp"

#include "core/try.hpp"

namespace photon {

Result<void> BackendModelRunner::execute(const BatchPlan& plan, const SampleBatch& batch, const SampleOutput& out) {
  PHOTON_ASSIGN_OR_RETURN(const StepPlanView view, backend_->stage_plan(plan));
  PHOTON_ASSIGN_OR_RETURN(Tensor logits, model_->forward(view));
  if (batch.num_rows == 0) return {};  // a step of prefill chunks only: nothing to sample
  return backend_->sample(logits, batch, out);
}

}  // namespace photon
