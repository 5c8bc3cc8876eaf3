// Writes whole Hugging Face model folders from code: config.json plus the
// weights of that config (the seeded values of RandomSource, stored in the
// chosen safetensors dtype), in one file or in shards with an index.
#pragma once

#include <fmt/format.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/convert.hpp"
#include "core/safetensors.hpp"
#include "model/config.hpp"
#include "model/hf_tensors.hpp"
#include "model/weight_source.hpp"
#include "support/safetensors_writer.hpp"

namespace photon::test {

// Applied to the tensor list before writing (drop, reshape or corrupt one).
using TensorEdit = std::function<void(std::vector<StTensor>&)>;

// The tensors of `config` as RandomSource(config, seed) makes them, converted to `dtype`.
inline std::vector<StTensor> random_tensors(const ModelConfig& config, uint64_t seed, DType dtype) {
  RandomSource source(config, seed);
  std::vector<StTensor> out;
  for (const auto& e : expected_tensors(config)) {
    auto h = source.get(e.name);
    if (!h) throw std::runtime_error(h.error().message);
    std::string bytes(size_t(h->numel()) * dtype_size(dtype), '\0');
    convert_elements(h->data, h->dtype, bytes.data(), dtype, size_t(h->numel()));
    out.push_back({e.name, std::string(safetensors_dtype_name(dtype)), e.shape, std::move(bytes)});
  }
  return out;
}

// Writes `config_json` and the weights (RandomSource(seed) values stored as
// `dtype`) into `dir`, in one file or (shards > 1) in
// model-0000N-of-0000M.safetensors files with an index; returns the parsed config.
inline ModelConfig write_checkpoint(const std::string& dir, const nlohmann::json& config_json, uint64_t seed = 1,
                                    DType dtype = DType::bf16, int shards = 1, const TensorEdit& edit = {}) {
  write_file(dir + "/config.json", config_json.dump(2));
  auto config = ModelConfig::parse(config_json.dump(), "config.json");
  if (!config) throw std::runtime_error(config.error().message);
  std::vector<StTensor> tensors = random_tensors(*config, seed, dtype);
  if (edit) edit(tensors);
  if (shards <= 1) {
    write_file(dir + "/model.safetensors", safetensors_image(tensors));
    return *config;
  }
  nlohmann::json index = {{"metadata", nlohmann::json::object()}, {"weight_map", nlohmann::json::object()}};
  const size_t per = (tensors.size() + size_t(shards) - 1) / size_t(shards);
  for (int s = 0; s < shards; ++s) {
    const std::string file = fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, shards);
    std::vector<StTensor> part;
    for (size_t i = size_t(s) * per; i < std::min(tensors.size(), size_t(s + 1) * per); ++i) {
      part.push_back(tensors[i]);
      index["weight_map"][tensors[i].name] = file;
    }
    write_file(dir + "/" + file, safetensors_image(part));
  }
  write_file(dir + "/model.safetensors.index.json", index.dump(2));
  return *config;
}

}  // namespace photon::test
