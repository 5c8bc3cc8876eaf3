// Round trips and invariants on generated text: decode(encode(x)) == x for
// arbitrary valid UTF-8 (NFC text for Qwen3, whose normalizer is NFC),
// invalid bytes replaced as documented, BPE implementations agreeing.
#include <random>

#include "model/bpe_model.hpp"
#include "model/tokenizer_impl.hpp"
#include "model/utf8.hpp"
#include "tokenizer_test_util.hpp"

using namespace photon;
using photon::test::tokenizer;

namespace {

// Random text mixing the things tokenizers get wrong: ASCII words and
// punctuation, digits, whitespace runs (spaces, tabs, \r\n, U+00A0, U+3000),
// Latin-1, combining marks, CJK, Hangul, RTL scripts, emoji with ZWJ and
// skin-tone modifiers, contractions, special-token look-alikes.
std::string random_text(std::mt19937& rng, size_t pieces) {
  static const std::vector<std::string> kPieces = {
      "hello", "World", " the", "  ", "\t", "\n", "\r\n", "\n\n\n", "   \n", "'s", "'LL", "n't", "123", "4567890",
      "3.14", ",", ".", "!?", "...", "()", "{}", "->", "==", "//", "#", "café", "naïve", "e\xCC\x81", "\xCC\x81",
      "a\xCC\x8A", "日本語", "中文", "テキスト", "한국어", "Привет", "مرحبا", "שלום", "🐱", "👩\u200d👩\u200d👧",
      "👍🏽", "🚀", "\u00A0", "\u3000", "\u200b", "\u2028", "ſ", "K", "<|", "|>", "<|eot_id|", "<think", "<s", "_",
      "x", "Z", "\xEF\xBF\xBD", "\x7F", "\x01", "ǅ", "ﬁ", "Ⅻ", "½", "²"};
  std::uniform_int_distribution<size_t> pick(0, kPieces.size() - 1);
  std::string out;
  for (size_t i = 0; i < pieces; ++i) out += kPieces[pick(rng)];
  return out;
}

std::string random_bytes(std::mt19937& rng, size_t n) {
  std::uniform_int_distribution<int> byte(0, 255);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(byte(rng));
  return s;
}

}  // namespace

TEST_CASE("decode(encode(x)) == x for arbitrary UTF-8 (Llama 3: no normalizer)", "[model]") {
  const Tokenizer& tok = tokenizer("llama3");
  std::mt19937 rng(1234);
  for (int i = 0; i < 300; ++i) {
    const std::string text = random_text(rng, 1 + i % 40);
    INFO("text: " << text);
    for (bool parse_special : {true, false}) {
      auto ids = tok.encode(text, {.add_special_tokens = false, .parse_special = parse_special});
      REQUIRE(ids.has_value());
      auto back = tok.decode(*ids);
      REQUIRE(back.has_value());
      CHECK(*back == text);
    }
  }
}

TEST_CASE("decode(encode(x)) == x for NFC text, and == NFC(x) otherwise (Qwen3)", "[model]") {
  const Tokenizer& tok = tokenizer("qwen3");
  // Precomposed text is unchanged by NFC; decomposed text comes back composed.
  for (const std::string text : {"café naïve 日本語 🐱 \t\r\n", "x\u00A0y\u3000z"}) {
    auto back = tok.decode(*tok.encode(text));
    REQUIRE(back.has_value());
    CHECK(*back == text);
  }
  auto composed = tok.decode(*tok.encode("cafe\xCC\x81 a\xCC\x8A"));
  REQUIRE(composed.has_value());
  CHECK(*composed == "caf\xC3\xA9 \xC3\xA5");
  std::mt19937 rng(99);
  for (int i = 0; i < 200; ++i) {
    const std::string text = random_text(rng, 1 + i % 30);
    auto once = tok.decode(*tok.encode(text));
    REQUIRE(once.has_value());
    // Normalizing is idempotent: the decoded text encodes and decodes to itself.
    auto twice = tok.decode(*tok.encode(*once));
    REQUIRE(twice.has_value());
    CHECK(*twice == *once);
  }
}

TEST_CASE("invalid UTF-8 is replaced by U+FFFD per maximal invalid subsequence before encoding", "[model]") {
  const Tokenizer& tok = tokenizer("llama3");
  const std::string bad = std::string("ok\xC3") + "(" + "\xF0\x9F\x90" + "x" + "\xFF\xFE" + "\xED\xA0\x80" + "end\xE2\x82";
  auto ids = tok.encode(bad, {.add_special_tokens = false});
  REQUIRE(ids.has_value());
  auto back = tok.decode(*ids);
  REQUIRE(back.has_value());
  const std::string r = "\xEF\xBF\xBD";
  // \xC3 -> 1; \xF0\x9F\x90 -> 1 (one maximal subpart); \xFF, \xFE -> 2;
  // \xED\xA0\x80 (a surrogate) -> 3 (\xED then \xA0 and \x80 are invalid alone); truncated \xE2\x82 -> 1.
  CHECK(*back == "ok" + r + "(" + r + "x" + r + r + r + r + r + "end" + r);
  CHECK(*back == utf8::to_valid(bad));
  std::mt19937 rng(7);
  for (int i = 0; i < 100; ++i) {
    const std::string bytes = random_bytes(rng, 1 + i);
    auto rt = tok.decode(*tok.encode(bytes, {.add_special_tokens = false}));
    REQUIRE(rt.has_value());
    CHECK(*rt == utf8::to_valid(bytes));
    CHECK(utf8::is_valid(*rt));
  }
}

