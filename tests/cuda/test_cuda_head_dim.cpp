// Models whose attention the CUDA backend does not serve (head_dim outside 16, 32, 64, 128, 256:
// the bundled stories260K has 8): loading one on CUDA fails with unsupported before any weight is
// placed, and Engine::open's "auto" then picks the CPU backend, which serves it.
#include <catch2/catch.hpp>

#include <string>

#include "cuda_test_util.hpp"
#include "model/model.hpp"
#include "photon/engine.hpp"
#include "support/test_data.hpp"

using namespace photon;
using namespace photon::test;


TEST_CASE("cuda backend refuses a head_dim its attention does not serve, at load", "[cuda]") {
  auto gpu = cuda_backend();
  for (int32_t hd : {16, 32, 64, 128, 256}) CHECK(gpu->check_head_dim(hd).has_value());
  for (int32_t hd : {8, 48, 96, 512}) {
    auto r = gpu->check_head_dim(hd);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == Errc::unsupported);
  }
  const size_t before = gpu->memory_stats().in_use;
  auto model = Model::load(stories_dir(), *gpu);
  REQUIRE_FALSE(model.has_value());
  CHECK(model.error().code == Errc::unsupported);
  CHECK(model.error().message.find("head_dim") != std::string::npos);
  CHECK(gpu->memory_stats().in_use == before);  // nothing was uploaded
}

TEST_CASE("engine: backend auto runs a model the GPU cannot serve on the CPU; cuda says why", "[cuda]") {
  EngineOptions o;
  o.model_dir = stories_dir();
  o.kv_blocks = 64;
  o.backend = "auto";
  auto engine = Engine::open(o);
  REQUIRE(engine.has_value());
  CHECK(engine->backend_name() == "cpu");
  o.backend = "cuda";
  auto refused = Engine::open(o);
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().code == Errc::unsupported);
}
