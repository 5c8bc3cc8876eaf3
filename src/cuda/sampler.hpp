// Sampler: the host side of GPU sampling (docs/sampling.md). Validates a
// SampleBatch on the host, uploads the per-row parameters and penalty
// history in one copy, runs the sampling kernel over the logits already on
// the device, and brings back only the chosen ids, their logprobs and the
// requested top-n (one copy, one wait; the one-pass kernel writes them into
// pinned host memory itself, so one wait).
// Thread-compatibility: one thread at a time (the backend's).
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <vector>

#include "core/backend.hpp"
#include "core/sampling.hpp"
#include "cuda/cuda_status.hpp"
#include "cuda/sampling.cuh"

namespace photon::cuda {

class Sampler {
 public:
  // Device memory comes from `backend` (which must outlive the Sampler).
  // compute_major: the device's compute capability major, num_sms: its multiprocessor count (pick the kernel).
  static Result<std::unique_ptr<Sampler>> create(Backend& backend, int32_t compute_major, int32_t num_sms,
                                                 cudaStream_t stream);
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // Backend::sample: logits [R, V] f32 device memory (overwritten), outputs in host memory.
  Status sample(Tensor logits, const SampleBatch& batch, const SampleOutput& out);

 private:
  Sampler(Backend& backend, int32_t compute_major, int32_t num_sms, cudaStream_t stream)
      : backend_(backend), compute_major_(compute_major), num_sms_(num_sms), stream_(stream) {}
  Status ensure(size_t upload_bytes, size_t download_bytes, size_t hist);

  Backend& backend_;
  int32_t compute_major_;
  int32_t num_sms_;
  cudaStream_t stream_;
  void* host_up_ = nullptr;    // pinned: params + history, uploaded
  void* host_down_ = nullptr;  // pinned: results, downloaded
  size_t host_up_bytes_ = 0, host_down_bytes_ = 0;
  Buffer dev_up_, dev_down_, dev_hist_raw_;
  Buffer one_pass_partials_, one_pass_arrivals_;  // the one-pass kernel's workspace (sampling.cuh)
};

}  // namespace photon::cuda
