#include "model/model.hpp"

#include <fmt/format.h>

#include <filesystem>

#include "core/safetensors.hpp"
#include "core/try.hpp"
#include "model/architectures.hpp"
#include "model/weight_source.hpp"

namespace photon {

namespace {
Result<const Architecture*> architecture_of(const ModelConfig& config) {
  const Architecture* arch = find_architecture(config.architecture);
  if (arch == nullptr)
    return fail(Errc::unknown_architecture, fmt::format("architecture '{}' is not supported (photon supports {})",
                                                        config.architecture, supported_architectures()));
  return arch;
}
}  // namespace

Result<std::unique_ptr<Model>> Model::load(const std::string& dir, Backend& backend, const ModelLoadOptions& options) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    return fail(Errc::file_not_found, fmt::format("{}: no such model folder", dir));
  PHOTON_ASSIGN_OR_RETURN(ModelConfig config, ModelConfig::load(dir));
  PHOTON_ASSIGN_OR_RETURN(const Architecture* arch, architecture_of(config));
  PHOTON_TRY(backend.check_head_dim(config.head_dim));
  PHOTON_ASSIGN_OR_RETURN(Checkpoint checkpoint, Checkpoint::open(dir));
  CheckpointSource source(std::move(checkpoint), dir);
  return arch->factory(config, source, backend, options);
}

Result<std::unique_ptr<Model>> Model::create_random(const ModelConfig& config, Backend& backend, uint64_t seed,
                                                    const ModelLoadOptions& options) {
  PHOTON_TRY(config.validate());
  PHOTON_ASSIGN_OR_RETURN(const Architecture* arch, architecture_of(config));
  PHOTON_TRY(backend.check_head_dim(config.head_dim));
  RandomSource source(config, seed, options.pool);  // the load's pool draws the values too
  return arch->factory(config, source, backend, options);
}

}  // namespace photon
