// Malformed tokenizer folders give tokenizer_error / bad_json /
// file_not_found with a message naming the file and the field.
#include <filesystem>
#include <fstream>
#include <iterator>

#include "tokenizer_test_util.hpp"

using namespace photon;
namespace fs = std::filesystem;

namespace {

// A temporary tokenizer folder holding the given files.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag) {
    path = fs::temp_directory_path() / ("photon_tok_" + tag + "_" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  void write(const std::string& name, const std::string& content) const {
    std::ofstream(path / name, std::ios::binary) << content;
  }
};

// A tiny valid byte-level BPE tokenizer.json; `patch` edits its text.
std::string tiny_tokenizer_json() {
  nlohmann::json vocab = nlohmann::json::object();
  int id = 0, next = 256;
  for (int b = 0; b < 256; ++b) {
    // GPT-2 byte-to-unicode symbols, in byte order.
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const int cp = printable ? b : next++;
    std::string s;
    if (cp < 0x80) s.push_back(static_cast<char>(cp));
    else {
      s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
    vocab[s] = id++;
  }
  vocab["ab"] = id++;
  nlohmann::json j = {
      {"version", "1.0"},
      {"added_tokens", nlohmann::json::array({{{"id", id}, {"content", "<eos>"}, {"special", true}}})},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array({"a b"})}}}};
  return j.dump();
}

Error load_error(const TempDir& d) {
  auto t = Tokenizer::load(d.path.string());
  REQUIRE_FALSE(t.has_value());
  return t.error();
}

}  // namespace

TEST_CASE("a minimal tokenizer.json loads and tokenizes", "[model]") {
  TempDir d("ok");
  d.write("tokenizer.json", tiny_tokenizer_json());
  auto t = Tokenizer::load(d.path.string());
  INFO((t ? "" : t.error().message));
  REQUIRE(t.has_value());
  CHECK(t->vocab_size() == 258);
  auto ids = t->encode("ab<eos>a");
  REQUIRE(ids.has_value());
  CHECK(*ids == std::vector<int32_t>{256, 257, 'a'});  // byte tokens have ids 0..255 here
  CHECK(t->chat_template_kind() == ChatTemplateKind::none);
  auto r = t->render_chat(std::vector<ChatMessage>{{"user", "hi", std::nullopt}});
  CHECK(r.error().code == Errc::template_error);
}

