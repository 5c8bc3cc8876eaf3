// DetokenizerStream and StopStringMatcher: the streamed text always equals
// the whole decode, and no stop text ever leaks, whatever the chunking.
#include <random>

#include <sentencepiece_processor.h>

#include "model/sp_model.hpp"
#include "model/tokenizer_impl.hpp"
#include "model/utf8.hpp"
#include "tokenizer_test_util.hpp"

using namespace photon;
using photon::test::tokenizer;

namespace {

std::string stream_all(const Tokenizer& tok, const std::vector<int32_t>& ids, const DecodeOptions& opt = {}) {
  DetokenizerStream stream(tok, opt);
  std::string out;
  for (int32_t id : ids) {
    auto piece = stream.feed(id);
    REQUIRE(piece.has_value());
    CHECK(utf8::is_valid(*piece));  // never a broken sequence
    out += *piece;
  }
  out += stream.finish();
  return out;
}

}  // namespace

TEST_CASE("streamed detokenization equals decode for random id sequences", "[model]") {
  std::mt19937 rng(2024);
  for (const char* name : {"llama3", "qwen3", "stories260K"}) {
    const Tokenizer& tok = tokenizer(name);
    std::uniform_int_distribution<int32_t> any(0, tok.vocab_size() - 1);
    for (int i = 0; i < 300; ++i) {
      std::vector<int32_t> ids(static_cast<size_t>(1 + i % 25));
      for (auto& id : ids) id = any(rng);
      INFO(name << " sequence " << i);
      for (bool skip : {false, true}) {
        auto whole = tok.decode(ids, {.skip_special_tokens = skip});
        REQUIRE(whole.has_value());
        CHECK(stream_all(tok, ids, {.skip_special_tokens = skip}) == *whole);
      }
    }
  }
}

TEST_CASE("streamed detokenization holds back a character split over tokens", "[model]") {
  const Tokenizer& tok = tokenizer("llama3");
  // "🐱" (4 bytes) is cut into byte-level tokens: nothing comes out until its last byte.
  auto ids = tok.encode("a🐱b", {.add_special_tokens = false});
  REQUIRE(ids.has_value());
  REQUIRE(ids->size() >= 3);
  DetokenizerStream stream(tok);
  std::string out;
  for (int32_t id : *ids) {
    auto p = stream.feed(id);
    REQUIRE(p.has_value());
    if (stream.pending_bytes() > 0) CHECK(p->find("🐱") == std::string_view::npos);
    out += *p;
  }
  CHECK(stream.pending_bytes() == 0);
  CHECK(out + std::string(stream.finish()) == "a🐱b");
  // A dangling lead byte at the end becomes one U+FFFD on finish.
  const int32_t f0 = *tok.token_to_id("\xC3\xB0");  // byte-level symbol of byte 0xF0
  DetokenizerStream s2(tok);
  CHECK(s2.feed(f0)->empty());
  CHECK(s2.pending_bytes() == 1);
  CHECK(s2.finish() == "\xEF\xBF\xBD");
  CHECK(s2.feed(-5).error().code == Errc::out_of_range);
}

TEST_CASE("SentencePiece decoding matches libsentencepiece's DecodeIds", "[model]") {
  const Tokenizer& tok = tokenizer("stories260K");
  const auto& sp = dynamic_cast<const SentencePieceModel&>(*tokenizer_impl(tok).model).processor();
  const auto g = photon::test::read_json(photon::test::stories_dir() + "/golden/unicode_byte_fallback.json");
  std::vector<int32_t> ids = g["prompt_ids"].get<std::vector<int32_t>>();
  CHECK(stream_all(tok, ids) == *tok.decode(ids));
  // Leading spaces, byte pieces, control pieces and <unk> in every order.
  std::mt19937 rng(11);
  std::vector<int32_t> interesting = {0, 1, 2, 3, 4, 100, 195, 198, 243, 259, 261, 410, 403, 426};
  std::uniform_int_distribution<size_t> pick(0, interesting.size() - 1);
  std::uniform_int_distribution<int32_t> any(0, 511);
  for (int i = 0; i < 500; ++i) {
    std::vector<int32_t> seq(static_cast<size_t>(1 + i % 12));
    for (auto& id : seq) id = i % 2 ? interesting[pick(rng)] : any(rng);
    // decode() and the stream agree with each other and with the library.
    const std::string ours = *tok.decode(seq);
    CHECK(stream_all(tok, seq) == ours);
    INFO("ids " << nlohmann::json(seq).dump());
    CHECK(ours == sp.DecodeIds(std::vector<int>(seq.begin(), seq.end())));
  }
}

