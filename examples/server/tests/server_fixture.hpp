// A photon-server running in-process for a test: an Engine on the CPU backend
// (one compute thread, a small KV cache) and a Server on 127.0.0.1 with an
// ephemeral port, plus helpers to talk to it with httplib's client and to
// read server-sent events. Only loopback addresses are used.
#pragma once

#include <catch2/catch.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "photon/engine.hpp"
#include "server.hpp"
#include "support/test_data.hpp"

namespace photon::server::test {

using nlohmann::json;

struct FixtureOptions {
  bool start_loop = true;  // false: the test steps the engine itself
  int32_t max_pending = 64;
  std::string api_key{};
  std::string model_name = "stories260K";
  std::string weights = "auto";  // EngineOptions::weights (photon-server --weights)
};

inline EngineOptions test_engine_options(const std::string& model_dir, const std::string& weights = "auto") {
  EngineOptions eo;
  eo.model_dir = model_dir;
  eo.backend = "cpu";
  eo.threads = 1;
  eo.kv_blocks = 256;  // 4096 tokens
  eo.max_seqs = 16;
  eo.weights = weights;
  return eo;
}

inline Engine open_test_engine(const std::string& model_dir, const std::string& weights = "auto") {
  const EngineOptions eo = test_engine_options(model_dir, weights);
  auto engine = Engine::open(eo);
  INFO((engine ? std::string() : engine.error().message));
  REQUIRE(engine.has_value());
  return std::move(*engine);
}

class TestServer {
 public:
  explicit TestServer(const std::string& model_dir, FixtureOptions fo = {})
      : engine_(open_test_engine(model_dir, fo.weights)) {
    std::signal(SIGPIPE, SIG_IGN);  // writes to a client that went away must fail, not kill the test
    if (fo.start_loop) REQUIRE(engine_.start_loop().has_value());
    ServerOptions so;
    so.host = "127.0.0.1";
    so.port = 0;
    so.model_name = fo.model_name;
    so.max_pending = fo.max_pending;
    so.api_key = fo.api_key;
    so.http_threads = 16;
    auto server = Server::start(engine_, so);
    INFO((server ? std::string() : server.error().message));
    REQUIRE(server.has_value());
    server_ = std::move(*server);
  }
  ~TestServer() {
    server_->stop();
    engine_.stop_loop();
  }
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  Engine& engine() { return engine_; }
  Server& server() { return *server_; }
  int port() const { return server_->port(); }

  std::unique_ptr<httplib::Client> client() const {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    c->set_connection_timeout(5);
    c->set_read_timeout(60);
    c->set_write_timeout(10);
    return c;
  }
  httplib::Result post(const std::string& path, const std::string& body) const {
    return client()->Post(path.c_str(), body, "application/json");
  }
  httplib::Result post(const std::string& path, const json& body) const { return post(path, body.dump()); }
  httplib::Result get(const std::string& path) const { return client()->Get(path.c_str()); }

 private:
  Engine engine_;
  std::unique_ptr<Server> server_;
};

// The JSON payloads of a server-sent-event body, in order; `done` tells
// whether it ended with "data: [DONE]". Every event must be one "data: " line.
inline std::vector<json> sse_payloads(const std::string& body, bool& done) {
  std::vector<json> out;
  done = false;
  size_t pos = 0;
  while (pos < body.size()) {
    const size_t end = body.find("\n\n", pos);
    REQUIRE(end != std::string::npos);  // every event is terminated
    const std::string event = body.substr(pos, end - pos);
    pos = end + 2;
    REQUIRE(event.rfind("data: ", 0) == 0);
    REQUIRE_FALSE(done);  // nothing after [DONE]
    const std::string data = event.substr(6);
    if (data == "[DONE]") {
      done = true;
      continue;
    }
    json j = json::parse(data, nullptr, false);
    REQUIRE_FALSE(j.is_discarded());
    out.push_back(std::move(j));
  }
  return out;
}

// An error answer: the status, and an OpenAI error body whose code repeats it.
inline json require_error(const httplib::Result& res, int status) {
  REQUIRE(res);
  INFO(res->body);
  REQUIRE(res->status == status);
  json j = json::parse(res->body, nullptr, false);
  REQUIRE(j.is_object());
  REQUIRE(j.contains("error"));
  const json& e = j["error"];
  CHECK(e["message"].is_string());
  CHECK_FALSE(e["message"].get<std::string>().empty());
  CHECK(e["type"].is_string());
  CHECK(e["code"] == status);
  return e;
}

inline json read_json_file(const std::string& path) {
  std::ifstream f(path);
  REQUIRE(f.good());
  json j = json::parse(f, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  return j;
}

inline json golden(const std::string& name) {
  return read_json_file(photon::test::stories_dir() + "/golden/" + name + ".json");
}

}  // namespace photon::server::test
