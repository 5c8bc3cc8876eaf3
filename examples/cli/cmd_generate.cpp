// photon generate --model DIR (--tokens 1,2,3 | --prompt TEXT) --max-tokens N [--json]
// Greedy continuation of the prompt; stops after an eos id ("stop": config.json's
// eos_token_id, plus the tokenizer's when --prompt is used) or after N tokens ("length").
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli_model.hpp"
#include "commands.hpp"
#include "photon/tokenizer.hpp"

namespace photon::cli {
namespace {

struct GenerateArgs {
  std::string model;
  std::string tokens;
  std::string prompt;
  int32_t max_tokens = 16;
  bool json = false;
  bool ignore_eos = false;
  int32_t threads = -1;
};

void run(const GenerateArgs& a) {
  if (a.tokens.empty() == a.prompt.empty()) fail("give exactly one of --tokens and --prompt");
  LoadedModel m = unwrap(load_model(a.model, a.threads));
  const ModelConfig& config = m.model->config();
  std::optional<Tokenizer> tokenizer;
  std::vector<int32_t> prompt;
  std::vector<int32_t> stop_ids = config.eos_token_ids;
  if (!a.prompt.empty()) {
    tokenizer.emplace(unwrap(Tokenizer::load(a.model)));
    prompt = unwrap(tokenizer->encode(a.prompt));
    stop_ids.insert(stop_ids.end(), tokenizer->eos_token_ids().begin(), tokenizer->eos_token_ids().end());
    for (int32_t id : prompt)
      if (id >= config.vocab_size)
        fail(fmt::format("--prompt: the tokenizer gives id {}, outside the model's vocabulary [0, {})", id,
                         config.vocab_size));
  } else {
    prompt = unwrap(parse_token_list(a.tokens, config.vocab_size));
  }
  unwrap(check_positions(config, int64_t(prompt.size()) + a.max_tokens, "the prompt plus --max-tokens"));
  if (a.ignore_eos) stop_ids.clear();
  const GreedyResult r = unwrap(greedy_generate(m, prompt, a.max_tokens, stop_ids));
  const char* reason = r.stopped ? "stop" : "length";
  std::optional<std::string> text;
  if (tokenizer) text = unwrap(tokenizer->decode(r.tokens, {.skip_special_tokens = true}));
  if (a.json) {
    nlohmann::json out = {{"tokens", r.tokens}, {"finish_reason", reason}};
    if (text) out["text"] = *text;
    fmt::print("{}\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  } else if (text) {
    fmt::print("{}{}\n", a.prompt, *text);
  } else {
    fmt::print("{}\nfinish_reason: {}\n", fmt::join(r.tokens, " "), reason);
  }
}

void setup(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  app.add_option("--model", args->model, "Hugging Face model folder (config.json + *.safetensors)")->required();
  app.add_option("--tokens", args->tokens, "comma-separated prompt token ids");
  app.add_option("--prompt", args->prompt, "prompt text, encoded with the folder's tokenizer");
  app.add_option("--max-tokens", args->max_tokens, "tokens to generate at most")->check(CLI::Range(0, 1 << 30));
  app.add_flag("--json", args->json, "print {\"tokens\": [...], \"finish_reason\": ... [, \"text\": ...]}");
  app.add_flag("--ignore-eos", args->ignore_eos, "do not stop on eos ids");
  app.add_option("--threads", args->threads, "CPU worker threads besides the caller (-1: all cores)");
  app.callback([args] { run(*args); });
}

const CliRegistrar registrar{{"generate", "greedy generation from prompt token ids or text", setup}};

}  // namespace
}  // namespace photon::cli
