// photon detokenize --model DIR --ids 1,2,3: prints the decoded text.
#include <fmt/core.h>

#include <charconv>

#include "commands.hpp"
#include "photon/tokenizer.hpp"

namespace photon::cli {
namespace {

struct DetokenizeArgs {
  std::string model, ids;
  bool skip_special = false;
};

// "1,2, 3" -> ids; an error names the bad item.
std::vector<int32_t> parse_ids(const std::string& list) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t end = list.find(',', pos);
    if (end == std::string::npos) end = list.size();
    std::string_view item(list.data() + pos, end - pos);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    int32_t id = 0;
    const auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
    if (item.empty() || ec != std::errc() || p != item.data() + item.size())
      fail(fmt::format("--ids: \"{}\" is not an integer token id", item));
    ids.push_back(id);
    pos = end + 1;
  }
  return ids;
}

const CliRegistrar kRegister{{"detokenize", "Decode comma-separated token ids into text", [](CLI::App& app) {
  auto args = std::make_shared<DetokenizeArgs>();
  app.add_option("--model", args->model, "Model or tokenizer folder (tokenizer.json or tokenizer.model)")->required();
  app.add_option("--ids", args->ids, "Token ids, e.g. 9906,11,1917")->required();
  app.add_flag("--skip-special", args->skip_special, "Leave out special tokens");
  app.callback([args] {
    auto tok = unwrap(Tokenizer::load(args->model));
    const auto text = unwrap(tok.decode(parse_ids(args->ids), {.skip_special_tokens = args->skip_special}));
    fmt::print("{}\n", text);
  });
}}};

}  // namespace
}  // namespace photon::cli
