// photon logits --model DIR --tokens 1,2,3
// Prints {"logits": [[...], ...]}: one row of float32 logits per input position.
#include <fmt/format.h>

#include <cmath>
#include <memory>

#include "cli_model.hpp"
#include "commands.hpp"

namespace photon::cli {
namespace {

struct LogitsArgs {
  std::string model;
  std::string tokens;
  int32_t threads = -1;
};

void print_row(std::FILE* out, const std::vector<float>& row) {
  std::fputc('[', out);
  for (size_t i = 0; i < row.size(); ++i) {
    if (i > 0) std::fputc(',', out);
    if (std::isfinite(row[i])) fmt::print(out, "{}", row[i]);  // shortest round-trip form
    else std::fputs("null", out);                              // JSON has no inf/NaN
  }
  std::fputc(']', out);
}

void run(const LogitsArgs& a) {
  LoadedModel m = unwrap(load_model(a.model, a.threads));
  const std::vector<int32_t> tokens = unwrap(parse_token_list(a.tokens, m.model->config().vocab_size));
  unwrap(check_positions(m.model->config(), int64_t(tokens.size()), "--tokens"));
  const auto rows = unwrap(prompt_logits(m, tokens));
  std::fputs("{\"logits\": [", stdout);
  for (size_t r = 0; r < rows.size(); ++r) {
    if (r > 0) std::fputs(", ", stdout);
    print_row(stdout, rows[r]);
  }
  std::fputs("]}\n", stdout);
}

void setup(CLI::App& app) {
  auto args = std::make_shared<LogitsArgs>();
  app.add_option("--model", args->model, "Hugging Face model folder (config.json + *.safetensors)")->required();
  app.add_option("--tokens", args->tokens, "comma-separated input token ids")->required();
  app.add_option("--threads", args->threads, "CPU worker threads besides the caller (-1: all cores)");
  app.callback([args] { run(*args); });
}

const CliRegistrar registrar{{"logits", "print the logits of every input position as JSON", setup}};

}  // namespace
}  // namespace photon::cli
