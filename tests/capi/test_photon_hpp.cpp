// photon.hpp: the RAII helpers over the C ABI.
#include <catch2/catch.hpp>

#include <string>

#include "photon/photon.hpp"
#include "support/test_data.hpp"

TEST_CASE("photon.hpp owns C handles and fills params with defaults", "[capi]") {
  photon::c::TokenizerPtr tok;
  REQUIRE(photon::c::open_tokenizer(tok, photon::test::stories_dir().c_str()) == PHOTON_OK);
  REQUIRE(tok != nullptr);
  auto info = photon::c::init<photon_tokenizer_info>();
  CHECK(info.struct_size == sizeof info);
  REQUIRE(photon_tokenizer_get_info(&info, tok.get()) == PHOTON_OK);
  CHECK(info.vocab_size == 512);

  photon::c::TokenizerPtr missing;
  CHECK(photon::c::open_tokenizer(missing, "/nonexistent/photon") == PHOTON_E_FILE_NOT_FOUND);
  CHECK(missing == nullptr);
  CHECK(photon::c::last_error().find("photon_tokenizer_open: ") == 0);

  auto rp = photon::c::init<photon_request_params>();
  CHECK(rp.struct_size == sizeof rp);
  CHECK(rp.temperature == 1.0f);
  CHECK(rp.detokenize);
  auto ep = photon::c::init<photon_engine_params>();
  CHECK(ep.block_size == 16);
}

TEST_CASE("photon.hpp opens and frees an engine", "[capi]") {
  photon::c::EnginePtr engine;
  auto ep = photon::c::init<photon_engine_params>();
  ep.backend = PHOTON_BACKEND_CPU;
  ep.kv_blocks = 16;
  REQUIRE(photon::c::open_engine(engine, photon::test::stories_dir().c_str(), &ep) == PHOTON_OK);
  auto m = photon::c::init<photon_engine_metrics>();
  REQUIRE(photon_engine_get_metrics(&m, engine.get()) == PHOTON_OK);
  CHECK(m.kv_blocks_total == 16);
  engine.reset();
  CHECK(photon::c::open_engine(engine, "/nonexistent/photon") == PHOTON_E_FILE_NOT_FOUND);
  CHECK(engine == nullptr);
}