TEST_CASE("malformed tokenizer files give clear errors", "[model]") {
  SECTION("missing folder and missing files") {
    CHECK(Tokenizer::load("/nonexistent/photon").error().code == Errc::file_not_found);
    TempDir d("empty");
    const Error e = load_error(d);
    CHECK(e.code == Errc::file_not_found);
    CHECK_THAT(e.message, Catch::Contains("tokenizer.json"));
  }
  SECTION("truncated JSON") {
    TempDir d("trunc");
    const std::string full = tiny_tokenizer_json();
    d.write("tokenizer.json", full.substr(0, full.size() / 2));
    const Error e = load_error(d);
    CHECK(e.code == Errc::bad_json);
    CHECK_THAT(e.message, Catch::Contains("tokenizer.json"));
  }
  SECTION("a merge naming a token outside the vocabulary") {
    TempDir d("merge");
    std::string j = tiny_tokenizer_json();
    j.replace(j.find("\"a b\""), 5, "\"a zz\"");
    d.write("tokenizer.json", j);
    const Error e = load_error(d);
    CHECK(e.code == Errc::tokenizer_error);
    CHECK_THAT(e.message, Catch::Contains("model.merges[0]"));
  }
  SECTION("a merge that is not two tokens") {
    TempDir d("merge3");
    std::string j = tiny_tokenizer_json();
    j.replace(j.find("\"a b\""), 5, "\"a b c\"");
    d.write("tokenizer.json", j);
    CHECK_THAT(load_error(d).message, Catch::Contains("model.merges[0]"));
  }
  SECTION("a vocabulary id that is not an integer") {
    TempDir d("vocab");
    std::string j = tiny_tokenizer_json();
    j.replace(j.find("\"ab\":256"), 8, "\"ab\":\"x\"");
    d.write("tokenizer.json", j);
    const Error e = load_error(d);
    CHECK(e.code == Errc::tokenizer_error);
    CHECK_THAT(e.message, Catch::Contains("model.vocab"));
  }
  SECTION("unsupported model, pre-tokenizer and normalizer types") {
    for (auto [from, to, field] : std::vector<std::tuple<std::string, std::string, std::string>>{
             {"\"type\":\"BPE\"", "\"type\":\"WordPiece\"", "model.type"},
             {"\"type\":\"ByteLevel\",\"use_regex\"", "\"type\":\"Metaspace\",\"use_regex\"", "pre_tokenizer"},
             {"\"normalizer\":null", "\"normalizer\":{\"type\":\"Lowercase\"}", "normalizer"},
             {"\"normalizer\":null", "\"normalizer\":7", "normalizer"}}) {
      TempDir d("unsupported");
      std::string j = tiny_tokenizer_json();
      const size_t at = j.find(from);
      REQUIRE(at != std::string::npos);
      j.replace(at, from.size(), to);
      d.write("tokenizer.json", j);
      const Error e = load_error(d);
      CHECK(e.code == Errc::tokenizer_error);
      CHECK_THAT(e.message, Catch::Contains(field));
    }
  }
  SECTION("a regex that does not compile") {
    TempDir d("regex");
    std::string j = tiny_tokenizer_json();
    const std::string from = "{\"add_prefix_space\":false,\"type\":\"ByteLevel\",\"use_regex\":true}";
    REQUIRE(j.find(from) != std::string::npos);
    j.replace(j.find(from), from.size(),
              "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(unclosed\"},"
              "\"behavior\":\"Isolated\"}," + from + "]}");
    d.write("tokenizer.json", j);
    const Error e = load_error(d);
    CHECK(e.code == Errc::tokenizer_error);
    CHECK_THAT(e.message, Catch::Contains("(unclosed"));
  }
  SECTION("tokenizer_config.json with a bad field or an unknown eos token") {
    TempDir d("config");
    d.write("tokenizer.json", tiny_tokenizer_json());
    d.write("tokenizer_config.json", "{\"add_bos_token\": \"yes\"}");
    CHECK_THAT(load_error(d).message, Catch::Contains("add_bos_token"));
    d.write("tokenizer_config.json", "{\"eos_token\": \"<nope>\"}");
    CHECK_THAT(load_error(d).message, Catch::Contains("<nope>"));
    d.write("tokenizer_config.json", "{\"eos_token\": ");
    CHECK(load_error(d).code == Errc::bad_json);
  }
  SECTION("a tokenizer.model that is not a SentencePiece model") {
    TempDir d("sp");
    d.write("tokenizer.model", "this is not a protobuf");
    const Error e = load_error(d);
    CHECK(e.code == Errc::tokenizer_error);
    CHECK_THAT(e.message, Catch::Contains("tokenizer.model"));
  }
}

// Found while writing the tokenizer_json fuzz target (tests/fuzz; its replay binary aborted
// on the crafted input): one vocab entry with id 10^9 made the id-indexed tables ask for
// ~32 GB (std::bad_alloc escaped Tokenizer::load).
TEST_CASE("a sparse vocabulary id space is refused instead of allocated", "[model]") {
  for (const char* id : {"1000000000", "2000000"}) {
    TempDir d("sparse");
    std::string j = tiny_tokenizer_json();
    const std::string ab = "\"ab\":256";
    REQUIRE(j.find(ab) != std::string::npos);
    j.replace(j.find(ab), ab.size(), std::string("\"ab\":") + id);
    d.write("tokenizer.json", j);
    const Error e = load_error(d);
    CHECK(e.code == Errc::tokenizer_error);
    CHECK_THAT(e.message, Catch::Contains("tokenizer.json") && Catch::Contains("dense") && Catch::Contains(id));
  }
  // A few unused ids (reserved ranges) still load.
  TempDir d("gap");
  std::string j = tiny_tokenizer_json();
  j.replace(j.find("\"ab\":256"), std::string("\"ab\":256").size(), "\"ab\":600");
  d.write("tokenizer.json", j);
  auto t = Tokenizer::load(d.path.string());
  INFO((t ? std::string() : t.error().message));
  CHECK(t.has_value());
}

