// Mutated tokenizer files never crash the loader: each load either succeeds
// (and then encodes and decodes) or fails with an error and a message.
#include <filesystem>
#include <fstream>
#include <random>

#include "tokenizer_test_util.hpp"

using namespace photon;
namespace fs = std::filesystem;

namespace {

fs::path scratch_dir(const std::string& tag) {
  const fs::path p = fs::temp_directory_path() / ("photon_tok_fuzz_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

// A small but complete byte-level tokenizer.json with the Llama 3 pieces:
// Split regex + ByteLevel, TemplateProcessing, added tokens, NFC.
std::string small_tokenizer_json() {
  nlohmann::json vocab = nlohmann::json::object();
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const int cp = printable ? b : next++;
    std::string s;
    if (cp < 0x80) s.push_back(static_cast<char>(cp));
    else {
      s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
    vocab[s] = b;
  }
  vocab["he"] = 256;
  vocab["ll"] = 257;
  vocab["hell"] = 258;
  vocab["hello"] = 259;
  vocab["\xC4\xA0w"] = 260;  // "Ġw"
  nlohmann::json j = {
      {"version", "1.0"},
      {"added_tokens", nlohmann::json::array({{{"id", 261}, {"content", "<|bos|>"}, {"special", true}},
                                              {{"id", 262}, {"content", "<x>"}, {"special", false}, {"lstrip", true}}})},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         nlohmann::json::array({{{"type", "Split"},
                                 {"pattern", {{"Regex", R"( ?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"}}},
                                 {"behavior", "Isolated"},
                                 {"invert", false}},
                                {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", nlohmann::json::array({{{"SpecialToken", {{"id", "<|bos|>"}, {"type_id", 0}}}},
                                          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
        {"special_tokens", {{"<|bos|>", {{"id", "<|bos|>"}, {"ids", {261}}, {"tokens", {"<|bos|>"}}}}}}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"},
        {"ignore_merges", true},
        {"vocab", vocab},
        {"merges", nlohmann::json::array({"h e", "l l", "he ll", nlohmann::json::array({"hell", "o"}), "\xC4\xA0 w"})}}}};
  return j.dump();
}

}  // namespace

TEST_CASE("the small tokenizer.json of the fuzz test is valid", "[model]") {
  const fs::path dir = scratch_dir("base");
  std::ofstream(dir / "tokenizer.json", std::ios::binary) << small_tokenizer_json();
  auto t = Tokenizer::load(dir.string());
  INFO((t ? "" : t.error().message));
  REQUIRE(t.has_value());
  auto ids = t->encode("hello world <x> x");
  REQUIRE(ids.has_value());
  CHECK(ids->front() == 261);
  CHECK((*ids)[1] == 259);
  // "<x>" has lstrip: the match takes the space before it, as tokenizers does.
  CHECK(*t->decode(*ids, {.skip_special_tokens = true}) == "hello world<x> x");
  fs::remove_all(dir);
}

TEST_CASE("mutated tokenizer.json files load or fail cleanly, never crash", "[model]") {
  const std::string base = small_tokenizer_json();
  const fs::path dir = scratch_dir("mut");
  std::mt19937 rng(123);
  std::uniform_int_distribution<int> op(0, 3), byte(0, 255);
  const std::string interesting = "{}[]\":,0123456789-eE.\\ntfu ";
  std::uniform_int_distribution<size_t> pick_char(0, interesting.size() - 1);
  int loaded = 0, failed = 0;
  for (int i = 0; i < 400; ++i) {
    std::string s = base;
    std::uniform_int_distribution<size_t> pos(0, s.size() - 1);
    for (int m = 0; m < 1 + i % 4; ++m) {
      const size_t p = pos(rng) % s.size();
      switch (op(rng)) {
        case 0: s[p] = interesting[pick_char(rng)]; break;          // JSON-ish byte
        case 1: s[p] = static_cast<char>(byte(rng)); break;         // any byte
        case 2: s.erase(p, std::min<size_t>(1 + p % 9, s.size() - p)); break;
        default: s.insert(p, s.substr(pos(rng) % s.size(), 1 + p % 7)); break;
      }
    }
    std::ofstream(dir / "tokenizer.json", std::ios::binary | std::ios::trunc) << s;
    auto t = Tokenizer::load(dir.string());
    if (t) {
      ++loaded;
      auto ids = t->encode("hello world <x> <|bos|> 123");
      if (ids) (void)t->decode(*ids);
    } else {
      ++failed;
      CHECK_FALSE(t.error().message.empty());
      CHECK(t.error().code != Errc::ok);
    }
  }
  CHECK(loaded + failed == 400);
  CHECK(failed > 0);
  fs::remove_all(dir);
}

TEST_CASE("single_word added tokens match only outside words (Unicode letters and digits count)", "[model]") {
  std::string j = small_tokenizer_json();
  const std::string from = "\"content\":\"<x>\"";
  REQUIRE(j.find(from) != std::string::npos);
  j.replace(j.find(from), from.size(), "\"content\":\"ll\",\"single_word\":true");
  const fs::path dir = scratch_dir("single");
  std::ofstream(dir / "tokenizer.json", std::ios::binary) << j;
  auto t = Tokenizer::load(dir.string());
  REQUIRE(t.has_value());
  auto count_262 = [&](const std::string& text) {
    auto ids = t->encode(text, {.add_special_tokens = false});
    REQUIRE(ids.has_value());
    return std::count(ids->begin(), ids->end(), 262);
  };
  CHECK(count_262("ll") == 1);
  CHECK(count_262("a ll b") == 1);
  CHECK(count_262("(ll)") == 1);
  CHECK(count_262("hello") == 0);   // inside a word
  CHECK(count_262("éll") == 0);     // a non-ASCII letter before it
  CHECK(count_262("ll٣") == 0);     // an Arabic-Indic digit after it
  CHECK(count_262("_ll") == 0);
  CHECK(count_262("\u3000ll\u3000") == 1);  // ideographic spaces are not word characters
  fs::remove_all(dir);
}
