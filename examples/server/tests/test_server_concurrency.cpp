// photon-server under concurrency: simultaneous requests, a client that goes
// away, a full server (503) and a shutdown with requests in flight. Where the
// timing matters the engine runs without its loop and the test steps it, so
// the request's progress is under the test's control. Every wait is bounded.
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "server_fixture.hpp"

using namespace photon;
using namespace photon::server::test;

namespace {

// Steps `engine` (whose loop is not running) until `done()` and the engine has
// no work left, pausing between steps so that other threads see each token;
// false when that takes more than `max_steps`.
template <class Done>
bool step_until(Engine& engine, Done done, int max_steps = 3000) {
  for (int i = 0; i < max_steps; ++i) {
    if (done() && !engine.has_work()) return true;
    if (!engine.step()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

// Waits until the engine has `n` requests queued (submitted, not yet stepped).
bool wait_waiting(Engine& engine, int32_t n) {
  for (int i = 0; i < 2000; ++i) {
    if (engine.metrics().waiting >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

}  // namespace

TEST_CASE("server: eight simultaneous requests are all answered", "[api]") {
  TestServer ts(photon::test::stories_dir());
  const json goldens[2] = {golden("once_upon_a_time"), golden("bos_only")};
  constexpr int kClients = 8;
  struct Outcome {
    int status = 0;
    std::vector<int32_t> ids;
    bool done = false;  // streamed: ended with [DONE]
  };
  std::vector<Outcome> out(kClients);
  std::vector<std::thread> threads;
  std::atomic<int> ready{0};
  for (int t = 0; t < kClients; ++t) {
    threads.emplace_back([&, t] {
      const json& g = goldens[t % 2];
      const bool stream = t % 4 >= 2;
      const json req = {{"prompt", g["prompt"]},
                        {"temperature", 0},
                        {"max_tokens", g["generated_ids"].size()},
                        {"return_token_ids", true},
                        {"stream", stream}};
      auto client = ts.client();
      ready.fetch_add(1);
      while (ready.load() < kClients) std::this_thread::yield();  // all send at once
      auto res = client->Post("/v1/completions", req.dump(), "application/json");
      if (!res) return;
      out[t].status = res->status;
      if (res->status != 200) return;
      if (!stream) {
        out[t].ids = json::parse(res->body)["choices"][0]["token_ids"].get<std::vector<int32_t>>();
        return;
      }
      // Parsed here without Catch assertions (not thread-safe); checked below.
      size_t pos = 0;
      while (pos < res->body.size()) {
        const size_t end = res->body.find("\n\n", pos);
        if (end == std::string::npos) break;
        const std::string data = res->body.substr(pos + 6, end - pos - 6);
        pos = end + 2;
        if (data == "[DONE]") {
          out[t].done = true;
          continue;
        }
        const json c = json::parse(data, nullptr, false);
        if (c.is_discarded() || c["choices"].empty()) continue;
        for (int32_t id : c["choices"][0]["token_ids"].get<std::vector<int32_t>>()) out[t].ids.push_back(id);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kClients; ++t) {
    INFO("client " << t);
    CHECK(out[t].status == 200);
    CHECK(out[t].ids == goldens[t % 2]["generated_ids"].get<std::vector<int32_t>>());
    if (t % 4 >= 2) CHECK(out[t].done);
  }
  auto metrics = ts.get("/metrics");
  REQUIRE(metrics);
  CHECK(metrics->body.find("photon_server_requests_total 8") != std::string::npos);
}

TEST_CASE("server: a client that disconnects cancels its request", "[api]") {
  FixtureOptions fo;
  fo.start_loop = false;
  TestServer ts(photon::test::stories_dir(), fo);
  constexpr int kMaxTokens = 400;
  std::atomic<bool> client_done{false};
  std::atomic<int> chunks_seen{0};
  std::thread client_thread([&] {
    auto client = ts.client();
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.set_header("Content-Type", "application/json");
    req.body = json{{"prompt", "Once upon a time"}, {"max_tokens", kMaxTokens}, {"ignore_eos", true}, {"stream", true}}
                   .dump();
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
      chunks_seen.fetch_add(1);
      return false;  // hang up after the first chunk
    };
    (void)client->send(req);
    client_done.store(true);
  });
  const bool settled = step_until(ts.engine(), [&] { return client_done.load(); });
  client_thread.join();
  REQUIRE(settled);
  CHECK(chunks_seen.load() == 1);
  // The engine stopped generating long before max_tokens.
  CHECK(ts.engine().metrics().tokens_generated < uint64_t(kMaxTokens));
  auto metrics = ts.get("/metrics");
  REQUIRE(metrics);
  CHECK(metrics->body.find("photon_server_client_disconnects_total 1") != std::string::npos);
  CHECK(metrics->body.find("photon_server_open_requests 0") != std::string::npos);
}

TEST_CASE("server: requests beyond max_pending are answered 503", "[api]") {
  FixtureOptions fo;
  fo.start_loop = false;
  fo.max_pending = 1;
  TestServer ts(photon::test::stories_dir(), fo);
  const json req = {{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"temperature", 0}};
  std::atomic<bool> first_done{false};
  int first_status = 0;
  std::string first_body;
  std::thread first([&] {
    auto res = ts.post("/v1/completions", req);
    if (res) {
      first_status = res->status;
      first_body = res->body;
    }
    first_done.store(true);
  });
  REQUIRE(wait_waiting(ts.engine(), 1));  // the first request is queued and holds the only slot
  const json e = require_error(ts.post("/v1/completions", req), 503);
  CHECK(e["type"] == "server_overloaded");
  // Stepping serves the first request; then there is room again.
  const bool settled = step_until(ts.engine(), [&] { return first_done.load(); });
  first.join();
  REQUIRE(settled);
  CHECK(first_status == 200);
  CHECK(json::parse(first_body)["usage"]["completion_tokens"] == 8);
  REQUIRE(ts.engine().start_loop().has_value());
  auto again = ts.post("/v1/completions", req);
  REQUIRE(again);
  CHECK(again->status == 200);
}

TEST_CASE("server: stop() ends the streams in flight and returns", "[api]") {
  FixtureOptions fo;
  fo.start_loop = false;  // nothing progresses: the stream waits until the server stops
  TestServer ts(photon::test::stories_dir(), fo);
  std::atomic<bool> finished{false};
  bool got_done = false;
  std::thread client_thread([&] {
    auto res = ts.post("/v1/completions", json{{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"stream", true}});
    got_done = res && res->body.find("[DONE]") != std::string::npos;
    finished.store(true);
  });
  REQUIRE(wait_waiting(ts.engine(), 1));
  ts.server().stop();
  client_thread.join();
  CHECK(finished.load());
  CHECK_FALSE(got_done);  // the stream was cut, not completed
  // The cancelled request ends at the engine's next steps.
  CHECK(step_until(ts.engine(), [] { return true; }));
}
