// Host side of the step trace (step_trace.cuh): a diagnostic that records, for every kernel of a
// traced step, when its first block started, when pdl_wait() first and last returned and when its
// last warp exited, and appends them to a text file (scripts/device/step_trace_report.py reads it).
// Compiled in only with the CMake option PHOTON_CUDA_STEP_TRACE; the backend opens one when the
// environment variable PHOTON_CUDA_STEP_TRACE names a file. Not thread-safe: the backend's stream
// thread owns it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "cuda/cuda_status.hpp"

namespace photon::cuda {

struct StepTraceSlot;

class StepTrace {
 public:
  // Allocates the device table, points every traced kernel file at it and opens `path` for
  // appending. Errc::unsupported when the build has no hooks.
  static Result<std::unique_ptr<StepTrace>> open(const std::string& path);
  ~StepTrace();
  StepTrace(const StepTrace&) = delete;
  StepTrace& operator=(const StepTrace&) = delete;

  // Before a step's launches: zeroes the table on `stream`.
  Status begin(cudaStream_t stream);
  // After them: waits for `stream`, then appends one line per launch seen:
  // "step rows grid_min grid_max tag blocks start wait_first wait_last end", then each mark's first
  // and last stamp (0 0: not reached), in ns, absolute.
  Status end(cudaStream_t stream, int64_t step, int32_t rows);

 private:
  StepTrace() = default;
  StepTraceSlot* table_ = nullptr;  // device, kStepTraceSlots slots
  std::FILE* file_ = nullptr;
};

}  // namespace photon::cuda
