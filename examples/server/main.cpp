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
#include <filesystem>
#include <pthread.h>
#include <string>

#include "photon/engine.hpp"
#include "server.hpp"

namespace {

// The served model id when --served-model-name is not given: the folder's name.
std::string folder_name(const std::string& dir) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::weakly_canonical(dir, ec);
  if (ec) p = dir;
  std::string name = p.filename().string();
  if (name.empty()) name = p.parent_path().filename().string();
  return name.empty() ? std::string("model") : name;
}

}  // namespace

int main(int argc, char** argv) {
  photon::EngineOptions eo;
  photon::server::ServerOptions so;
  std::string served_name;
  int64_t max_body_mb = 32;

  CLI::App app{"photon-server: an OpenAI-compatible HTTP server (/v1/completions, /v1/chat/completions) "
               "and a chat page (GET /) over one photon engine"};
  app.add_option("--model", eo.model_dir, "Hugging Face model folder (config.json, *.safetensors, tokenizer)")
      ->required()
      ->check(CLI::ExistingDirectory);
  app.add_option("--host", so.host, "address to listen on (loopback by default; 0.0.0.0 for every interface)")
      ->capture_default_str();
  app.add_option("--port", so.port, "TCP port; 0 picks a free one")->capture_default_str()->check(CLI::Range(0, 65535));
  app.add_option("--backend", eo.backend, "compute backend")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app.add_option("--device", eo.device, "CUDA device ordinal")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--kv-blocks", eo.kv_blocks, "KV cache size in blocks of 16 tokens (0: sized from free memory)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--kv-memory-fraction", eo.kv_memory_fraction,
                 "KV cache size as a share of the free memory left after loading the weights, in (0, 1] "
                 "(instead of --kv-blocks)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--max-seqs", eo.max_seqs, "sequences running at once")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--max-batch-tokens", eo.max_batch_tokens, "tokens per engine step")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--threads", eo.threads, "CPU backend threads (0: all cores)")->check(CLI::NonNegativeNumber);
  app.add_option("--weights", eo.weights,
                 "linear weights: as the checkpoint stores them (auto), group-wise int8 quantized at load (int8), "
                 "or int8 with the LM head too (int8-lm-head)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "int8", "int8-lm-head"}));
  app.add_option("--int8-group", eo.int8_group_size, "with int8 weights: input features per scale")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_flag("!--no-prefix-caching", eo.prefix_caching, "do not share the KV blocks of equal prompt prefixes");
  app.add_option("--step-overlap", eo.step_overlap,
                 "launch each step before the previous one's tokens are read: where the backend runs steps "
                 "asynchronously (auto: CUDA), always (on), never (off)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "on", "off"}));
  app.add_flag("!--no-lm-head-screen", eo.lm_head_screen,
               "no int8 copy of the LM head for single-sequence decode steps (docs/lm-head-screen.md): "
               "its memory back, every step streams the bf16 head");
  app.add_option("--served-model-name", served_name, "the model id clients send and see (default: the folder's name)");
  app.add_option("--api-key", so.api_key, "require \"Authorization: Bearer KEY\" on /v1/* and /metrics");
  app.add_option("--http-threads", so.http_threads, "HTTP requests served at once (a stream holds one)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-pending", so.max_pending, "generation requests in flight; more are answered 503")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-body-mb", max_body_mb, "largest request body in MiB; larger ones are answered 413")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(4096)));
  app.add_flag("--log-requests", so.access_log, "print one line per HTTP request on stderr");
  CLI11_PARSE(app, argc, argv);
  so.model_name = served_name.empty() ? folder_name(eo.model_dir) : served_name;
  so.max_body_bytes = max_body_mb << 20;

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
