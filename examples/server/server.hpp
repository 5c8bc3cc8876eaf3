// photon::server::Server: an OpenAI-compatible HTTP server over one
// photon::Engine (cpp-httplib), with a chat page at GET /.
//
// Endpoints (docs/server.md): GET /health, GET /v1/models[/{id}],
// POST /v1/completions, POST /v1/chat/completions, GET /metrics, GET /.
// Each HTTP request runs on one of http_threads pool threads; generation
// requests go through an EventRouter (event_router.hpp) and their answers are
// written by content providers, which notice a client that went away and
// cancel its request.
//
// Writing to a closed connection raises SIGPIPE: the process must ignore it
// (main.cpp and the tests do).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "photon/engine.hpp"
#include "photon/result.hpp"

namespace photon::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int32_t port = 8080;            // 0: an ephemeral port (Server::port() says which)
  std::string model_name{};       // the id /v1/models lists and responses carry; required
  std::string api_key{};          // non-empty: /v1/* and /metrics need "Authorization: Bearer <key>"
  int32_t http_threads = 32;      // HTTP requests served at once (streams hold one each)
  int32_t max_pending = 256;      // generation requests in flight; more are answered 503
  int64_t max_body_bytes = 32 << 20;  // larger request bodies are answered 413
  bool access_log = false;        // one line per request on stderr
};

class ServerState;

class Server {
 public:
  // Binds host:port and serves on a listener thread until stop(). The engine
  // must outlive the server and be stepped by its owner (Engine::start_loop);
  // the server only submits, cancels and polls. Errors: invalid_argument (an
  // option out of range), io_error (the address cannot be bound).
  static Result<std::unique_ptr<Server>> start(Engine& engine, ServerOptions options);
  ~Server();  // stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  const std::string& host() const noexcept;
  int32_t port() const noexcept { return port_; }
  // Cancels the requests in flight (their streams end), stops accepting and
  // waits for the HTTP threads. Idempotent; from any thread but a handler.
  void stop();

 private:
  explicit Server(std::unique_ptr<ServerState> state);
  std::unique_ptr<ServerState> state_;
  int32_t port_ = 0;
};

}  // namespace photon::server
