// What the HTTP handlers of one Server share. Internal to the server example.
#pragma once

#include <httplib.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "event_router.hpp"
#include "server.hpp"

namespace photon::server {

// Monotonic counts for GET /metrics; relaxed atomics, any thread.
struct ServerCounters {
  std::atomic<uint64_t> generation_requests{0};  // accepted by the engine
  std::atomic<uint64_t> rejected_requests{0};    // answered with an error before generating
  std::atomic<uint64_t> client_disconnects{0};   // requests cancelled because the client went away
  std::atomic<uint64_t> prompt_tokens{0};
  std::atomic<uint64_t> completion_tokens{0};
};

class ServerState {
 public:
  ServerState(Engine& e, ServerOptions o);

  Engine& engine;
  const ServerOptions options;
  EventRouter router;
  ServerCounters counters;
  const int64_t started_at;      // Unix seconds
  const std::string id_prefix;   // random per server run: response ids differ across restarts
  httplib::Server http;
  std::thread listener;          // runs http.listen_after_bind()
  std::once_flag stop_once;
  std::atomic<bool> stopping{false};
};

// The Unix time in seconds.
int64_t unix_seconds();

}  // namespace photon::server
