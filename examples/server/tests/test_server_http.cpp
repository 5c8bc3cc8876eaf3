// photon-server over HTTP on models/stories260K: health, models, the chat
// page, greedy completions against the model's golden tokens, streaming, and
// API keys; an engine with int8 weights (photon-server --weights).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "photon/tokenizer.hpp"
#include "server_fixture.hpp"

using namespace photon;
using namespace photon::server::test;

TEST_CASE("server: health, models and the chat page", "[api]") {
  TestServer ts(photon::test::stories_dir());

  auto health = ts.get("/health");
  REQUIRE(health);
  CHECK(health->status == 200);
  CHECK(json::parse(health->body)["status"] == "ok");

  auto models = ts.get("/v1/models");
  REQUIRE(models);
  REQUIRE(models->status == 200);
  const json list = json::parse(models->body);
  CHECK(list["object"] == "list");
  REQUIRE(list["data"].size() == 1);
  CHECK(list["data"][0]["id"] == "stories260K");
  CHECK(list["data"][0]["object"] == "model");
  CHECK(list["data"][0]["max_model_len"] == 512);

  auto one = ts.get("/v1/models/stories260K");
  REQUIRE(one);
  CHECK(one->status == 200);
  require_error(ts.get("/v1/models/gpt-4"), 404);
  require_error(ts.get("/no/such/route"), 404);

  auto page = ts.get("/");
  REQUIRE(page);
  CHECK(page->status == 200);
  CHECK(page->get_header_value("Content-Type").rfind("text/html", 0) == 0);
  CHECK(page->body.find("<script>") != std::string::npos);
  CHECK(page->body.find("/v1/chat/completions") != std::string::npos);
  CHECK(page->body.find("getReader()") != std::string::npos);  // streams with fetch + ReadableStream

  auto metrics = ts.get("/metrics");
  REQUIRE(metrics);
  CHECK(metrics->status == 200);
  CHECK(metrics->body.find("photon_server_open_requests 0") != std::string::npos);
}

TEST_CASE("server: a greedy completion reproduces the golden tokens", "[api]") {
  TestServer ts(photon::test::stories_dir());
  const json g = golden("once_upon_a_time");
  const auto want = g["generated_ids"].get<std::vector<int32_t>>();
  const auto prompt_ids = g["prompt_ids"].get<std::vector<int32_t>>();  // BOS first: the tokenizer adds it

  const json req = {{"model", "stories260K"},
                    {"prompt", g["prompt"]},
                    {"temperature", 0},
                    {"max_tokens", want.size()},
                    {"return_token_ids", true}};
  auto res = ts.post("/v1/completions", req);
  REQUIRE(res);
  INFO(res->body);
  REQUIRE(res->status == 200);
  const json body = json::parse(res->body);
  CHECK(body["object"] == "text_completion");
  CHECK(body["model"] == "stories260K");
  CHECK(body["id"].get<std::string>().rfind("cmpl-", 0) == 0);
  const json& choice = body["choices"][0];
  CHECK(choice["token_ids"].get<std::vector<int32_t>>() == want);
  CHECK(choice["prompt_token_ids"].get<std::vector<int32_t>>() == prompt_ids);
  CHECK(choice["finish_reason"] == "length");
  CHECK(choice["logprobs"].is_null());
  CHECK(body["usage"]["prompt_tokens"] == prompt_ids.size());
  CHECK(body["usage"]["completion_tokens"] == want.size());
  CHECK(body["usage"]["total_tokens"] == prompt_ids.size() + want.size());

  // The text is the tokens decoded without special tokens.
  auto tok = Tokenizer::load(photon::test::stories_dir());
  REQUIRE(tok.has_value());
  DecodeOptions dec;
  dec.skip_special_tokens = true;
  auto text = tok->decode(want, dec);
  REQUIRE(text.has_value());
  CHECK(choice["text"] == *text);
  CHECK(choice["text"] == g["generated_text"]);

  SECTION("the same prompt as token ids") {
    json by_ids = req;
    by_ids["prompt"] = prompt_ids;
    auto r2 = ts.post("/v1/completions", by_ids);
    REQUIRE(r2);
    REQUIRE(r2->status == 200);
    const json b2 = json::parse(r2->body);
    CHECK(b2["choices"][0]["token_ids"].get<std::vector<int32_t>>() == want);
    CHECK(b2["choices"][0]["text"] == *text);
  }
  SECTION("logprobs: the chosen token is the most likely one") {
    json with_lp = req;
    with_lp["logprobs"] = 2;
    with_lp["max_tokens"] = 8;
    auto r3 = ts.post("/v1/completions", with_lp);
    REQUIRE(r3);
    REQUIRE(r3->status == 200);
    const json lp = json::parse(r3->body)["choices"][0]["logprobs"];
    REQUIRE(lp["tokens"].size() == 8);
    REQUIRE(lp["token_logprobs"].size() == 8);
    REQUIRE(lp["top_logprobs"].size() == 8);
    REQUIRE(lp["text_offset"].size() == 8);
    for (size_t i = 0; i < 8; ++i) {
      auto piece = tok->token_to_piece(want[i]);
      REQUIRE(piece.has_value());
      CHECK(lp["tokens"][i] == *piece);
      CHECK(lp["token_logprobs"][i].get<double>() <= 0.0);
      REQUIRE(lp["top_logprobs"][i].size() == 2);
      // Greedy: the chosen token is the top one, so its logprob is the largest.
      double best = -1e30;
      for (auto& [k, v] : lp["top_logprobs"][i].items()) best = std::max(best, v.get<double>());
      CHECK(lp["token_logprobs"][i].get<double>() == Approx(best));
    }
  }
}

