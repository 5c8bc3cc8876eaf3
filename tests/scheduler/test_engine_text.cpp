// Text in and out of the engine: prompts as text or chat messages, streamed
// detokenized pieces, stop strings. stories260K (SentencePiece) has a golden
// greedy generation of "Once upon a time".
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "photon/engine.hpp"
#include "photon/tokenizer.hpp"
#include "scheduler/request_text.hpp"
#include "support/test_data.hpp"

using namespace photon;

namespace {

struct StoriesGolden {
  std::string prompt;
  std::vector<int32_t> prompt_ids, generated_ids;
  std::string generated_text;
};

StoriesGolden load_stories_golden(const std::string& name) {
  std::ifstream in(test::stories_dir() + "/golden/" + name + ".json");
  const auto j = nlohmann::json::parse(in);
  return {j.at("prompt").get<std::string>(), j.at("prompt_ids").get<std::vector<int32_t>>(),
          j.at("generated_ids").get<std::vector<int32_t>>(), j.at("generated_text").get<std::string>()};
}

Engine open_stories(int32_t max_batch_tokens = 512) {
  EngineOptions o;
  o.model_dir = test::stories_dir();
  o.backend = "cpu";
  o.threads = 2;
  o.kv_blocks = 256;
  o.max_batch_tokens = max_batch_tokens;
  auto e = Engine::open(o);
  REQUIRE(e.has_value());
  return std::move(*e);
}

Request text_request(const std::string& prompt, int32_t max_tokens) {
  Request r;
  r.prompt = prompt;
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.sampling.temperature = 0.0f;
  return r;
}

}  // namespace

TEST_CASE("engine text: a text prompt reproduces the stories260K golden generation", "[scheduler]") {
  const StoriesGolden g = load_stories_golden("once_upon_a_time");
  Engine engine = open_stories();
  REQUIRE(engine.tokenizer() != nullptr);
  auto done = engine.generate(text_request(g.prompt, int32_t(g.generated_ids.size())));
  REQUIRE(done.has_value());
  CHECK(done->tokens == g.generated_ids);
  CHECK(done->text == g.generated_text);
  // The same through prompt_tokens.
  Request by_ids;
  by_ids.prompt_tokens = g.prompt_ids;
  by_ids.max_tokens = int32_t(g.generated_ids.size());
  by_ids.ignore_eos = true;
  by_ids.sampling.temperature = 0.0f;
  auto same = engine.generate(by_ids);
  REQUIRE(same.has_value());
  CHECK(same->tokens == g.generated_ids);
}

TEST_CASE("engine text: the generated text continues the prompt's, first space included", "[scheduler]") {
  // HF's generated_text decodes the new ids alone ("saw a big box..."); the
  // engine's text is what follows the prompt in full_text (" saw a big box...").
  auto in = std::ifstream(test::stories_dir() + "/golden/lily_and_ben.json");
  const auto j = nlohmann::json::parse(in);
  const auto prompt = j.at("prompt").get<std::string>(), full = j.at("full_text").get<std::string>();
  const auto want_ids = j.at("generated_ids").get<std::vector<int32_t>>();
  Engine engine = open_stories();
  auto done = engine.generate(text_request(prompt, int32_t(want_ids.size())));
  REQUIRE(done.has_value());
  REQUIRE(done->tokens == want_ids);
  REQUIRE(full.compare(0, prompt.size(), prompt) == 0);
  CHECK(done->text == full.substr(prompt.size()));
  CHECK(done->text.front() == ' ');
}

TEST_CASE("engine text: streamed pieces concatenate to the decoded text", "[scheduler]") {
  const StoriesGolden g = load_stories_golden("once_upon_a_time");
  Engine engine = open_stories(/*max_batch_tokens=*/3);  // chunked prompts, several requests
  std::vector<RequestId> ids;
  for (const char* p : {"Once upon a time", "Lily and Ben", "The dog"}) ids.push_back(*engine.submit(text_request(p, 48)));
  std::map<RequestId, std::string> text;
  std::map<RequestId, std::vector<int32_t>> tokens;
  std::vector<Event> events;
  while (engine.has_work()) {
    REQUIRE(engine.step().has_value());
    events.clear();
    engine.poll(events);
    for (const Event& e : events) {
      text[e.request] += e.text;
      if (e.token >= 0) tokens[e.request].push_back(e.token);
    }
  }
  // The text continues the prompt's: decode(prompt + generated) minus decode(prompt).
  const char* prompts[] = {"Once upon a time", "Lily and Ben", "The dog"};
  for (size_t i = 0; i < ids.size(); ++i) {
    auto prompt = engine.tokenizer()->encode(prompts[i]);
    REQUIRE(prompt.has_value());
    std::vector<int32_t> all = *prompt;
    all.insert(all.end(), tokens[ids[i]].begin(), tokens[ids[i]].end());
    auto whole = engine.tokenizer()->decode(all);
    auto head = engine.tokenizer()->decode(*prompt);
    REQUIRE(whole.has_value());
    REQUIRE(head.has_value());
    REQUIRE(whole->compare(0, head->size(), *head) == 0);
    CHECK(text[ids[i]] == whole->substr(head->size()));
  }
  CHECK(text[ids[0]] == g.generated_text.substr(0, text[ids[0]].size()));
}

