// WeightSource: where a model's tensors come from, by Hugging Face name, as
// host bytes in their stored dtype: a checkpoint folder (memory-mapped
// safetensors) or seeded random values of a config's shapes (benchmarks and
// tests of real model shapes without their weights).
//
// Ownership: a HostTensor's data is owned by the source and valid until the
// next get() on it (checkpoint: until the source is destroyed).
// Thread-compatibility: one thread at a time.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/dtype.hpp"
#include "core/safetensors.hpp"
#include "core/thread_pool.hpp"
#include "model/config.hpp"
#include "model/hf_tensors.hpp"
#include "photon/result.hpp"

namespace photon {

struct HostTensor {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // little-endian, possibly unaligned
  size_t nbytes = 0;
  std::string origin;  // the file it came from, for messages

  int64_t numel() const noexcept;
  std::string shape_string() const;
};

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  // missing_tensor naming the tensor and where it was looked for.
  virtual Result<HostTensor> get(std::string_view name) = 0;
  virtual bool contains(std::string_view name) const = 0;
};

// The tensors of a model folder's safetensors files.
class CheckpointSource final : public WeightSource {
 public:
  explicit CheckpointSource(Checkpoint checkpoint, std::string dir)
      : checkpoint_(std::move(checkpoint)), dir_(std::move(dir)) {}
  Result<HostTensor> get(std::string_view name) override;
  bool contains(std::string_view name) const override { return checkpoint_.find(name) != nullptr; }

 private:
  Checkpoint checkpoint_;
  std::string dir_;
};

// Seeded pseudo-random bf16 tensors of every expected_tensors(config) shape:
// linear weights uniform in ±1/sqrt(in_features), the embedding uniform in
// ±1, norm weights uniform in [0.9, 1.1]. The values of a tensor depend only
// on (seed, name), never on the order of the requests nor on `pool` (when not
// null, a tensor's values are drawn in chunks on its threads; not owned).
class RandomSource final : public WeightSource {
 public:
  RandomSource(const ModelConfig& config, uint64_t seed, ThreadPool* pool = nullptr);
  Result<HostTensor> get(std::string_view name) override;
  bool contains(std::string_view name) const override { return shapes_.count(std::string(name)) != 0; }

 private:
  uint64_t seed_;
  ThreadPool* pool_;
  std::unordered_map<std::string, ExpectedTensor> shapes_;
  std::vector<uint16_t> scratch_;  // the last tensor handed out
};

}  // namespace photon
