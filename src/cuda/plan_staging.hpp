// PlanStaging: copies a BatchPlan's arrays into device memory in one
// transfer per step (through a pinned host buffer) and keeps the host-side
// facts the ops need without reading device memory (longest query, largest
// token id, per-sequence query lengths for the prefill tile count).
//
// Two layouts: stage() packs the arrays tightly into a buffer that grows when
// a plan is larger; stage_padded() writes a decode-only plan, padded to a
// batch-size bucket, at fixed offsets of a fixed buffer, so CUDA graphs
// captured over it stay valid from step to step.
// Thread-compatibility: one thread at a time (the backend's).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/backend.hpp"
#include "core/batch_plan.hpp"
#include "cuda/cuda_status.hpp"
#include "cuda/device_allocator.hpp"

namespace photon::cuda {

// Host-side mirror of the last staged plan: pointers into the pinned
// staging memory, valid until the next stage call.
struct StagedPlanInfo {
  const int32_t* device_ids = nullptr;  // identifies the staged view (its input_ids pointer)
  int32_t num_tokens = 0, num_seqs = 0, max_blocks_per_seq = 0;  // as staged (padded plans: the bucket)
  int32_t min_input_id = 0;
  int32_t max_input_id = -1;
  const int32_t* positions = nullptr;     // [T]
  const int32_t* query_start = nullptr;   // [S + 1]
  const int32_t* context_lens = nullptr;  // [S]
  const int32_t* block_tables = nullptr;  // [S, max_blocks_per_seq]
  const int32_t* slot_mapping = nullptr;  // [T]
};

class PlanStaging {
 public:
  PlanStaging(DeviceAllocator& alloc, cudaStream_t stream) : alloc_(alloc), stream_(stream) {}
  ~PlanStaging();
  PlanStaging(const PlanStaging&) = delete;
  PlanStaging& operator=(const PlanStaging&) = delete;

  // Validates the plan's array sizes and ranges, then stages it.
  Result<StepPlanView> stage(const BatchPlan& plan);
  // A decode-only plan (every sequence one token, logits_rows[i] == i) padded
  // to `bucket` sequences (padding: token 0, context 0, slot -1) with block
  // tables `width` wide. The device addresses depend only on (capacity,
  // max_width) of the graph buffer, which grows (and moves) only when asked
  // for more than it holds; graph_buffer_epoch() counts those moves.
  // side: an optional per-row payload of the step (the graph sampler's row parameters), `bucket`
  // rows of side.size() / bucket <= kSideRowBytes bytes each, packed, that travels in the same
  // copy into a fixed region at graph_side() (16-byte aligned; valid while graph_buffer_epoch()
  // holds; padding rows included in `side`).
  // ids_on_device: the graph buffer's input ids already hold this step's ids (the previous
  // sampled graph's sampler wrote them there, CudaBackend::launch_step_sampled); plan.input_ids is
  // neither checked nor copied, and the info's id range is empty.
  Result<StepPlanView> stage_padded(const BatchPlan& plan, int32_t bucket, int32_t width,
                                    std::span<const std::byte> side = {}, bool ids_on_device = false);
  uint64_t graph_buffer_epoch() const noexcept { return graph_epoch_; }
  static constexpr size_t kSideRowBytes = 64;
  // Device address of the side region (fixed offset in the graph buffer); null before the first
  // stage_padded.
  const void* graph_side() const noexcept;
  // Device address of the graph buffer's input ids ([capacity]; fixed while graph_buffer_epoch()
  // holds; null before the first stage_padded): a sampled graph's sampler stores the next step's
  // ids there.
  int32_t* graph_input_ids() noexcept { return static_cast<int32_t*>(graph_.device); }

  const StagedPlanInfo& info() const noexcept { return info_; }
  // Whether `view` is the last staged plan (ops accept no other).
  bool is_current(const StepPlanView& view) const noexcept {
    return view.input_ids == info_.device_ids && view.num_tokens == info_.num_tokens;
  }
  // Checks the staged plan against a KV cache of num_blocks blocks of
  // block_size tokens (positions inside contexts, block ids and slots inside
  // the pool, slots where the block table puts them; padding rows exempt).
  // Remembers the last geometry that passed, so each step pays once.
  Status check_cache(int32_t block_size, int64_t num_blocks);
  int32_t checked_block_size() const noexcept { return checked_block_size_; }
  int64_t checked_num_blocks() const noexcept { return checked_num_blocks_; }

 private:
  struct Region {
    void* device = nullptr;
    size_t bytes = 0;
  };
  Status ensure_host(size_t bytes);
  Status ensure_device(Region& r, size_t bytes);
  Result<StepPlanView> upload(Region& r, size_t bytes, StepPlanView view);

  DeviceAllocator& alloc_;
  cudaStream_t stream_;
  int32_t* host_ = nullptr;  // pinned staging memory
  size_t host_bytes_ = 0;
  cudaEvent_t copied_ = nullptr;  // the last upload out of host_ finished
  Region tight_;
  Region graph_;
  int32_t graph_capacity_ = 0, graph_width_ = 0;
  uint64_t graph_epoch_ = 0;
  StagedPlanInfo info_;
  int32_t checked_block_size_ = 0;  // geometry the current plan passed check_cache with (0: none)
  int64_t checked_num_blocks_ = 0;
};

}  // namespace photon::cuda