// photon-server --weights int8: the server adds nothing to the engine's int8 path, so its greedy
// answer is the token list an int8 engine of the same options generates itself.
TEST_CASE("server: an engine with int8 weights serves the tokens it generates itself", "[api]") {
  const std::string weights = GENERATE(std::string("int8"), std::string("int8-lm-head"));
  CAPTURE(weights);
  TestServer ts(photon::test::stories_dir(), FixtureOptions{.weights = weights});
  const json g = golden("once_upon_a_time");
  const auto prompt_ids = g["prompt_ids"].get<std::vector<int32_t>>();
  constexpr int32_t kTokens = 24;

  auto own = Engine::open(test_engine_options(photon::test::stories_dir(), weights));
  REQUIRE(own.has_value());
  Request r;
  r.prompt_tokens = prompt_ids;
  r.max_tokens = kTokens;
  r.sampling.temperature = 0.f;
  r.ignore_eos = true;
  auto want = own->generate(r);
  REQUIRE(want.has_value());
  REQUIRE(want->tokens.size() == size_t(kTokens));

  // The same request on weights as stored: its logprobs show that the server's engine is int8.
  auto stored = Engine::open(test_engine_options(photon::test::stories_dir(), "auto"));
  REQUIRE(stored.has_value());
  auto as_stored = stored->generate(r);
  REQUIRE(as_stored.has_value());

  const json req = {{"model", "stories260K"}, {"prompt", prompt_ids},       {"temperature", 0},
                    {"max_tokens", kTokens},  {"return_token_ids", true}, {"ignore_eos", true},
                    {"logprobs", 1}};
  auto res = ts.post("/v1/completions", req);
  REQUIRE(res);
  INFO(res->body);
  REQUIRE(res->status == 200);
  const json choice = json::parse(res->body)["choices"][0];
  CHECK(choice["token_ids"].get<std::vector<int32_t>>() == want->tokens);
  CHECK(choice["finish_reason"] == "length");
  const auto served_lp = choice["logprobs"]["token_logprobs"].get<std::vector<double>>();
  REQUIRE(served_lp.size() == size_t(kTokens));
  double off_int8 = 0, off_stored = 0;
  for (size_t i = 0; i < served_lp.size(); ++i) {
    off_int8 = std::max(off_int8, std::abs(served_lp[i] - double(want->logprobs[i])));
    if (as_stored->tokens[i] == want->tokens[i])
      off_stored = std::max(off_stored, std::abs(served_lp[i] - double(as_stored->logprobs[i])));
  }
  CHECK(off_int8 < 1e-5);
  CHECK(off_stored > 1e-4);  // int8 rounding moves the logprobs
}

