#include "scheduler/backend_runner.hpp"

#include "core/try.hpp"

namespace photon {

Result<void> BackendModelRunner::execute(const BatchPlan& plan, const SampleBatch& batch, const SampleOutput& out) {
  // run_step_sampled stages the plan, runs the forward pass and samples; the CUDA backend replays
  // decode-only steps from per-batch-size CUDA graphs, most of them ending in the sampler.
  return backend_->run_step_sampled(plan, [this](const StepPlanView& view) { return model_->forward(view); }, batch,
                                    out);
}

Result<void> BackendModelRunner::launch(const BatchPlan& plan, const SampleBatch& batch, const SampleOutput& out,
                                        std::span<const int32_t> prev_rows) {
  return backend_->launch_step_sampled(
      plan, [this](const StepPlanView& view) { return model_->forward(view); }, batch, out, prev_rows);
}

}  // namespace photon
