// SyncStepQueue: the two-halves step protocol (Backend::launch_step_sampled and
// finish_step_sampled, ModelRunner::launch and finish) for an implementation that runs the
// whole step inside its launch. It keeps each launched step's outcome until its finish, and takes
// a step's previous-row ids (BatchPlan::take_previous_ids) from the output of the step launched
// before it, which has already run.
// Ownership: holds views of the callers' out.token_ids, which must outlive their step's finish.
// Thread-compatibility: one thread at a time (the owner's).
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <utility>

#include "core/batch_plan.hpp"
#include "photon/result.hpp"

namespace photon {

class SyncStepQueue {
 public:
  // Steps launched and not finished at most (the protocol's limit).
  static constexpr size_t kMaxLaunched = 2;

  // Runs run(plan) — a Result<void>(const BatchPlan&) callable that executes the whole step and
  // writes `rows` ids at ids — over plan with prev_rows' ids taken, and keeps its outcome.
  // Errors (nothing launched): invalid_argument for two steps already launched, prev_rows naming
  // ids with no step launched, or prev_rows of the wrong size or naming rows the step before did
  // not sample. A run error, or a failed step before whose ids this one needed, is kept for finish().
  template <class Run>
  Result<void> launch(const BatchPlan& plan, std::span<const int32_t> prev_rows, const int32_t* ids, int32_t rows,
                      Run&& run) {
    if (launched_.size() >= kMaxLaunched)
      return fail(Errc::invalid_argument, "launch step: two steps are launched and not finished");
    if (!prev_rows.empty() && prev_rows.size() != plan.input_ids.size())
      return fail(Errc::invalid_argument, "launch step: prev_rows must be empty or one entry per token");
    const std::span<const int32_t> out(ids, ids != nullptr && rows > 0 ? size_t(rows) : 0);
    bool takes_ids = false;
    for (int32_t r : prev_rows) takes_ids = takes_ids || r >= 0;
    if (!takes_ids) {
      launched_.push_back({run(plan), out});
      return {};
    }
    if (launched_.empty())
      return fail(Errc::invalid_argument, "launch step: tokens take previous ids, but no step is launched");
    const Launched& prev = launched_.back();
    BatchPlan resolved = plan;
    if (!prev.status) {  // its ids do not exist: this step fails with it
      launched_.push_back({fail(prev.status.error().code, "the step before failed: " + prev.status.error().message), out});
      return {};
    }
    if (auto taken = resolved.take_previous_ids(prev_rows, prev.ids); !taken) return taken;
    launched_.push_back({run(resolved), out});
    return {};
  }

  // The oldest launched step's outcome. invalid_argument when none is launched.
  Result<void> finish() {
    if (launched_.empty()) return fail(Errc::invalid_argument, "finish step: no step is launched");
    Result<void> status = std::move(launched_.front().status);
    launched_.pop_front();
    return status;
  }

 private:
  struct Launched {
    Result<void> status;
    std::span<const int32_t> ids;  // the step's sampled ids (the caller's out.token_ids)
  };
  std::deque<Launched> launched_;  // oldest first
};

}  // namespace photon
