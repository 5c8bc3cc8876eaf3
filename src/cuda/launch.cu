#include <cstdlib>
#include <cstring>

#include "cuda/launch.cuh"

namespace photon::cuda {

namespace {

constexpr int kMaxDevices = 64;

bool pdl_allowed_by_environment() noexcept {
  const char* v = std::getenv("PHOTON_CUDA_PDL");
  return v == nullptr || std::strcmp(v, "0") != 0;
}

// Per device ordinal: 0 unknown, 1 PDL, 2 no PDL. Written once per device;
// racing first launches on two threads write the same value.
int g_device_mode[kMaxDevices] = {};

}  // namespace

bool pdl_enabled_on_current_device() noexcept {
  static const bool allowed = pdl_allowed_by_environment();
  if (!allowed) return false;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) {
    (void)cudaGetLastError();
    return false;
  }
  int mode = __atomic_load_n(&g_device_mode[device], __ATOMIC_RELAXED);
  if (mode == 0) {
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    mode = major >= 9 ? 1 : 2;
    __atomic_store_n(&g_device_mode[device], mode, __ATOMIC_RELAXED);
  }
  return mode == 1;
}

}  // namespace photon::cuda