TEST_CASE("engine text: a stop string ends generation and never reaches the text", "[scheduler]") {
  const StoriesGolden g = load_stories_golden("once_upon_a_time");
  Engine engine = open_stories();
  Request r = text_request(g.prompt, 64);
  r.stop = {"dragon", "Lily.", "girl named Lily"};  // in ", there was a little girl named Lily. She ..."
  auto done = engine.generate(r);
  REQUIRE(done.has_value());
  CHECK(done->finish == FinishReason::stop);
  CHECK(done->text == ", there was a little ");  // the earliest occurrence wins
  CHECK(done->stop_string == 2);
  REQUIRE(done->tokens.size() < g.generated_ids.size());
  CHECK(std::equal(done->tokens.begin(), done->tokens.end(), g.generated_ids.begin()));
  // A stop string that never appears: the whole generation.
  r.stop = {"dragon!!"};
  auto all = engine.generate(r);
  REQUIRE(all.has_value());
  CHECK(all->finish == FinishReason::length);
  CHECK(all->text == g.generated_text);
  CHECK(all->stop_string == -1);
  r.stop = {""};
  CHECK(engine.submit(r).error().code == Errc::invalid_argument);
}

TEST_CASE("engine text: malformed text requests are rejected at submit", "[scheduler]") {
  Engine engine = open_stories();
  Request both = text_request("Once", 4);
  both.prompt_tokens = {1, 2};
  CHECK(engine.submit(both).error().code == Errc::invalid_argument);
  Request none;
  none.max_tokens = 4;
  CHECK(engine.submit(none).error().code == Errc::invalid_argument);
  Request chat;
  chat.messages = {{"user", "Hello", std::nullopt}};
  chat.max_tokens = 4;
  CHECK(engine.submit(chat).error().code == Errc::template_error);  // stories260K has no chat template

  // A model folder without a tokenizer: token ids only.
  EngineOptions o;
  o.model_dir = test::golden_dir("llama3-tiny");
  o.backend = "cpu";
  o.kv_blocks = 16;
  auto bare = Engine::open(o);
  REQUIRE(bare.has_value());
  CHECK(bare->tokenizer() == nullptr);
  auto e = bare->submit(text_request("Once", 4));
  REQUIRE_FALSE(e.has_value());
  CHECK(e.error().code == Errc::invalid_state);
  Request ids;
  ids.prompt_tokens = {1, 2, 3};
  ids.max_tokens = 2;
  ids.stop = {"x"};
  CHECK(bare->submit(ids).error().code == Errc::invalid_state);
  ids.stop.clear();
  auto c = bare->generate(ids);
  REQUIRE(c.has_value());
  CHECK(c->text.empty());
}

TEST_CASE("chat messages are rendered by the template and encoded without extra specials", "[scheduler]") {
  auto tok = Tokenizer::load(test::tokenizer_dir("llama3"));
  REQUIRE(tok.has_value());
  Request r;
  r.messages = {{"system", "You are terse.", std::nullopt}, {"user", "Hi!", std::nullopt}};
  r.chat.date_string = "26 Jul 2024";
  auto ids = request_prompt_ids(r, &*tok);
  REQUIRE(ids.has_value());
  auto text = tok->render_chat(r.messages, r.chat);
  REQUIRE(text.has_value());
  EncodeOptions enc;
  enc.add_special_tokens = false;
  CHECK(*ids == *tok->encode(*text, enc));
  CHECK(ids->front() == *tok->token_to_id("<|begin_of_text|>"));  // from the template, once
  CHECK(std::count(ids->begin(), ids->end(), ids->front()) == 1);
}