TEST_CASE("unknown chat templates are named in the error; eos ids from generation_config.json", "[model]") {
  TempDir d("tmpl");
  d.write("tokenizer.json", tiny_tokenizer_json());
  d.write("tokenizer_config.json", "{\"chat_template\": \"{% for m in messages %}[{{ m.content }}]{% endfor %}\", "
                                   "\"eos_token\": \"<eos>\"}");
  d.write("generation_config.json", "{\"eos_token_id\": [257, 98]}");
  auto t = Tokenizer::load(d.path.string());
  REQUIRE(t.has_value());
  CHECK(t->chat_template_kind() == ChatTemplateKind::unknown);
  auto r = t->render_chat(std::vector<ChatMessage>{{"user", "hi", std::nullopt}});
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == Errc::template_error);
  CHECK_THAT(r.error().message, Catch::Contains("{% for m in messages %}"));
  CHECK(std::vector<int32_t>(t->eos_token_ids().begin(), t->eos_token_ids().end()) == std::vector<int32_t>{98, 257});
  CHECK(t->is_eos(98));
}

TEST_CASE("chat_template.jinja is read when tokenizer_config.json has no template", "[model]") {
  TempDir d("jinja");
  d.write("tokenizer.json", tiny_tokenizer_json());
  const auto qwen_cfg = photon::test::read_json(photon::test::tokenizer_dir("qwen3") + "/tokenizer_config.json");
  d.write("chat_template.jinja", qwen_cfg["chat_template"].get<std::string>());
  auto t = Tokenizer::load(d.path.string());
  REQUIRE(t.has_value());
  CHECK(t->chat_template_kind() == ChatTemplateKind::qwen3);
  auto r = t->render_chat(std::vector<ChatMessage>{{"user", "hi", std::nullopt}}, {.enable_thinking = false});
  REQUIRE(r.has_value());
  CHECK(*r == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST_CASE("an unsupported tokenizer.json beside tokenizer.model falls back to SentencePiece", "[model]") {
  TempDir d("llama2");
  // A Llama-2 style conversion: Metaspace pre-tokenizer (not byte-level).
  std::string j = tiny_tokenizer_json();
  const std::string from = "\"type\":\"ByteLevel\",\"use_regex\"";
  REQUIRE(j.find(from) != std::string::npos);
  j.replace(j.find(from), from.size(), "\"type\":\"Metaspace\",\"use_regex\"");
  d.write("tokenizer.json", j);
  CHECK(load_error(d).code == Errc::tokenizer_error);  // alone it is rejected
  fs::copy_file(fs::path(photon::test::stories_dir()) / "tokenizer.model", d.path / "tokenizer.model");
  auto t = Tokenizer::load(d.path.string());
  INFO((t ? "" : t.error().message));
  REQUIRE(t.has_value());
  CHECK(t->kind() == "sentencepiece");
  CHECK(*t->encode("Once upon a time") == std::vector<int32_t>{1, 403, 407, 261, 378});
  // A malformed (not merely unsupported) tokenizer.json is still an error.
  d.write("tokenizer.json", "{\"model\": ");
  CHECK(load_error(d).code == Errc::bad_json);
}

TEST_CASE("a SentencePiece model's unk_surface is read from its trainer_spec", "[model]") {
  // The flags photon reads from the model proto itself (sp_model.cpp, read_normalizer_flags): a
  // trainer_spec field appended to stories260K's model (a singular message field that occurs twice
  // is merged, and within it the later unk_surface, field 44, wins) changes how <unk> (id 0) decodes.
  TempDir d("unk_surface");
  std::ifstream in(fs::path(photon::test::stories_dir()) / "tokenizer.model", std::ios::binary);
  std::string proto((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(!proto.empty());
  d.write("tokenizer.model", proto);
  auto plain = Tokenizer::load(d.path.string());
  REQUIRE(plain.has_value());
  const std::vector<int32_t> unk{0};
  // stories260K's trainer_spec stores the surface as escaped text (docs/tokenizer.md), as the
  // library decodes it.
  CHECK(*plain->decode(unk) == " \\342\\201\\207 ");
  // ModelProto field 2 (trainer_spec, length 6) holding field 44 (key 354: E2 02), length 3, "<?>".
  const std::string appended = std::string("\x12\x06\xE2\x02\x03", 5) + "<?>";
  d.write("tokenizer.model", proto + appended);
  auto changed = Tokenizer::load(d.path.string());
  INFO((changed ? "" : changed.error().message));
  REQUIRE(changed.has_value());
  CHECK(*changed->decode(unk) == "<?>");
  CHECK(*changed->encode("Once upon a time") == std::vector<int32_t>{1, 403, 407, 261, 378});
}
