// photon render --model DIR --messages FILE.json: prints the prompt that
// apply_chat_template(messages, add_generation_prompt=True) gives, exactly
// (no newline is added after it).
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "commands.hpp"
#include "photon/tokenizer.hpp"

namespace photon::cli {
namespace {

struct RenderArgs {
  std::string model, messages_file, date_string;
  bool enable_thinking = true;
  bool add_generation_prompt = true;
};

// An OpenAI-style messages array, or an object with a "messages" array.
std::vector<ChatMessage> read_messages(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(fmt::format("--messages: cannot open {}", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  const auto j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded()) fail(fmt::format("--messages: {} is not valid JSON", path));
  const nlohmann::json& arr = j.is_object() && j.contains("messages") ? j["messages"] : j;
  if (!arr.is_array()) fail(fmt::format("--messages: {} must hold an array of messages", path));
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < arr.size(); ++i) {
    const auto& m = arr[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
        !m["content"].is_string())
      fail(fmt::format("--messages: message {} needs string \"role\" and \"content\"", i));
    ChatMessage msg{m["role"].get<std::string>(), m["content"].get<std::string>(), std::nullopt};
    if (m.contains("reasoning_content") && m["reasoning_content"].is_string())
      msg.reasoning_content = m["reasoning_content"].get<std::string>();
    out.push_back(std::move(msg));
  }
  return out;
}

const CliRegistrar kRegister{{"render", "Render a conversation with the model's chat template", [](CLI::App& app) {
  auto args = std::make_shared<RenderArgs>();
  app.add_option("--model", args->model, "Model or tokenizer folder with tokenizer_config.json")->required();
  app.add_option("--messages", args->messages_file, "JSON file: [{\"role\": ..., \"content\": ...}, ...]")->required();
  app.add_option("--enable-thinking", args->enable_thinking, "Qwen3: false adds an empty think block (true|false)")
      ->default_val(true);
  app.add_option("--date-string", args->date_string, "Llama 3.1/3.2: the Today Date (default: today)");
  app.add_option("--add-generation-prompt", args->add_generation_prompt, "End with the assistant header (true|false)")
      ->default_val(true);
  app.callback([args] {
    auto tok = unwrap(Tokenizer::load(args->model));
    const auto messages = read_messages(args->messages_file);
    const auto text = unwrap(tok.render_chat(messages, {.add_generation_prompt = args->add_generation_prompt,
                                                        .enable_thinking = args->enable_thinking,
                                                        .date_string = args->date_string}));
    fmt::print("{}", text);
  });
}}};

}  // namespace
}  // namespace photon::cli
