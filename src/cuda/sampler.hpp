// Sampler: the host side of GPU sampling (docs/sampling.md). Validates a
// SampleBatch on the host, uploads the per-row parameters and penalty
// history in one copy, runs the sampling kernel over the logits already on
// the device, and brings back only the chosen ids, their logprobs and the
// requested top-n (one copy, one wait; the one-pass kernel writes them into
// pinned host memory itself, so one wait).
// Thread-compatibility: one thread at a time (the backend's).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <span>
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

  // ---- the one-pass kernel inside a captured decode graph (CudaBackend::launch_step_sampled) ----
  // Results of a graph step land in one of kGraphSlots fixed pinned slots (the slot travels in the
  // row parameters), so that a step's results stay readable while the next step runs.
  static constexpr int32_t kGraphSlots = 2;
  // Whether a graph bucket of `bucket` rows can end with the one-pass kernel for `batch`:
  // bucket <= kOnePassMaxRows, no top-n logprobs, and every row greedy or an uncut Gumbel-max draw
  // (top-k 0, top-p 1, min-p 0) with no penalty in effect. Says nothing about validity.
  bool graph_eligible(const SampleBatch& batch, int32_t bucket) const;
  // Validates `batch` as sample() does for a vocabulary of V ids and writes `bucket` rows of kernel
  // parameters into params[0 .. bucket) (the rows past batch.num_rows greedy: padding), with their
  // results going to result slot `slot`.
  Status graph_params(const SampleBatch& batch, int64_t V, int32_t bucket, int32_t slot, SampleRowParams* params) const;
  // Allocates the graph path's fixed result and arrival buffers (once; not while capturing).
  Status prepare_graph();
  // Issues (to be captured) the one-pass kernel over logits [bucket, V] f32 with device row
  // params [bucket] that stay at `params` for the graph's life. next_ids (device, [bucket], may be
  // null): every row's id is also stored there (0 for a row that fails), for the next step's
  // embedding to read. Its workspace and results live in fixed buffers sized for kOnePassMaxRows
  // rows of this V; they move only when a larger V asks for more, which changes graph_epoch().
  // screen (not null: one row): logits are the LM head screen's, with screen's bound and head
  // (docs/lm-head-screen.md): the screened kernel draws instead, exactly as the one-pass kernel over
  // the head's own logits would (an internal error where it cannot serve the row).
  Status launch_in_graph(Tensor logits, const SampleRowParams* params, int32_t* next_ids,
                         const ScreenArgs* screen = nullptr);
  uint64_t graph_epoch() const noexcept { return graph_epoch_; }
  // Once a graph step that wrote slot `slot` has completed (the caller waits): checks its first
  // num_rows statuses and copies their ids and logprobs into `out` (errors as sample() reports
  // them; temperatures[r] is row r's, for the overflow message).
  Status graph_results(int32_t slot, int32_t num_rows, std::span<const float> temperatures,
                       const SampleOutput& out) const;

 private:
  Sampler(Backend& backend, int32_t compute_major, int32_t num_sms, cudaStream_t stream)
      : backend_(backend), compute_major_(compute_major), num_sms_(num_sms), stream_(stream) {}
  Status ensure(size_t upload_bytes, size_t download_bytes, size_t hist);
  // sample()'s checks of everything but the logits tensor, for a vocabulary of V ids.
  static Status validate(const SampleBatch& batch, int64_t V);

  Backend& backend_;
  int32_t compute_major_;
  int32_t num_sms_;
  cudaStream_t stream_;
  void* host_up_ = nullptr;    // pinned: params + history, uploaded
  void* host_down_ = nullptr;  // pinned: results, downloaded
  size_t host_up_bytes_ = 0, host_down_bytes_ = 0;
  Buffer dev_up_, dev_down_, dev_hist_raw_;
  Buffer one_pass_partials_, one_pass_arrivals_;  // the one-pass kernel's workspace (sampling.cuh)
  // Fixed buffers of the graph path: kGraphSlots slots of kOnePassMaxRows rows of ids, statuses
  // and logprobs in pinned host memory (written by the kernel), and the one-pass workspace for
  // V = graph_vocab_.
  void* graph_down_ = nullptr;
  Buffer graph_partials_, graph_arrivals_;
  Buffer graph_screen_partials_;  // the screened kernel's workspace (one row of graph_screen_vocab_)
  int32_t graph_vocab_ = 0;
  uint64_t graph_epoch_ = 0;
};

}  // namespace photon::cuda
