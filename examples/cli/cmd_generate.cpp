// photon generate --model DIR --tokens 1,2,3 --max-tokens N [--json]
// Greedy continuation of the prompt; stops after one of config.json's
// eos_token_id values ("stop") or after N tokens ("length").
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <memory>

#include "cli_model.hpp"
#include "commands.hpp"

namespace photon::cli {
namespace {

struct GenerateArgs {
  std::string model;
  std::string tokens;
  int32_t max_tokens = 16;
  bool json = false;
  bool ignore_eos = false;
  int32_t threads = -1;
};

void run(const GenerateArgs& a) {
  LoadedModel m = unwrap(load_model(a.model, a.threads));
  const ModelConfig& config = m.model->config();
  const std::vector<int32_t> prompt = unwrap(parse_token_list(a.tokens, config.vocab_size));
  unwrap(check_positions(config, int64_t(prompt.size()) + a.max_tokens, "--tokens plus --max-tokens"));
  const std::vector<int32_t> no_stop;
  const GreedyResult r = unwrap(greedy_generate(m, prompt, a.max_tokens, a.ignore_eos ? no_stop : config.eos_token_ids));
  const char* reason = r.stopped ? "stop" : "length";
  if (a.json)
    fmt::print("{{\"tokens\": [{}], \"finish_reason\": \"{}\"}}\n", fmt::join(r.tokens, ", "), reason);
  else
    fmt::print("{}\nfinish_reason: {}\n", fmt::join(r.tokens, " "), reason);
}

void setup(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  app.add_option("--model", args->model, "Hugging Face model folder (config.json + *.safetensors)")->required();
  app.add_option("--tokens", args->tokens, "comma-separated prompt token ids")->required();
  app.add_option("--max-tokens", args->max_tokens, "tokens to generate at most")->check(CLI::Range(0, 1 << 30));
  app.add_flag("--json", args->json, "print {\"tokens\": [...], \"finish_reason\": ...}");
  app.add_flag("--ignore-eos", args->ignore_eos, "do not stop on the config's eos_token_id");
  app.add_option("--threads", args->threads, "CPU worker threads besides the caller (-1: all cores)");
  app.callback([args] { run(*args); });
}

const CliRegistrar registrar{{"generate", "greedy generation from prompt token ids", setup}};

}  // namespace
}  // namespace photon::cli