TEST_CASE("server: streamed chunks concatenate to the non-streamed answer", "[api]") {
  TestServer ts(photon::test::stories_dir());
  const json g = golden("once_upon_a_time");
  const auto want = g["generated_ids"].get<std::vector<int32_t>>();
  json req = {{"prompt", g["prompt"]}, {"temperature", 0}, {"max_tokens", want.size()}, {"return_token_ids", true}};
  auto whole = ts.post("/v1/completions", req);
  REQUIRE(whole);
  REQUIRE(whole->status == 200);
  const std::string whole_text = json::parse(whole->body)["choices"][0]["text"];

  req["stream"] = true;
  req["stream_options"] = {{"include_usage", true}};
  auto res = ts.post("/v1/completions", req);
  REQUIRE(res);
  REQUIRE(res->status == 200);
  CHECK(res->get_header_value("Content-Type").rfind("text/event-stream", 0) == 0);
  bool done = false;
  const std::vector<json> chunks = sse_payloads(res->body, done);
  CHECK(done);
  // At least one choice chunk and the usage chunk: events that arrive together
  // (the loop thread can outrun the writer) share a chunk.
  REQUIRE(chunks.size() >= 2);
  std::string text;
  std::vector<int32_t> ids;
  int finishes = 0;
  for (size_t i = 0; i + 1 < chunks.size(); ++i) {
    const json& c = chunks[i];
    CHECK(c["object"] == "text_completion");
    CHECK(c["id"] == chunks[0]["id"]);
    REQUIRE(c["choices"].size() == 1);
    text += c["choices"][0]["text"].get<std::string>();
    for (int32_t id : c["choices"][0]["token_ids"].get<std::vector<int32_t>>()) ids.push_back(id);
    if (!c["choices"][0]["finish_reason"].is_null()) {
      ++finishes;
      CHECK(c["choices"][0]["finish_reason"] == "length");
      CHECK(i + 2 == chunks.size());  // the finish is the last choice chunk
    }
  }
  CHECK(finishes == 1);
  CHECK(text == whole_text);
  CHECK(ids == want);
  // The last chunk carries the usage and no choice.
  const json& last = chunks.back();
  CHECK(last["choices"].empty());
  CHECK(last["usage"]["completion_tokens"] == want.size());
  CHECK(last["usage"]["prompt_tokens"] == 5);
}

TEST_CASE("server: stop strings end the answer before them", "[api]") {
  TestServer ts(photon::test::stories_dir());
  const json g = golden("once_upon_a_time");
  // The golden continuation is ", there was a little girl named Lily. ..."
  const json req = {{"prompt", g["prompt"]}, {"temperature", 0}, {"max_tokens", 64}, {"stop", {" girl", "zzz"}}};
  auto res = ts.post("/v1/completions", req);
  REQUIRE(res);
  REQUIRE(res->status == 200);
  const json choice = json::parse(res->body)["choices"][0];
  CHECK(choice["text"] == ", there was a little");
  CHECK(choice["finish_reason"] == "stop");
  CHECK(choice["stop_reason"] == " girl");  // vLLM's field: which stop string

  json streamed = req;
  streamed["stream"] = true;
  auto sres = ts.post("/v1/completions", streamed);
  REQUIRE(sres);
  bool done = false;
  std::string text;
  json last_reason;
  for (const json& c : sse_payloads(sres->body, done)) {
    text += c["choices"][0]["text"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) last_reason = c["choices"][0]["stop_reason"];
  }
  CHECK(done);
  CHECK(text == ", there was a little");
  CHECK(last_reason == " girl");

  // A stop token id is reported as the id; a length finish has no stop reason.
  const auto ids = g["generated_ids"].get<std::vector<int32_t>>();
  json by_token = {{"prompt", g["prompt"]}, {"temperature", 0}, {"max_tokens", 64}, {"stop_token_ids", {ids[3]}}};
  auto tres = ts.post("/v1/completions", by_token);
  REQUIRE(tres);
  REQUIRE(tres->status == 200);
  const json tchoice = json::parse(tres->body)["choices"][0];
  CHECK(tchoice["finish_reason"] == "stop");
  CHECK(tchoice["stop_reason"] == ids[3]);
  json plain = {{"prompt", g["prompt"]}, {"temperature", 0}, {"max_tokens", 4}};
  auto pres = ts.post("/v1/completions", plain);
  REQUIRE(pres);
  const json pchoice = json::parse(pres->body)["choices"][0];
  CHECK(pchoice["finish_reason"] == "length");
  CHECK(pchoice["stop_reason"].is_null());
}

TEST_CASE("server: an API key guards /v1 and /metrics", "[api]") {
  FixtureOptions fo;
  fo.api_key = "sk-test";
  TestServer ts(photon::test::stories_dir(), fo);
  require_error(ts.get("/v1/models"), 401);
  require_error(ts.post("/v1/completions", json{{"prompt", "x"}}), 401);
  auto health = ts.get("/health");  // open, for load balancers
  REQUIRE(health);
  CHECK(health->status == 200);
  auto c = ts.client();
  c->set_bearer_token_auth("sk-test");
  auto ok = c->Get("/v1/models");
  REQUIRE(ok);
  CHECK(ok->status == 200);
  c->set_bearer_token_auth("wrong");
  require_error(c->Get("/metrics"), 401);
}
