#include "server.hpp"

#include <fmt/core.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <utility>

#include "chat_page.hpp"
#include "generation_handler.hpp"
#include "http_util.hpp"
#include "server_state.hpp"

namespace photon::server {

using nlohmann::json;

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

namespace {

std::string random_hex(int digits) {
  std::random_device rd;
  std::mt19937_64 rng((uint64_t(rd()) << 32) ^ rd());
  std::string s;
  for (int i = 0; i < digits; ++i) s += "0123456789abcdef"[rng() & 15];
  return s;
}

std::string http_status_text(int status) {
  switch (status) {
    case 400: return "malformed HTTP request";
    case 413: return "the request body is larger than the server accepts (--max-body-mb)";
    case 414: return "the request URI is too long";
    case 416: return "range not satisfiable";
    default: return "HTTP error " + std::to_string(status);
  }
}

json model_card(const ServerState& s) {
  return {{"id", s.options.model_name},
          {"object", "model"},
          {"created", s.started_at},
          {"owned_by", "photon"},
          {"max_model_len", s.engine.max_model_len()}};
}

// Prometheus text format.
std::string metrics_text(const ServerState& s) {
  const EngineMetrics m = s.engine.metrics();
  const ServerCounters& c = s.counters;
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help, double value) {
    out += fmt::format("# HELP {0} {1}\n# TYPE {0} {2}\n{0} {3}\n", name, help, type, value);
  };
  auto load = [](const std::atomic<uint64_t>& a) { return double(a.load(std::memory_order_relaxed)); };
  metric("photon_server_requests_total", "counter", "Generation requests accepted.", load(c.generation_requests));
  metric("photon_server_rejected_requests_total", "counter", "Generation requests answered with an error.",
         load(c.rejected_requests));
  metric("photon_server_client_disconnects_total", "counter", "Requests cancelled because their client went away.",
         load(c.client_disconnects));
  metric("photon_server_prompt_tokens_total", "counter", "Prompt tokens of accepted requests.", load(c.prompt_tokens));
  metric("photon_server_generation_tokens_total", "counter", "Tokens generated for finished responses.",
         load(c.completion_tokens));
  metric("photon_server_open_requests", "gauge", "Generation requests being answered.", s.router.open_requests());
  metric("photon_engine_running_sequences", "gauge", "Sequences holding KV blocks.", m.running);
  metric("photon_engine_waiting_sequences", "gauge", "Requests queued, preempted ones included.", m.waiting);
  metric("photon_engine_kv_blocks_total", "gauge", "KV cache blocks.", m.kv_blocks_total);
  metric("photon_engine_kv_usage", "gauge", "Share of KV blocks held by sequences.", m.kv_usage);
  metric("photon_engine_prefix_hit_rate", "gauge", "Prompt tokens served from the prefix cache / admitted.",
         m.prefix_hit_rate);
  metric("photon_engine_steps_total", "counter", "Engine steps that ran a batch.", double(m.steps));
  metric("photon_engine_generated_tokens_total", "counter", "Tokens sampled by the engine.", double(m.tokens_generated));
  metric("photon_engine_preemptions_total", "counter", "Sequences preempted.", double(m.preemptions));
  return out;
}

void register_routes(ServerState& s) {
  httplib::Server& http = s.http;
  http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(chat_page_html()), "text/html; charset=utf-8");
  });
  http.Get("/health", [&s](const httplib::Request&, httplib::Response& res) {
    if (s.stopping.load()) return send_json(res, 503, {{"status", "stopping"}});
    send_json(res, 200, {{"status", "ok"}});
  });
  http.Get("/v1/models", [&s](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"object", "list"}, {"data", json::array({model_card(s)})}});
  });
  http.Get(R"(/v1/models/(.+))", [&s](const httplib::Request& req, httplib::Response& res) {
    if (req.matches[1] != s.options.model_name)
      return send_error(res, not_found("the model '" + std::string(req.matches[1]) + "' is not served here"));
    send_json(res, 200, model_card(s));
  });
  http.Get("/metrics", [&s](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_text(s), "text/plain; version=0.0.4");
  });
  http.Post("/v1/completions", [&s](const httplib::Request& req, httplib::Response& res) {
    handle_generation(s, ApiKind::completion, req, res);
  });
  http.Post("/v1/chat/completions", [&s](const httplib::Request& req, httplib::Response& res) {
    handle_generation(s, ApiKind::chat, req, res);
  });

  // An unknown route, a body over the limit, a malformed HTTP request:
  // httplib set the status; give it an OpenAI error body.
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) return send_error(res, not_found("no route " + req.method + " " + req.path));
    const char* type = res.status >= 500 ? "server_error" : "invalid_request_error";
    send_error(res, ApiError{res.status, type, http_status_text(res.status), {}});
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, ApiError{500, "server_error", "internal error: " + what, {}});
  });
  if (!s.options.api_key.empty()) {
    http.set_pre_routing_handler([&s](const httplib::Request& req, httplib::Response& res) {
      const bool protected_path = req.path.rfind("/v1/", 0) == 0 || req.path == "/metrics";
      if (!protected_path || req.get_header_value("Authorization") == "Bearer " + s.options.api_key)
        return httplib::Server::HandlerResponse::Unhandled;
      send_error(res, ApiError{401, "authentication_error", "missing or wrong API key (Authorization: Bearer ...)", {}});
      return httplib::Server::HandlerResponse::Handled;
    });
  }
  if (s.options.access_log) {
    http.set_logger([](const httplib::Request& req, const httplib::Response& res) {
      std::fprintf(stderr, "%s %s %s -> %d\n", req.remote_addr.c_str(), req.method.c_str(), req.path.c_str(), res.status);
    });
  }
}

