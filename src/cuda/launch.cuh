// Kernel launches with programmatic dependent launch (PDL, sm_90+).
//
// A kernel launched through launch_kernel() may be scheduled while the kernel
// before it on the stream is still finishing: its blocks can issue loads that
// do not depend on earlier kernels (weights, the plan's arrays staged before
// the step) and must call pdl_wait() before they read anything an earlier
// kernel writes, or write anything an earlier kernel may still read.
// pdl_wait() returns once every earlier kernel on the stream has completed
// and its writes are visible; on a launch without PDL (sm_80, PDL turned off,
// <<<>>> launches) it returns at once.
//
// Rules for every kernel launched here (they keep the chain transitive):
//  * every thread of every block calls pdl_wait() on every path, also blocks
//    with no work, before touching earlier kernels' data and before exiting;
//  * a kernel may call pdl_launch_dependents() once its own dependents may
//    start: the GEMVs right after their own pdl_wait(), the small kernels
//    (norms, rope, silu, attention, gathers) first thing, so the next kernel
//    is resident while they run; without the call the dependents start when
//    it completes. The chain stays ordered because every dependent waits.
// Works inside CUDA graph capture (the programmatic edge is recorded).
//
// PDL is used when the device is sm_90 or newer and PHOTON_CUDA_PDL is not
// "0" in the environment (read once per process).
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "cuda/step_trace.cuh"

namespace photon::cuda {

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
#if defined(__CUDA_ARCH__)
  step_trace_waited();  // empty unless built with PHOTON_CUDA_STEP_TRACE (step_trace.cuh)
#endif
}

__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Whether launches on the current device use PDL (defined in launch.cu).
bool pdl_enabled_on_current_device() noexcept;

// In each kernel file, at namespace scope in photon::cuda, naming one of its kernels:
//   PHOTON_PRELOAD_UNIT(gemv, gemv_kernel<1, 1, bf16, GemvMode::plain, false>)
// defines preload_unit_gemv(), which kernel_preload.cpp calls when a backend starts. Touching a
// kernel (cudaFuncGetAttributes) makes CUDA's lazy loading (the default since CUDA 12.2) load the
// file's module then, not inside the first step that launches one of its kernels: loading
// decode_attention.cu's module mid-run stalled a decode step by 50-80 ms (docs/performance.md,
// row 72). src/cuda/CMakeLists.txt checks that every kernel file has one.
#define PHOTON_PRELOAD_UNIT(name, ...)                  \
  cudaError_t preload_unit_##name() {                   \
    cudaFuncAttributes attr;                            \
    return cudaFuncGetAttributes(&attr, __VA_ARGS__);   \
  }

namespace detail {
// kernel<<<grid, block, smem, stream>>>(args...) through cudaLaunchKernelEx, with the PDL attribute
// when pdl_enabled_on_current_device() and, when cluster_x > 0, clusters of cluster_x blocks along x.
template <class... KArgs, class... Args>
cudaError_t launch_ex(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                      unsigned cluster_x, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (cluster_x > 0) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = cluster_x;
    attr[n].val.clusterDim.y = 1;
    attr[n].val.clusterDim.z = 1;
    ++n;
  }
  if (pdl_enabled_on_current_device()) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  cfg.attrs = n > 0 ? attr : nullptr;
  cfg.numAttrs = n;
  const cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
  if (err != cudaSuccess) (void)cudaGetLastError();  // returned here: leave no stale error for a later check
  return err;
}
}  // namespace detail

// Launches kernel<<<grid, block, smem, stream>>>(args...) with the PDL
// attribute when pdl_enabled_on_current_device(). Returns the launch error
// (callers follow with PHOTON_CUDA_TRY or check it like a <<<>>> launch).
template <class... KArgs, class... Args>
cudaError_t launch_kernel(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                          Args&&... args) {
  return detail::launch_ex(kernel, grid, block, smem, stream, 0, std::forward<Args>(args)...);
}

// launch_kernel() for a kernel whose blocks form clusters of `cluster_x`
// blocks along x (sm_90+; grid.x a multiple of cluster_x, cluster_x >= 1).
// Sizes above 8 need cudaFuncAttributeNonPortableClusterSizeAllowed set by the caller.
template <class... KArgs, class... Args>
cudaError_t launch_kernel_in_clusters(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem,
                                      cudaStream_t stream, unsigned cluster_x, Args&&... args) {
  return detail::launch_ex(kernel, grid, block, smem, stream, cluster_x, std::forward<Args>(args)...);
}

}  // namespace photon::cuda
