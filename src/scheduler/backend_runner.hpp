// BackendModelRunner: the ModelRunner of a real engine: stage the plan on the
// backend and run the model's forward pass (Backend::run_step: CUDA graphs
// for decode steps on the CUDA backend), sample on the backend.
//
// Ownership: owns the backend and the model (the model is destroyed first).
// Thread-compatibility: one thread at a time (the engine's stepping thread).
#pragma once

#include <memory>

#include "core/backend.hpp"
#include "model/model.hpp"
#include "scheduler/model_runner.hpp"

namespace photon {

class BackendModelRunner final : public ModelRunner {
 public:
  BackendModelRunner(std::unique_ptr<Backend> backend, std::unique_ptr<Model> model) noexcept
      : backend_(std::move(backend)), model_(std::move(model)) {}
  ~BackendModelRunner() override { model_.reset(); }

  Result<void> execute(const BatchPlan& plan, const SampleBatch& batch, const SampleOutput& out) override;
  Result<void> launch(const BatchPlan& plan, const SampleBatch& batch, const SampleOutput& out,
                      std::span<const int32_t> prev_rows) override;
  Result<void> finish() override { return backend_->finish_step_sampled(); }
  bool overlaps_steps() const noexcept override { return backend_->overlaps_steps(); }
  bool launch_returns_early(const BatchPlan& plan, const SampleBatch& batch) const override {
    return backend_->launch_returns_early(plan, batch);
  }

  Backend& backend() noexcept { return *backend_; }
  Model& model() noexcept { return *model_; }

 private:
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;  // borrows *backend_
};

}  // namespace photon
