// Every case of the Hugging Face references (tokenizers / transformers
// outputs) committed with the Llama 3.2 and Qwen3 tokenizers, the secondary
// extra_cases.json goldens, and stories260K's SentencePiece tokenizations.
#include <map>

#include "tokenizer_test_util.hpp"

using namespace photon;
using photon::test::ids_of;
using photon::test::read_json;
using photon::test::tokenizer;

namespace {

std::vector<ChatMessage> messages_of(const nlohmann::json& j) {
  std::vector<ChatMessage> out;
  for (const auto& m : j) out.push_back({m["role"].get<std::string>(), m["content"].get<std::string>(), std::nullopt});
  return out;
}

ChatOptions chat_options_of(const nlohmann::json& kwargs, bool add_generation_prompt) {
  ChatOptions o;
  o.add_generation_prompt = add_generation_prompt;
  if (kwargs.contains("enable_thinking")) o.enable_thinking = kwargs["enable_thinking"].get<bool>();
  if (kwargs.contains("date_string")) o.date_string = kwargs["date_string"].get<std::string>();
  return o;
}

void check_hf_reference(const std::string& name) {
  const Tokenizer& tok = tokenizer(name);
  const auto ref = read_json(photon::test::tokenizer_dir(name) + "/golden/hf_reference.json");
  REQUIRE(ref["encode"].size() > 40);
  for (const auto& c : ref["encode"]) {
    const std::string text = c["text"].get<std::string>();
    INFO(name << " text: " << text);
    auto plain = tok.encode(text, {.add_special_tokens = false});
    REQUIRE(plain.has_value());
    CHECK(*plain == ids_of(c["ids"]));
    auto with_special = tok.encode(text, {.add_special_tokens = true});
    REQUIRE(with_special.has_value());
    CHECK(*with_special == ids_of(c["ids_with_special"]));
    auto decoded = tok.decode(ids_of(c["ids"]));
    REQUIRE(decoded.has_value());
    CHECK(*decoded == c["decoded"].get<std::string>());
  }
  REQUIRE(ref["chat"].size() >= 3);
  for (const auto& c : ref["chat"]) {
    const auto messages = messages_of(c["messages"]);
    auto rendered = tok.render_chat(messages, chat_options_of(c["kwargs"], c["add_generation_prompt"].get<bool>()));
    INFO(name << " chat: " << c["messages"].dump() << " " << c["kwargs"].dump());
    REQUIRE(rendered.has_value());
    CHECK(*rendered == c["rendered"].get<std::string>());
    auto ids = tok.encode(*rendered, {.add_special_tokens = false});
    REQUIRE(ids.has_value());
    CHECK(*ids == ids_of(c["ids"]));
  }
}

void check_extra_cases(const std::string& name) {
  const Tokenizer& tok = tokenizer(name);
  const auto ref = read_json(photon::test::tokenizer_dir(name) + "/golden/extra_cases.json");
  REQUIRE(!ref["encode_cases"].empty());
  for (const auto& c : ref["encode_cases"]) {
    const std::string text = c["text"].get<std::string>();
    INFO(name << " text: " << text);
    auto ids = tok.encode(text, {.add_special_tokens = c["add_special_tokens"].get<bool>()});
    REQUIRE(ids.has_value());
    CHECK(*ids == ids_of(c["ids"]));
    auto decoded = tok.decode(*ids);
    REQUIRE(decoded.has_value());
    CHECK(*decoded == c["decoded"].get<std::string>());
  }
  REQUIRE(!ref["chat_cases"].empty());
  for (const auto& c : ref["chat_cases"]) {
    INFO(name << " chat case " << c["name"].get<std::string>());
    const auto& kw = c["template_kwargs"];
    auto rendered = tok.render_chat(messages_of(c["messages"]), chat_options_of(kw, kw["add_generation_prompt"].get<bool>()));
    REQUIRE(rendered.has_value());
    CHECK(*rendered == c["rendered"].get<std::string>());
    auto ids = tok.encode(*rendered, {.add_special_tokens = false});
    REQUIRE(ids.has_value());
    CHECK(*ids == ids_of(c["ids_add_special_tokens_false"]));
  }
}

// llama.cpp's vocabulary tests: .inp holds the texts separated by
// "\n__ggml_vocab_test__\n", .out one line of space-separated ids per text.
void check_llama_cpp_vectors(const std::string& name, const std::string& stem) {
  const Tokenizer& tok = tokenizer(name);
  const std::string base = photon::test::tokenizer_dir(name) + "/golden/" + stem;
  const std::string inp = photon::test::read_file(base + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0; pos < inp.size();) {
    const size_t next = inp.find(sep, pos);
    if (next == std::string::npos) break;
    texts.push_back(inp.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::istringstream out(photon::test::read_file(base + ".out"));
  std::vector<std::vector<int32_t>> expected;
  for (std::string line; std::getline(out, line);) {
    std::istringstream ls(line);
    std::vector<int32_t> ids;
    for (int32_t id; ls >> id;) ids.push_back(id);
    expected.push_back(ids);
  }
  REQUIRE(texts.size() == 46);
  REQUIRE(expected.size() == texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    INFO(name << " case " << i << ": '" << texts[i] << "'");
    auto ids = tok.encode(texts[i], {.add_special_tokens = false});
    REQUIRE(ids.has_value());
    CHECK(*ids == expected[i]);
    auto back = tok.decode(*ids);
    REQUIRE(back.has_value());
    CHECK(*back == texts[i]);
  }
}

}  // namespace

TEST_CASE("llama3 tokenizer matches Hugging Face reference encodings, decodings and chat renderings", "[model]") {
  check_hf_reference("llama3");
}

TEST_CASE("qwen3 tokenizer matches Hugging Face reference encodings, decodings and chat renderings", "[model]") {
  check_hf_reference("qwen3");
}

TEST_CASE("llama3 tokenizer matches extra_cases.json", "[model]") { check_extra_cases("llama3"); }
TEST_CASE("qwen3 tokenizer matches extra_cases.json", "[model]") { check_extra_cases("qwen3"); }

TEST_CASE("llama3 tokenizer matches llama.cpp's llama-bpe vocabulary vectors", "[model]") {
  check_llama_cpp_vectors("llama3", "ggml-vocab-llama-bpe.gguf");
}

TEST_CASE("qwen3 tokenizer matches llama.cpp's qwen2 vocabulary vectors", "[model]") {
  check_llama_cpp_vectors("qwen3", "ggml-vocab-qwen2.gguf");
}

TEST_CASE("stories260K SentencePiece tokenizer matches the library's tokenizations", "[model]") {
  const Tokenizer& tok = tokenizer("stories260K");
  CHECK(tok.kind() == "sentencepiece");
  CHECK(tok.vocab_size() == 512);
  CHECK(tok.bos_token_id() == 1);
  CHECK(tok.eos_token_id() == 2);
  const auto ref = read_json(photon::test::stories_dir() + "/golden/tokenization.json");
  REQUIRE(ref["cases"].size() == 11);
  for (const auto& c : ref["cases"]) {
    const std::string text = c["text"].get<std::string>();
    INFO("text: '" << text << "'");
    auto ids = tok.encode(text, {.add_special_tokens = false});
    REQUIRE(ids.has_value());
    CHECK(*ids == ids_of(c["ids"]));
    auto with_bos = tok.encode(text);
    REQUIRE(with_bos.has_value());
    REQUIRE(!with_bos->empty());
    CHECK(with_bos->front() == 1);
    CHECK(std::vector<int32_t>(with_bos->begin() + 1, with_bos->end()) == ids_of(c["ids"]));
    auto decoded = tok.decode(*ids);
    REQUIRE(decoded.has_value());
    CHECK(*decoded == c["decoded"].get<std::string>());
    for (size_t i = 0; i < c["pieces"].size(); ++i) {
      auto id = tok.token_to_id(c["pieces"][i].get<std::string>());
      REQUIRE(id.has_value());
      CHECK(*id == c["ids"][i].get<int32_t>());
    }
  }
}

TEST_CASE("stories260K generation goldens decode to their full text", "[model]") {
  const Tokenizer& tok = tokenizer("stories260K");
  for (const char* name : {"bos_only", "once_upon_a_time", "lily_and_ben", "unicode_byte_fallback"}) {
    const auto g = read_json(photon::test::stories_dir() + "/golden/" + name + ".json");
    INFO(name);
    std::vector<int32_t> all = ids_of(g["prompt_ids"]);
    const auto gen = ids_of(g["generated_ids"]);
    all.insert(all.end(), gen.begin(), gen.end());
    auto full = tok.decode(all);
    REQUIRE(full.has_value());
    CHECK(*full == g["full_text"].get<std::string>());
    auto generated = tok.decode(gen);
    REQUIRE(generated.has_value());
    CHECK(*generated == g["generated_text"].get<std::string>());
    auto prompt_ids = tok.encode(g["prompt"].get<std::string>());
    REQUIRE(prompt_ids.has_value());
    CHECK(*prompt_ids == ids_of(g["prompt_ids"]));
  }
}

TEST_CASE("whitespace-like characters split as Hugging Face's regex engine splits them", "[model]") {
  for (const char* name : {"llama3", "qwen3"}) {
    const Tokenizer& tok = tokenizer(name);
    const auto ref = read_json(photon::test::tokenizer_dir(name) + "/golden/hf_whitespace_cases.json");
    REQUIRE(ref["cases"].size() == 121);
    for (const auto& c : ref["cases"]) {
      const std::string text = c["text"].get<std::string>();
      INFO(name << " text: " << nlohmann::json(text).dump());
      auto ids = tok.encode(text, {.add_special_tokens = false});
      REQUIRE(ids.has_value());
      CHECK(*ids == ids_of(c["ids"]));
    }
  }
}
