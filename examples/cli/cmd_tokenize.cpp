// photon tokenize --model DIR --text T: prints {"ids": [...]} (the folder may
// hold only the tokenizer files).
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "photon/tokenizer.hpp"

namespace photon::cli {
namespace {

struct TokenizeArgs {
  std::string model, text;
  bool add_special_tokens = true;
  bool parse_special = true;
};

const CliRegistrar kRegister{{"tokenize", "Encode text into token ids, printed as {\"ids\": [...]}", [](CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  app.add_option("--model", args->model, "Model or tokenizer folder (tokenizer.json or tokenizer.model)")->required();
  app.add_option("--text", args->text, "Text to encode (UTF-8)")->required();
  app.add_option("--add-special-tokens", args->add_special_tokens,
                 "Add the tokenizer's BOS/EOS around the text (true|false)")->default_val(true);
  app.add_option("--parse-special", args->parse_special,
                 "Turn special-token text such as <|eot_id|> into its id (true|false)")->default_val(true);
  app.callback([args] {
    auto tok = unwrap(Tokenizer::load(args->model));
    auto ids = unwrap(tok.encode(args->text, {.add_special_tokens = args->add_special_tokens,
                                              .parse_special = args->parse_special}));
    fmt::print("{}\n", nlohmann::json{{"ids", ids}}.dump());
  });
}}};

}  // namespace
}  // namespace photon::cli
