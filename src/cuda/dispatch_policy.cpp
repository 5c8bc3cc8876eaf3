#include "cuda/dispatch_policy.hpp"

#include <cstdlib>

namespace photon::cuda {

int64_t env_int64(const char* name, int64_t fallback, int64_t min_value) {
  const char* e = std::getenv(name);
  return e != nullptr && std::atoll(e) >= min_value ? int64_t(std::atoll(e)) : fallback;
}

int64_t swiglu_gemv_min_k() {
  static const int64_t v = env_int64("PHOTON_CUDA_SWIGLU_GEMV_MIN_K", kSwiGluGemvMinK, 0);
  return v;
}

int64_t skinny_max_n() {
  static const int64_t n = env_int64("PHOTON_CUDA_SKINNY_MAX_N", 8192, 1);
  return n;
}

bool env_not_zero(const char* name) {
  const char* e = std::getenv(name);
  return e == nullptr || e[0] != '0';
}

void override_from_env(const char* name, bool& option) {
  const char* e = std::getenv(name);
  if (e != nullptr && (e[0] == '0' || e[0] == '1')) option = e[0] == '1';
}

bool skinny_silu_enabled() {
  static const bool on = env_not_zero("PHOTON_CUDA_SKINNY_SILU");
  return on;
}

OneRowSkinny one_row_skinny() {
  static const OneRowSkinny v = [] {
    const char* e = std::getenv("PHOTON_CUDA_SKINNY_M1");
    if (e == nullptr) return OneRowSkinny::bounded;
    return e[0] == '1' ? OneRowSkinny::all : e[0] == '0' ? OneRowSkinny::none : OneRowSkinny::bounded;
  }();
  return v;
}

int64_t one_row_skinny_max_nk() {
  static const int64_t v = env_int64("PHOTON_CUDA_SKINNY_M1_MAX_NK", kOneRowSkinnyMaxNK, 0);
  return v;
}

bool int8_skinny_enabled() {
  static const bool on = env_not_zero("PHOTON_CUDA_INT8_SKINNY");
  return on;
}

bool int8_skinny_silu() {
  static const bool on = env_not_zero("PHOTON_CUDA_INT8_SKINNY_SILU");
  return on;
}

int32_t bucket_for(int32_t s) {
  if (s <= 8) {
    int32_t b = 1;
    while (b < s) b *= 2;
    return b;
  }
  if (s <= 64) return (s + 7) / 8 * 8;
  return (s + 31) / 32 * 32;
}

}  // namespace photon::cuda
