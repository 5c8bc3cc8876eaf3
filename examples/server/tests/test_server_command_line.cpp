// photon-server's command line (command_line.hpp): defaults, every engine flag reaching
// EngineOptions (--step-overlap and --no-lm-head-screen among them), the served name and body
// limit, and values the checks refuse.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "command_line.hpp"
#include "support/test_data.hpp"

namespace {

// Parses argv (after the program name) into a fresh CommandLine; throws CLI11's parse errors.
photon::server::CommandLine parse(std::vector<std::string> args) {
  photon::server::CommandLine cl;
  CLI::App app;
  photon::server::add_command_line(app, cl);
  std::vector<const char*> argv = {"photon-server"};
  for (const auto& a : args) argv.push_back(a.c_str());
  app.parse(int(argv.size()), argv.data());
  photon::server::finish_command_line(cl);
  return cl;
}

}  // namespace

TEST_CASE("server command line: defaults, and every engine flag reaches EngineOptions", "[server]") {
  const std::string dir = photon::test::stories_dir();
  const photon::EngineOptions defaults;
  const auto d = parse({"--model", dir});
  CHECK(d.engine.model_dir == dir);
  CHECK(d.engine.step_overlap == defaults.step_overlap);
  CHECK(d.engine.lm_head_screen);
  CHECK(d.engine.prefix_caching);
  CHECK(d.engine.weights == "auto");
  CHECK(d.server.model_name == "stories260K");  // the folder's name
  CHECK(d.server.max_body_bytes == int64_t(32) << 20);

  const auto c = parse({"--model", dir, "--step-overlap", "off", "--no-lm-head-screen", "--no-prefix-caching",
                        "--weights", "int8-lm-head", "--int8-group", "64", "--backend", "cpu", "--threads", "2",
                        "--max-seqs", "8", "--max-batch-tokens", "512", "--kv-blocks", "100",
                        "--served-model-name", "tiny", "--max-body-mb", "8", "--port", "0"});
  CHECK(c.engine.step_overlap == "off");
  CHECK_FALSE(c.engine.lm_head_screen);
  CHECK_FALSE(c.engine.prefix_caching);
  CHECK(c.engine.weights == "int8-lm-head");
  CHECK(c.engine.int8_group_size == 64);
  CHECK(c.engine.backend == "cpu");
  CHECK(c.engine.threads == 2);
  CHECK(c.engine.max_seqs == 8);
  CHECK(c.engine.max_batch_tokens == 512);
  CHECK(c.engine.kv_blocks == 100);
  CHECK(c.server.model_name == "tiny");
  CHECK(c.server.max_body_bytes == int64_t(8) << 20);
  CHECK(c.server.port == 0);
  for (const char* v : {"auto", "on", "off"}) CHECK(parse({"--model", dir, "--step-overlap", v}).engine.step_overlap == v);
}

TEST_CASE("server command line: values the checks refuse", "[server]") {
  const std::string dir = photon::test::stories_dir();
  CHECK_THROWS_AS(parse({}), CLI::ParseError);  // --model is required
  CHECK_THROWS_AS(parse({"--model", dir + "/no-such-folder"}), CLI::ParseError);
  CHECK_THROWS_AS(parse({"--model", dir, "--step-overlap", "sometimes"}), CLI::ParseError);
  CHECK_THROWS_AS(parse({"--model", dir, "--weights", "fp8"}), CLI::ParseError);
  CHECK_THROWS_AS(parse({"--model", dir, "--backend", "tpu"}), CLI::ParseError);
  CHECK_THROWS_AS(parse({"--model", dir, "--port", "70000"}), CLI::ParseError);
  CHECK_THROWS_AS(parse({"--model", dir, "--max-seqs", "0"}), CLI::ParseError);
  CHECK_THROWS_AS(parse({"--model", dir, "--kv-memory-fraction", "1.5"}), CLI::ParseError);
  CHECK_THROWS_AS(parse({"--model", dir, "--max-body-mb", "0"}), CLI::ParseError);
  CHECK_THROWS_AS(parse({"--model", dir, "--no-lm-head-screen=maybe"}), CLI::ParseError);
}
