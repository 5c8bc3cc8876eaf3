#include "command_line.hpp"

#include <filesystem>
#include <system_error>

namespace photon::server {

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

void add_command_line(CLI::App& app, CommandLine& cl) {
  app.description("photon-server: an OpenAI-compatible HTTP server (/v1/completions, /v1/chat/completions) "
                  "and a chat page (GET /) over one photon engine");
  app.add_option("--model", cl.engine.model_dir, "Hugging Face model folder (config.json, *.safetensors, tokenizer)")
      ->required()
      ->check(CLI::ExistingDirectory);
  app.add_option("--host", cl.server.host, "address to listen on (loopback by default; 0.0.0.0 for every interface)")
      ->capture_default_str();
  app.add_option("--port", cl.server.port, "TCP port; 0 picks a free one")->capture_default_str()->check(CLI::Range(0, 65535));
  app.add_option("--backend", cl.engine.backend, "compute backend")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app.add_option("--device", cl.engine.device, "CUDA device ordinal")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--kv-blocks", cl.engine.kv_blocks, "KV cache size in blocks of 16 tokens (0: sized from free memory)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--kv-memory-fraction", cl.engine.kv_memory_fraction,
                 "KV cache size as a share of the free memory left after loading the weights, in (0, 1] "
                 "(instead of --kv-blocks)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--max-seqs", cl.engine.max_seqs, "sequences running at once")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--max-batch-tokens", cl.engine.max_batch_tokens, "tokens per engine step")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--threads", cl.engine.threads, "CPU backend threads (0: all cores)")->check(CLI::NonNegativeNumber);
  app.add_option("--weights", cl.engine.weights,
                 "linear weights: as the checkpoint stores them (auto), group-wise int8 quantized at load (int8), "
                 "or int8 with the LM head too (int8-lm-head)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "int8", "int8-lm-head"}));
  app.add_option("--int8-group", cl.engine.int8_group_size, "with int8 weights: input features per scale")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_flag("!--no-prefix-caching", cl.engine.prefix_caching, "do not share the KV blocks of equal prompt prefixes");
  app.add_option("--step-overlap", cl.engine.step_overlap,
                 "launch each step before the previous one's tokens are read: where the backend runs steps "
                 "asynchronously (auto: CUDA), always (on), never (off)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "on", "off"}));
  app.add_flag("!--no-lm-head-screen", cl.engine.lm_head_screen,
               "no int8 copy of the LM head for single-sequence decode steps (docs/lm-head-screen.md): "
               "its memory back, every step streams the bf16 head");
  app.add_option("--served-model-name", cl.served_name, "the model id clients send and see (default: the folder's name)");
  app.add_option("--api-key", cl.server.api_key, "require \"Authorization: Bearer KEY\" on /v1/* and /metrics");
  app.add_option("--http-threads", cl.server.http_threads, "HTTP requests served at once (a stream holds one)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-pending", cl.server.max_pending, "generation requests in flight; more are answered 503")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-body-mb", cl.max_body_mb, "largest request body in MiB; larger ones are answered 413")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(4096)));
  app.add_flag("--log-requests", cl.server.access_log, "print one line per HTTP request on stderr");
}

void finish_command_line(CommandLine& cl) {
  cl.server.model_name = cl.served_name.empty() ? folder_name(cl.engine.model_dir) : cl.served_name;
  cl.server.max_body_bytes = cl.max_body_mb << 20;
}

}  // namespace photon::server