TEST_CASE("stop strings: no stop text leaks under any chunking", "[model]") {
  const std::vector<std::string> stops = {"<|im_end|>", "\n\nUser:", "STOP", "🐱x"};
  std::mt19937 rng(3);
  const std::vector<std::string> parts = {"Hello", " wor", "ld", "\n", "\n\nUs", "er", ":", "<|im", "_e", "nd|", ">",
                                          "ST", "O", "P", "🐱", "x", "y", "<", "|", "S", "T"};
  std::uniform_int_distribution<size_t> pick(0, parts.size() - 1);
  for (int i = 0; i < 2000; ++i) {
    std::string text;
    for (int k = 0; k < 1 + i % 15; ++k) text += parts[pick(rng)];
    // Expected: the text up to the earliest stop occurrence.
    size_t cut = std::string::npos;
    for (const auto& s : stops) cut = std::min(cut, text.find(s));
    const std::string expected = text.substr(0, cut);

    auto m = StopStringMatcher::create(stops);
    REQUIRE(m.has_value());
    std::string out;
    bool stopped = false;
    std::uniform_int_distribution<size_t> step(1, 6);
    for (size_t pos = 0; pos < text.size();) {
      const size_t n = std::min(step(rng), text.size() - pos);
      const auto r = m->feed(std::string_view(text).substr(pos, n));
      out += r.text;
      // What was emitted so far is always a prefix of the final answer.
      REQUIRE(expected.compare(0, out.size(), out) == 0);
      pos += n;
      if (r.stopped) {
        stopped = true;
        break;
      }
    }
    if (!stopped) out += m->finish();
    INFO("text: " << text);
    CHECK(out == expected);
    CHECK(stopped == (cut != std::string::npos));
    CHECK(m->stopped() == stopped);
  }
}

TEST_CASE("stop strings: hold-back is bounded, empty stops are rejected, no stops pass through", "[model]") {
  auto m = StopStringMatcher::create({"abcdef"});
  REQUIRE(m.has_value());
  CHECK(m->max_hold_back() == 5);
  CHECK(m->feed("xxabc").text == "xx");
  CHECK(m->feed("dxx").text == "abcdxx");
  CHECK(m->feed("abcde").text.empty());
  const auto r = m->feed("f tail");
  CHECK(r.stopped);
  CHECK(r.text.empty());
  CHECK(m->stopped_index() == 0);
  CHECK(m->feed("more").stopped);
  m->reset();
  CHECK_FALSE(m->stopped());
  CHECK(m->feed("abc").text.empty());
  CHECK(m->finish() == "abc");
  CHECK(StopStringMatcher::create({"ok", ""}).error().code == Errc::invalid_argument);
  auto none = StopStringMatcher::create({});
  REQUIRE(none.has_value());
  CHECK(none->feed("anything").text == "anything");
}

TEST_CASE("a stream continuing a context yields decode(context + ids) minus decode(context)", "[model]") {
  std::mt19937 rng(77);
  for (const char* name : {"llama3", "qwen3", "stories260K"}) {
    const Tokenizer& tok = tokenizer(name);
    std::uniform_int_distribution<int32_t> any(0, tok.vocab_size() - 1);
    int32_t checked = 0;
    for (int i = 0; i < 300; ++i) {
      std::vector<int32_t> context(static_cast<size_t>(i % 7)), gen(static_cast<size_t>(1 + i % 13));
      for (auto& id : context) id = any(rng);
      for (auto& id : gen) id = any(rng);
      std::vector<int32_t> all = context;
      all.insert(all.end(), gen.begin(), gen.end());
      auto whole = tok.decode(all);
      auto head = tok.decode(context);
      REQUIRE(whole.has_value());
      REQUIRE(head.has_value());
      // Compare where the whole text begins with the context's (its last character is not completed by the ids).
      if (whole->compare(0, head->size(), *head) != 0) continue;
      DetokenizerStream stream(tok);
      stream.continue_after(context);
      std::string out;
      for (int32_t id : gen) {
        auto piece = stream.feed(id);
        REQUIRE(piece.has_value());
        out += *piece;
      }
      out += stream.finish();
      INFO(name << " case " << i);
      CHECK(out == whole->substr(head->size()));
      ++checked;
    }
    CHECK(checked > 200);
  }
}

TEST_CASE("SentencePiece: a continuation keeps its first word's space, a fresh text drops it", "[model]") {
  const Tokenizer& tok = tokenizer("stories260K");
  auto prompt = tok.encode("One day, they");  // BOS + pieces
  auto gen = tok.encode("saw a box", {.add_special_tokens = false});  // "▁saw▁a▁box"
  REQUIRE(prompt.has_value());
  REQUIRE(gen.has_value());
  auto run = [&](std::span<const int32_t> context) {
    DetokenizerStream stream(tok);
    stream.continue_after(context);
    std::string out;
    for (int32_t id : *gen) out += *stream.feed(id);
    return out + std::string(stream.finish());
  };
  CHECK(run(*prompt) == " saw a box");
  CHECK(run(std::span<const int32_t>(prompt->data(), 1)) == "saw a box");  // BOS alone: start of text
  CHECK(run({}) == "saw a box");
  // Ids outside the tokenizer add nothing to the context.
  std::vector<int32_t> padded = {prompt->front(), tok.vocab_size() + 5};
  CHECK(run(padded) == "saw a box");
}
