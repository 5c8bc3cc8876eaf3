// Fuzz target: the settings files beside a tokenizer, loaded with a fixed
// small byte-level BPE tokenizer.json (PHOTON_FUZZ_BASE_TOKENIZER): the input
// is split at NUL bytes into tokenizer_config.json, generation_config.json
// and chat_template.jinja (a missing part: no such file). When the tokenizer
// loads, the chat template is rendered for a few conversations and encoded.
// Properties: special ids are -1 or inside the vocabulary; EOS ids are sorted,
// unique and inside the vocabulary; a rendered chat encodes.
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_util.hpp"
#include "photon/tokenizer.hpp"

namespace {

const photon::fuzz::ScratchDir& scratch() {
  static const photon::fuzz::ScratchDir dir;
  static const bool base_written = [] {
    std::ifstream f(PHOTON_FUZZ_BASE_TOKENIZER, std::ios::binary);
    const std::string base((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    FUZZ_CHECK(!base.empty());
    dir.write("tokenizer.json", base);
    return true;
  }();
  (void)base_written;
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace photon;
  const auto& dir = scratch();
  const std::string_view input = fuzz::as_text(data, size);
  const char* files[] = {"tokenizer_config.json", "generation_config.json", "chat_template.jinja"};
  size_t begin = 0;
  for (size_t part = 0; part < 3; ++part) {
    if (begin > input.size()) {
      dir.remove(files[part]);
      continue;
    }
    const size_t end = std::min(input.find('\0', begin), input.size());
    dir.write(files[part], input.substr(begin, end - begin));
    begin = end + 1;
  }
  auto tok = Tokenizer::load(dir.str());
  if (!tok) {
    FUZZ_CHECK(!tok.error().message.empty());
    return 0;
  }
  const int32_t vocab = tok->vocab_size();
  for (int32_t id : {tok->bos_token_id(), tok->eos_token_id(), tok->pad_token_id()})
    FUZZ_CHECK(id >= -1 && id < vocab);
  const auto eos = tok->eos_token_ids();
  FUZZ_CHECK(std::adjacent_find(eos.begin(), eos.end(), std::greater_equal<int32_t>()) == eos.end());
  for (int32_t id : eos) FUZZ_CHECK(id >= 0 && id < vocab);

  const std::vector<std::vector<ChatMessage>> chats = {
      {{"user", "Hi!", std::nullopt}},
      {{"system", "Be brief.", std::nullopt}, {"user", "2+2?", std::nullopt}, {"assistant", "4", std::nullopt},
       {"user", "and 3+3?", std::nullopt}},
      {{"user", "q", std::nullopt}, {"assistant", "<think>hmm</think>a", std::string("why")}},
      {},
  };
  for (const auto& chat : chats) {
    for (bool thinking : {true, false}) {
      ChatOptions opts;
      opts.enable_thinking = thinking;
      auto text = tok->render_chat(chat, opts);
      if (!text) continue;
      FUZZ_CHECK(tok->encode(*text, EncodeOptions{.add_special_tokens = false}).has_value());
    }
  }
  return 0;
}
