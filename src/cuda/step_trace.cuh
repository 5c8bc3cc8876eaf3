// Step trace (a diagnostic, compiled in only with the CMake option PHOTON_CUDA_STEP_TRACE): per
// kernel launch of a traced step, %globaltimer stamps (ns) of its first block's start, its first and
// last return from pdl_wait(), and its last warp's exit, so that a graph-replayed step with
// programmatic dependent launch can be read as a timeline (which kernel streams when, and how long
// each kernel boundary takes) without a profiler that serializes kernels. Host side: step_trace.hpp;
// the backend traces sampled decode steps when PHOTON_CUDA_STEP_TRACE names a file.
//
// A launch's slot is its %gridid modulo kStepTraceSlots (grid ids grow by launch; the slot keeps the
// smallest and largest id it saw, so a collision shows). Minima are stored as maxima of ~t, so one
// memset to zero resets the table. Each block's stamps go to one of kStepTraceLanes 32-byte
// sectors (blockIdx.x % lanes), so a 16k-block launch does not queue on one L2 address.
// Cost when compiled in: thread 0 of each block issues 4 reductions (no return value), lane 0 of
// each warp one more at exit. Without the option every hook is empty.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace photon::cuda {

constexpr int kStepTraceSlots = 512;
constexpr int kStepTraceLanes = 32;
constexpr int kStepTraceMarks = 3;  // step_trace_mark(k): points inside a kernel, k < kStepTraceMarks

struct StepTraceSector {
  unsigned long long v;
  unsigned long long pad[3];
};

// One launch's stamps; every field is reduced with atomicMax (start_inv, wait_inv, grid_inv hold ~value).
struct StepTraceSlot {
  StepTraceSector start_inv[kStepTraceLanes];  // ~min(block start)
  StepTraceSector wait_inv[kStepTraceLanes];   // ~min(pdl_wait() return, thread 0)
  StepTraceSector wait_max[kStepTraceLanes];   // max(pdl_wait() return, thread 0)
  StepTraceSector end_max[kStepTraceLanes];    // max(warp exit, lane 0)
  StepTraceSector mark_inv[kStepTraceMarks][kStepTraceLanes];  // ~min(step_trace_mark(k), thread 0)
  StepTraceSector mark_max[kStepTraceMarks][kStepTraceLanes];  // max(step_trace_mark(k), thread 0)
  unsigned long long grid_inv, grid_max;       // ~min and max %gridid seen in this slot
  unsigned long long tag;                      // the kernel's step_trace_tag (block 0)
  unsigned long long blocks;                   // blocks started
};

// A kernel's label in the trace: its family (below), mode bits and its two sizes (GEMV: N, K).
enum StepTraceKind : unsigned {
  kTraceGemv = 1,
  kTraceGemvSkinny = 2,
  kTraceDecodeAttention = 3,
  kTraceSampleOnePass = 4,
  kTraceEmbedding = 5,
  kTraceRmsNorm = 6,
  kTraceRopeQkv = 7,
  kTraceSiluMul = 8,
  kTraceGatherRows = 9,
};
__host__ __device__ constexpr unsigned long long step_trace_tag(unsigned kind, unsigned flags, int64_t a, int64_t b) {
  return (static_cast<unsigned long long>(kind) << 56) | (static_cast<unsigned long long>(flags & 0xff) << 48) |
         ((static_cast<unsigned long long>(a) & 0xffffff) << 24) | (static_cast<unsigned long long>(b) & 0xffffff);
}

#if defined(__CUDACC__) && defined(PHOTON_CUDA_STEP_TRACE)
namespace {
// This translation unit's table (set by its step_trace_attach_* function; nullptr: not traced).
__device__ StepTraceSlot* g_step_trace = nullptr;

__device__ __forceinline__ unsigned long long step_trace_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ StepTraceSlot* step_trace_slot() {
  StepTraceSlot* table = g_step_trace;
  if (table == nullptr) return nullptr;
  unsigned long long grid;
  asm volatile("mov.u64 %0, %%gridid;" : "=l"(grid));
  return table + (grid % kStepTraceSlots);
}
__device__ __forceinline__ int step_trace_lane() { return int(blockIdx.x % kStepTraceLanes); }

// Place at the top of a kernel: stamps the block's start, and each warp's exit when it goes out of scope.
struct StepTraceScope {
  __device__ explicit StepTraceScope(unsigned long long tag) {
    const unsigned long long t = step_trace_now();
    StepTraceSlot* slot = step_trace_slot();
    if (slot == nullptr || threadIdx.x != 0) return;
    atomicMax(&slot->start_inv[step_trace_lane()].v, ~t);
    atomicAdd(&slot->blocks, 1ull);
    if (blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0) {
      unsigned long long grid;
      asm volatile("mov.u64 %0, %%gridid;" : "=l"(grid));
      atomicMax(&slot->grid_inv, ~grid);
      atomicMax(&slot->grid_max, grid);
      slot->tag = tag;
    }
  }
  // The slot is looked up again at exit rather than held in registers across the kernel.
  __device__ ~StepTraceScope() {
    if ((threadIdx.x & 31) != 0) return;
    const unsigned long long t = step_trace_now();
    if (StepTraceSlot* slot = step_trace_slot(); slot != nullptr) atomicMax(&slot->end_max[step_trace_lane()].v, t);
  }
  StepTraceScope(const StepTraceScope&) = delete;
  StepTraceScope& operator=(const StepTraceScope&) = delete;
};

// A point inside a kernel (k < kStepTraceMarks), stamped by thread 0 of each block that reaches it.
__device__ __forceinline__ void step_trace_mark(int k) {
  if (threadIdx.x != 0) return;
  const unsigned long long t = step_trace_now();
  StepTraceSlot* slot = step_trace_slot();
  if (slot == nullptr) return;
  atomicMax(&slot->mark_inv[k][step_trace_lane()].v, ~t);
  atomicMax(&slot->mark_max[k][step_trace_lane()].v, t);
}

// Called by pdl_wait() after the wait.
__device__ __forceinline__ void step_trace_waited() {
  if (threadIdx.x != 0) return;
  const unsigned long long t = step_trace_now();
  StepTraceSlot* slot = step_trace_slot();
  if (slot == nullptr) return;
  atomicMax(&slot->wait_inv[step_trace_lane()].v, ~t);
  atomicMax(&slot->wait_max[step_trace_lane()].v, t);
}
}  // namespace

// In each traced .cu file, at namespace scope in photon::cuda: the host function that points this
// file's table at the backend's (step_trace.cpp calls it).
#define PHOTON_STEP_TRACE_UNIT(name)                                              \
  cudaError_t step_trace_attach_##name(StepTraceSlot* table) {                    \
    return cudaMemcpyToSymbol(g_step_trace, &table, sizeof table);                \
  }
#else
#if defined(__CUDACC__)
struct StepTraceScope {
  __device__ explicit StepTraceScope(unsigned long long) {}
};
__device__ __forceinline__ void step_trace_waited() {}
__device__ __forceinline__ void step_trace_mark(int) {}
#endif
#define PHOTON_STEP_TRACE_UNIT(name)
#endif

}  // namespace photon::cuda
