// The CPU reference backend: the numerical oracle every other backend and
// kernel is tested against.
//
// Activations and the KV cache are f32; weights stay in their checkpoint
// dtype (f32 / bf16 / f16, widened to f32 in the inner loops) or group-wise
// int8 (Weight::scales); every accumulation is fp32. Memory is ordinary host
// memory (64-byte aligned), so copies are memcpy and "device" pointers are
// host pointers. The ops run on an engine-owned ThreadPool; results do not
// depend on the thread count (each output element is computed by one thread
// in a fixed order).
//
// Thread-compatibility: one thread at a time, like every Backend.
#pragma once

#include <cstdint>
#include <memory>

#include "core/backend.hpp"
#include "photon/result.hpp"

namespace photon {

struct CpuBackendOptions {
  // Worker threads besides the calling thread (0 = everything runs on the
  // thread that calls the op).
  int32_t num_threads = 0;
};

Result<std::unique_ptr<Backend>> make_cpu_backend(const CpuBackendOptions& options = {});

}  // namespace photon
