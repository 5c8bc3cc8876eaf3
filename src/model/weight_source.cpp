#include "model/weight_source.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

namespace photon {

int64_t HostTensor::numel() const noexcept {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string HostTensor::shape_string() const { return fmt::format("[{}]", fmt::join(shape, ", ")); }

Result<HostTensor> CheckpointSource::get(std::string_view name) {
  const SafetensorsTensor* t = checkpoint_.find(name);
  if (t == nullptr) {
    const auto files = checkpoint_.files();
    return fail(Errc::missing_tensor, fmt::format("{}: tensor '{}' is missing (looked in {})", dir_, name,
                                                  fmt::join(files, ", ")));
  }
  HostTensor h;
  h.name = t->name;
  h.dtype = t->dtype;
  h.shape = t->shape;
  h.data = t->data;
  h.nbytes = t->nbytes;
  h.origin = t->file;
  return h;
}

RandomSource::RandomSource(const ModelConfig& config, uint64_t seed, ThreadPool* pool) : seed_(seed), pool_(pool) {
  for (auto& e : expected_tensors(config)) shapes_.emplace(e.name, e);
}

namespace {
// splitmix64: a small, fast, well-mixed generator; one state per tensor.
constexpr uint64_t kSplitmixIncrement = 0x9e3779b97f4a7c15ull;
inline uint64_t splitmix64(uint64_t& state) noexcept {
  uint64_t z = (state += kSplitmixIncrement);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
inline uint64_t fnv1a(std::string_view s) noexcept {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}
}  // namespace

Result<HostTensor> RandomSource::get(std::string_view name) {
  auto it = shapes_.find(std::string(name));
  if (it == shapes_.end())
    return fail(Errc::missing_tensor, fmt::format("random weights: no tensor '{}' in this architecture", name));
  const ExpectedTensor& e = it->second;
  HostTensor h;
  h.name = e.name;
  h.dtype = DType::bf16;
  h.shape = e.shape;
  h.origin = fmt::format("random weights (seed {})", seed_);
  const size_t n = size_t(h.numel());
  float center = 0.0f, half_width = 1.0f;
  if (e.role == TensorRole::norm || e.role == TensorRole::qk_norm) {
    center = 1.0f;
    half_width = 0.1f;
  } else if (e.role == TensorRole::linear || e.role == TensorRole::lm_head) {
    half_width = 1.0f / std::sqrt(float(e.shape.back()));
  }
  scratch_.resize(n);
  const uint64_t state0 = seed_ ^ fnv1a(name);
  // Four 16-bit uniforms per 64-bit draw, mapped to [-1, 1). splitmix64's state after d draws is
  // state0 + d * its increment, so any range of draws can start on its own (pool_'s chunks).
  auto fill = [&](int64_t d0, int64_t d1) {
    uint64_t state = state0 + uint64_t(d0) * kSplitmixIncrement;
    for (int64_t d = d0; d < d1; ++d) {
      const uint64_t r = splitmix64(state);
      const size_t i = size_t(d) * 4;
      for (size_t j = 0; j < 4 && i + j < n; ++j) {
        const float u = float(int32_t((r >> (16 * j)) & 0xffffu) - 32768) * (1.0f / 32768.0f);
        scratch_[i + j] = f32_to_bf16(center + half_width * u);
      }
    }
  };
  const int64_t draws = int64_t((n + 3) / 4);
  if (pool_ != nullptr) pool_->parallel_for(0, draws, fill);
  else fill(0, draws);
  h.data = reinterpret_cast<const uint8_t*>(scratch_.data());
  h.nbytes = n * 2;
  return h;
}

}  // namespace photon
