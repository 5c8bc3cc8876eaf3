// PlanStaging: copies a BatchPlan's arrays into device memory in one
// transfer per step (through a pinned host buffer) and keeps the host-side
// facts the ops need without reading device memory (longest query, largest
// token id, per-sequence query lengths for the prefill tile count).
//
// Two layouts: stage() packs the arrays tightly into a buffer that grows when
// a plan is larger; stage_padded() writes a decode-only plan, padded to a
// batch-size bucket, at fixed offsets of one of two fixed graph regions, so
// CUDA graphs captured over a region stay valid from step to step.
//
// Copy ordering. Without a copy stream every copy runs on the backend's stream,
// after the work launched before it (the GPU idles for the DMA between two
// graphs). With one (enable_copy_stream), a graph region's copy runs on a side
// stream as soon as the launches that read that region before have finished,
// and the backend's stream waits for the copy's event: a step that alternates
// regions (step N reads region r while step N + 1's plan is copied into
// 1 - r) has no copy between its graphs (docs/step-overlap.md, "The plan copy
// off the stream"). A copy that writes the ids region waits for everything
// launched before it (a sampled graph in flight may store ids there).
// Thread-compatibility: one thread at a time (the backend's).
#pragma once

#include <cuda_runtime_api.h>

#include <array>
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
  // Graph regions' copies from now on go through a side stream (see above). Once, before staging.
  Status enable_copy_stream();
  static constexpr int32_t kRegions = 2;
  PlanStaging(const PlanStaging&) = delete;
  PlanStaging& operator=(const PlanStaging&) = delete;

  // Validates the plan's array sizes and ranges, then stages it.
  Result<StepPlanView> stage(const BatchPlan& plan);
  // A decode-only plan (every sequence one token, logits_rows[i] == i) padded
  // to `bucket` sequences (padding: token 0, context 0, slot -1) with block
  // tables `width` wide, into graph region `region` (0 or 1). The device addresses depend only on
  // (region, capacity, max_width) of the graph buffers, which grow (and move) only when asked
  // for more than they hold; graph_buffer_epoch() counts those moves.
  // side: an optional per-row payload of the step (the graph sampler's row parameters), `bucket`
  // rows of side.size() / bucket <= kSideRowBytes bytes each, packed, that travels in the same
  // copy into a fixed region at graph_side() (16-byte aligned; valid while graph_buffer_epoch()
  // holds; padding rows included in `side`).
  // ids_on_device: the region's input ids already hold this step's ids (the previous
  // sampled graph's sampler wrote them there, CudaBackend::launch_step_sampled), or the staging is
  // for a graph recording that needs only the addresses; plan.input_ids is neither checked nor
  // copied, and the info's id range is empty. When the buffers move, graph_buffer_epoch() changes
  // and the region's ids are stale.
  Result<StepPlanView> stage_padded(const BatchPlan& plan, int32_t bucket, int32_t width, int32_t region,
                                    std::span<const std::byte> side = {}, bool ids_on_device = false);
  uint64_t graph_buffer_epoch() const noexcept { return graph_epoch_; }
  static constexpr size_t kSideRowBytes = 64;
  // Device address of a region's side payload (fixed offset in the region); null before the
  // first stage_padded.
  const void* graph_side(int32_t region) const noexcept;
  // Device address of a region's input ids ([capacity]; fixed while graph_buffer_epoch() holds;
  // null before the first stage_padded): a sampled graph's sampler stores the next step's ids
  // there.
  int32_t* graph_input_ids(int32_t region) noexcept {
    return static_cast<int32_t*>(graph_[size_t(region)].device);
  }

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
  // Pinned staging memory of one layout (the tight one, each graph region): rewritten only after
  // its last upload left it.
  struct HostBuffer {
    int32_t* p = nullptr;
    size_t bytes = 0;
    cudaEvent_t copied = nullptr;  // the last upload out of p finished
  };
  Status ensure_host(HostBuffer& h, size_t bytes);
  Status ensure_device(Region& r, size_t bytes);
  // Orders a graph region's copy (see the class comment); returns the stream it goes on.
  Result<cudaStream_t> order_copy(int32_t region, bool ids_on_device);

  DeviceAllocator& alloc_;
  cudaStream_t stream_;
  cudaStream_t copy_stream_ = nullptr;  // enable_copy_stream: graph regions' copies
  cudaEvent_t tail_ = nullptr;          // copy stream: stream_'s work at the last stage_padded
  std::array<cudaEvent_t, kRegions> read_done_{};  // copy stream: the launches that read a region
  int32_t last_region_ = -1;                       // the region of the last stage_padded
  HostBuffer host_tight_;
  std::array<HostBuffer, kRegions> host_graph_{};
  Region tight_;
  std::array<Region, kRegions> graph_{};
  int32_t graph_capacity_ = 0, graph_width_ = 0;
  uint64_t graph_epoch_ = 0;
  StagedPlanInfo info_;
  int32_t checked_block_size_ = 0;  // geometry the current plan passed check_cache with (0: none)
  int64_t checked_num_blocks_ = 0;
};

}  // namespace photon::cuda
