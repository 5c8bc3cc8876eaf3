#include "cuda/cuda_status.hpp"

#include <cstring>

namespace photon::cuda {

namespace {
const char* basename_of(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}
}  // namespace

Unexpected cuda_failure(cudaError_t err, const char* expr, const char* file, int line) {
  std::string msg = "CUDA error at ";
  msg += basename_of(file);
  msg += ':';
  msg += std::to_string(line);
  msg += ": ";
  msg += expr;
  msg += " failed: ";
  msg += cudaGetErrorString(err);
  msg += " (";
  msg += cudaGetErrorName(err);
  msg += ')';
  return fail(Errc::cuda_error, std::move(msg));
}

Unexpected bad_launch(const char* what, const std::string& why) {
  return fail(Errc::invalid_argument, std::string(what) + ": " + why);
}

}  // namespace photon::cuda