TEST_CASE("decode of token ids that split characters yields U+FFFD, never broken UTF-8", "[model]") {
  const Tokenizer& tok = tokenizer("llama3");
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> id(0, tok.vocab_size() - 1);
  for (int i = 0; i < 300; ++i) {
    std::vector<int32_t> ids(1 + i % 20);
    for (auto& x : ids) x = id(rng);
    auto text = tok.decode(ids);
    REQUIRE(text.has_value());
    CHECK(utf8::is_valid(*text));
  }
  CHECK(tok.decode(std::vector<int32_t>{-1}).error().code == Errc::out_of_range);
  CHECK(tok.decode(std::vector<int32_t>{tok.vocab_size()}).error().code == Errc::out_of_range);
  CHECK(tok.token_to_piece(tok.vocab_size()).error().code == Errc::out_of_range);
}

TEST_CASE("special tokens: parsed by default, plain text with parse_special=false, skipped on request", "[model]") {
  const Tokenizer& tok = tokenizer("llama3");
  const std::string text = "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>";
  auto parsed = tok.encode(text, {.add_special_tokens = false});
  REQUIRE(parsed.has_value());
  CHECK(*parsed == std::vector<int32_t>{128006, 882, 128007, 271, 13347, 128009});
  auto raw = tok.encode(text, {.add_special_tokens = false, .parse_special = false});
  REQUIRE(raw.has_value());
  for (int32_t id : *raw) CHECK_FALSE(tok.is_special(id));
  CHECK(*tok.decode(*raw) == text);
  CHECK(*tok.decode(*parsed, {.skip_special_tokens = true}) == "user\n\nHi");
  CHECK(tok.is_special(128009));
  CHECK_FALSE(tok.is_special(9906));
  CHECK(tok.token_to_id("<|eot_id|>") == std::optional<int32_t>(128009));
  CHECK(tok.token_to_id("Hello") == std::optional<int32_t>(9906));
  CHECK_FALSE(tok.token_to_id("no such token").has_value());
  CHECK(*tok.token_to_piece(9906) == "Hello");
  CHECK(*tok.token_to_piece(220) == " ");

  // Qwen3: <think> is an added token that is not special, so it is matched
  // even with parse_special=false (as transformers' split_special_tokens does).
  const Tokenizer& qwen = tokenizer("qwen3");
  auto think = qwen.encode("<think>x</think><|im_end|>", {.add_special_tokens = false, .parse_special = false});
  REQUIRE(think.has_value());
  CHECK(think->front() == 151667);
  CHECK(std::find(think->begin(), think->end(), 151645) == think->end());
}

TEST_CASE("special ids and eos sets come from tokenizer_config.json", "[model]") {
  const Tokenizer& llama = tokenizer("llama3");
  CHECK(llama.vocab_size() == 128256);
  CHECK(llama.bos_token_id() == 128000);
  CHECK(llama.eos_token_id() == 128009);
  CHECK(llama.is_eos(128009));
  CHECK(llama.chat_template_kind() == ChatTemplateKind::llama3_1);
  const Tokenizer& qwen = tokenizer("qwen3");
  CHECK(qwen.vocab_size() == 151669);
  CHECK(qwen.bos_token_id() == -1);
  CHECK(qwen.eos_token_id() == 151645);
  CHECK(qwen.pad_token_id() == 151643);
  CHECK(qwen.chat_template_kind() == ChatTemplateKind::qwen3);
  CHECK(qwen.kind() == "bpe");
}

TEST_CASE("BPE: scan and heap merges agree, cached and uncached results agree", "[model]") {
  for (const char* name : {"llama3", "qwen3"}) {
    const Tokenizer& tok = tokenizer(name);
    const auto& bpe = dynamic_cast<const BpeModel&>(*tokenizer_impl(tok).model);
    std::mt19937 rng(42);
    for (int i = 0; i < 400; ++i) {
      // Pieces as the pre-tokenizer would cut them, and arbitrary byte strings.
      const std::string word = i % 2 ? random_text(rng, 1 + i % 6) : random_bytes(rng, 2 + i % 60);
      std::vector<int32_t> scan, heap, cached, cached_again;
      bpe.merge_word(word, scan, 1000);
      bpe.merge_word(word, heap, 1);
      CHECK(scan == heap);
      bpe.encode_word(word, cached);
      bpe.encode_word(word, cached_again);
      CHECK(cached == cached_again);
      std::string joined;
      for (int32_t id : scan) joined += *tok.token_to_piece(id);
      CHECK(joined == word);
    }
  }
}