Result<void> check_options(const ServerOptions& o) {
  auto bad = [](const std::string& what) { return fail(Errc::invalid_argument, "server option " + what); };
  if (o.host.empty()) return bad("host is empty");
  if (o.port < 0 || o.port > 65535) return bad("port = " + std::to_string(o.port) + ": must be in [0, 65535]");
  if (o.model_name.empty()) return bad("model_name is empty");
  if (o.http_threads < 1) return bad("http_threads = " + std::to_string(o.http_threads) + ": must be >= 1");
  if (o.max_pending < 1) return bad("max_pending = " + std::to_string(o.max_pending) + ": must be >= 1");
  if (o.max_body_bytes < 1) return bad("max_body_bytes must be >= 1");
  return {};
}

}  // namespace

ServerState::ServerState(Engine& e, ServerOptions o)
    : engine(e),
      options(std::move(o)),
      router(e, options.max_pending),
      started_at(unix_seconds()),
      id_prefix(random_hex(8)) {}

Result<std::unique_ptr<Server>> Server::start(Engine& engine, ServerOptions options) {
  if (auto ok = check_options(options); !ok) return fail(ok.error());
  auto state = std::make_unique<ServerState>(engine, std::move(options));
  ServerState& s = *state;
  const size_t threads = size_t(s.options.http_threads);
  s.http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.http.set_payload_max_length(size_t(s.options.max_body_bytes));
  register_routes(s);

  int port = s.options.port;
  if (port == 0) port = s.http.bind_to_any_port(s.options.host);
  else if (!s.http.bind_to_port(s.options.host, port)) port = -1;
  if (port <= 0)
    return fail(Errc::io_error, "cannot listen on " + s.options.host + ":" + std::to_string(s.options.port) +
                                    " (the port is in use, or the host is not an address of this machine)");
  s.listener = std::thread([&s] { s.http.listen_after_bind(); });
  std::unique_ptr<Server> server(new Server(std::move(state)));
  server->port_ = port;
  return server;
}

Server::Server(std::unique_ptr<ServerState> state) : state_(std::move(state)) {}

Server::~Server() { stop(); }

const std::string& Server::host() const noexcept { return state_->options.host; }

void Server::stop() {
  std::call_once(state_->stop_once, [this] {
    state_->stopping.store(true);
    state_->router.close();  // streaming handlers return, so the HTTP threads can be joined
    state_->http.stop();
    if (state_->listener.joinable()) state_->listener.join();
  });
}

}  // namespace photon::server
