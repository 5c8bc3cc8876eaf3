// photon-server --model DIR: an OpenAI-compatible HTTP server and chat page
// over one photon::Engine (docs/server.md).
//
// Threads: the engine's loop thread steps the engine; httplib's pool threads
// serve HTTP; the router's dispatcher routes events; this thread waits for
// SIGINT / SIGTERM (blocked in every thread, taken with sigwait) and then
// stops the server cleanly.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <csignal>
#include <pthread.h>
#include <string>

#include "command_line.hpp"
#include "photon/engine.hpp"
#include "server.hpp"

int main(int argc, char** argv) {
  photon::server::CommandLine cl;
  CLI::App app;
  photon::server::add_command_line(app, cl);
  CLI11_PARSE(app, argc, argv);
  photon::server::finish_command_line(cl);
  const photon::EngineOptions& eo = cl.engine;
  const photon::server::ServerOptions& so = cl.server;

  // Before any thread starts, so that every thread inherits the mask and only
  // sigwait below takes these signals.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a client that went away is a failed write, not the end of the process

  auto engine = photon::Engine::open(eo);
  if (!engine) {
    fmt::print(stderr, "photon-server: error: {}: {}\n", photon::errc_name(engine.error().code), engine.error().message);
    return 1;
  }
  if (auto loop = engine->start_loop(); !loop) {
    fmt::print(stderr, "photon-server: error: {}\n", loop.error().message);
    return 1;
  }
  auto server = photon::server::Server::start(*engine, so);
  if (!server) {
    fmt::print(stderr, "photon-server: error: {}\n", server.error().message);
    return 1;
  }
  const photon::Tokenizer* tok = engine->tokenizer();
  const std::string weights = eo.weights == "auto" ? std::string("weights as stored")
                              : fmt::format("{} weights, group {}", eo.weights, eo.int8_group_size);
  fmt::print(stderr, "photon-server: {} ('{}') on {}, {}: {} tokens of context, KV cache {} tokens, {}\n",
             eo.model_dir, so.model_name, engine->backend_name(), weights, engine->max_model_len(),
             engine->kv_capacity_tokens(),
             tok == nullptr                                                  ? "no tokenizer (token-id prompts only)"
             : tok->chat_template_kind() == photon::ChatTemplateKind::none ? "no chat template (/v1/completions only)"
                                                                             : "chat template found");
  fmt::print("photon-server: listening on http://{}:{}/\n", (*server)->host(), (*server)->port());
  std::fflush(stdout);

  int sig = 0;
  sigwait(&stop_signals, &sig);
  fmt::print(stderr, "photon-server: {} received, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  (*server)->stop();
  engine->stop_loop();
  return 0;
}
