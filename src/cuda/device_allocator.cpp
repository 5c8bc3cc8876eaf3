#include "cuda/device_allocator.hpp"

#include <string>

namespace photon::cuda {

namespace {
constexpr size_t kKiB = 1024, kMiB = 1024 * kKiB;
size_t round_up(size_t v, size_t step) { return (v + step - 1) / step * step; }
}  // namespace

size_t DeviceAllocator::size_class(size_t bytes) noexcept {
  if (bytes <= kMiB) return round_up(bytes, 256);
  if (bytes <= 64 * kMiB) {
    size_t pow2 = kMiB;
    while (pow2 * 2 < bytes) pow2 *= 2;
    return round_up(bytes, pow2 / 4);  // four classes between pow2 and 2 * pow2
  }
  return round_up(bytes, 2 * kMiB);
}

DeviceAllocator::~DeviceAllocator() {
  trim();
  for (auto& [ptr, size] : live_) cudaFree(ptr);  // buffers that outlived the backend (a caller bug)
}

Result<void*> DeviceAllocator::allocate(size_t bytes) {
  if (bytes == 0) return static_cast<void*>(nullptr);
  const size_t cls = size_class(bytes);
  ++generation_;
  void* ptr = nullptr;
  if (auto it = free_.find(cls); it != free_.end() && !it->second.empty()) {
    ptr = it->second.back();
    it->second.pop_back();
    cached_ -= cls;
  } else {
    cudaError_t err = cudaMalloc(&ptr, cls);
    if (err == cudaErrorMemoryAllocation && cached_ > 0) {
      (void)cudaGetLastError();
      trim();
      err = cudaMalloc(&ptr, cls);
    }
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      return fail(err == cudaErrorMemoryAllocation ? Errc::out_of_memory : Errc::cuda_error,
                  "cudaMalloc of " + std::to_string(cls) + " bytes failed: " + cudaGetErrorString(err) + " (" +
                      std::to_string(free_b >> 20) + " MiB free of " + std::to_string(total_b >> 20) +
                      " MiB, " + std::to_string(in_use_ >> 20) + " MiB held by this backend)");
    }
  }
  live_.emplace(ptr, cls);
  in_use_ += cls;
  if (in_use_ > peak_in_use_) peak_in_use_ = in_use_;
  return ptr;
}

void DeviceAllocator::release(void* ptr) noexcept {
  if (ptr == nullptr) return;
  auto it = live_.find(ptr);
  if (it == live_.end()) return;
  const size_t cls = it->second;
  live_.erase(it);
  in_use_ -= cls;
  ++generation_;
  try {
    free_[cls].push_back(ptr);
    cached_ += cls;
  } catch (...) {  // no memory for the free list: give the block back instead
    cudaFree(ptr);
  }
}

void DeviceAllocator::trim() noexcept {
  for (auto& [cls, blocks] : free_)
    for (void* p : blocks) cudaFree(p);
  free_.clear();
  cached_ = 0;
}

}  // namespace photon::cuda
