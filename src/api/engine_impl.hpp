// Engine::Impl: what a photon::Engine owns (internal to libphoton).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "photon/engine.hpp"
#include "scheduler/engine_core.hpp"

namespace photon {

class Engine::Impl {
 public:
  Impl(std::unique_ptr<EngineCore> engine_core, std::string backend) noexcept
      : core(std::move(engine_core)), backend_name(std::move(backend)) {}
  std::unique_ptr<EngineCore> core;  // owns the model runner (backend + model)
  std::string backend_name;
};

// Wraps an Impl into an Engine (Engine::open, and tests with a fake runner).
class EngineImplAccess {
 public:
  static Engine make(std::unique_ptr<Engine::Impl> impl) noexcept { return Engine(std::move(impl)); }
};

}  // namespace photon
