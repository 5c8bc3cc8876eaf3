// DeviceAllocator: a caching allocator of device memory for one backend.
//
// Sizes are rounded up to a size class (256-byte steps up to 1 MiB, then four
// classes per power of two up to 64 MiB, then 2 MiB steps); a released block
// goes to its class's free list and is handed out again to the next request
// of that class without touching the driver. All work runs on the backend's
// one stream, so a block released while kernels that use it are still queued
// is only reused by work queued after them (stream order). When cudaMalloc
// fails, cached blocks are returned to the driver and the call is retried.
//
// generation() changes on every allocate and release: the backend's CUDA
// graphs compare it to tell whether the buffers they captured still exist.
// Thread-compatibility: one thread at a time (the backend's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "cuda/cuda_status.hpp"

namespace photon::cuda {

class DeviceAllocator {
 public:
  DeviceAllocator() = default;
  ~DeviceAllocator();
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  // A block of at least `bytes` (256-byte aligned); bytes == 0 gives nullptr.
  Result<void*> allocate(size_t bytes);
  // Returns a block from allocate() to its free list; nullptr and unknown pointers are ignored.
  void release(void* ptr) noexcept;
  // Gives every cached (free) block back to the driver.
  void trim() noexcept;

  size_t bytes_in_use() const noexcept { return in_use_; }
  size_t peak_bytes_in_use() const noexcept { return peak_in_use_; }
  size_t bytes_cached() const noexcept { return cached_; }
  uint64_t generation() const noexcept { return generation_; }

  static size_t size_class(size_t bytes) noexcept;

 private:
  std::unordered_map<void*, size_t> live_;                  // pointer -> class size
  std::unordered_map<size_t, std::vector<void*>> free_;     // class size -> cached blocks
  size_t in_use_ = 0;
  size_t peak_in_use_ = 0;
  size_t cached_ = 0;
  uint64_t generation_ = 0;
};

}  // namespace photon::cuda
