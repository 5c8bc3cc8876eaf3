// Loads every kernel file's CUDA module when a backend starts (PHOTON_PRELOAD_UNIT, launch.cuh).
// Under CUDA's lazy loading (the default since CUDA 12.2) a module is otherwise loaded by the first
// launch of one of its kernels, inside whichever step first needs it: a single-stream decode that
// first passed 512 keys of context stalled 50-80 ms there (docs/performance.md, row 72). Call with
// the backend's device current; calling again loads nothing twice.
// Thread-safety: as any CUDA runtime call.
#pragma once

#include "cuda/cuda_status.hpp"

namespace photon::cuda {

Status preload_kernel_modules();

}  // namespace photon::cuda
