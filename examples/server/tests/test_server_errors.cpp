// photon-server's answers to bad requests: OpenAI error bodies with the right
// HTTP status and a message naming the field; and no crash on mangled bodies.
#include <random>
#include <string>

#include "server_fixture.hpp"

using namespace photon;
using namespace photon::server::test;

namespace {

// A 400 whose message and "param" name `field`.
void require_field_error(const httplib::Result& res, const std::string& field) {
  const json e = require_error(res, 400);
  INFO(e.dump());
  CHECK(e["type"] == "invalid_request_error");
  CHECK(e["param"] == field);
  CHECK(e["message"].get<std::string>().find(field) != std::string::npos);
}

}  // namespace

TEST_CASE("server: malformed completions requests are 400 naming the field", "[api]") {
  TestServer ts(photon::test::stories_dir());
  const std::string path = "/v1/completions";
  auto with = [](json extra) {
    json j = {{"prompt", "Once upon a time"}, {"max_tokens", 4}};
    for (auto& [k, v] : extra.items()) j[k] = v;
    return j;
  };

  const json not_json = require_error(ts.post(path, std::string("{\"prompt\": ")), 400);
  CHECK(not_json["message"].get<std::string>().find("JSON") != std::string::npos);
  require_error(ts.post(path, std::string("[1, 2]")), 400);
  require_field_error(ts.post(path, json{{"max_tokens", 4}}), "prompt");
  require_field_error(ts.post(path, with({{"temperature", "hot"}})), "temperature");
  require_field_error(ts.post(path, with({{"temperature", -1}})), "temperature");
  require_field_error(ts.post(path, with({{"max_tokens", -1}})), "max_tokens");
  require_field_error(ts.post(path, with({{"max_tokens", 2.5}})), "max_tokens");
  require_field_error(ts.post(path, with({{"max_tokens", "16"}})), "max_tokens");
  require_field_error(ts.post(path, with({{"top_p", 0}})), "top_p");
  require_field_error(ts.post(path, with({{"top_k", -2}})), "top_k");
  require_field_error(ts.post(path, with({{"min_p", 1.5}})), "min_p");
  require_field_error(ts.post(path, with({{"presence_penalty", 3}})), "presence_penalty");
  require_field_error(ts.post(path, with({{"frequency_penalty", true}})), "frequency_penalty");
  require_field_error(ts.post(path, with({{"repetition_penalty", 0}})), "repetition_penalty");
  require_field_error(ts.post(path, with({{"seed", -5}})), "seed");
  require_field_error(ts.post(path, with({{"stream", "yes"}})), "stream");
  require_field_error(ts.post(path, with({{"stream_options", {{"include_usage", 1}}}})), "stream_options.include_usage");
  require_field_error(ts.post(path, with({{"stop", 7}})), "stop");
  require_field_error(ts.post(path, with({{"stop", {"ok", ""}}})), "stop[1]");
  require_field_error(ts.post(path, with({{"logprobs", 21}})), "logprobs");
  require_field_error(ts.post(path, with({{"n", 2}})), "n");
  require_field_error(ts.post(path, with({{"echo", true}})), "echo");
  require_field_error(ts.post(path, with({{"logit_bias", {{"5", 10}}}})), "logit_bias");
  require_field_error(ts.post(path, with({{"prompt", {1, -3}}})), "prompt[1]");
  require_field_error(ts.post(path, with({{"prompt", {1, "x"}}})), "prompt[1]");
  require_field_error(ts.post(path, with({{"prompt", json::array()}})), "prompt");
  require_field_error(ts.post(path, with({{"prompt", {"a", "b"}}})), "prompt");
  require_field_error(ts.post(path, with({{"prompt", {{"text", "x"}}}})), "prompt");
  require_field_error(ts.post(path, with({{"stop_token_ids", {2, -1}}})), "stop_token_ids[1]");

  // Checked by the engine, reported as 400 with its message.
  const json vocab = require_error(ts.post(path, with({{"prompt", {1, 99999}}})), 400);
  CHECK(vocab["message"].get<std::string>().find("vocabulary") != std::string::npos);
  const json context = require_error(ts.post(path, with({{"max_tokens", 100000}})), 400);
  CHECK(context["message"].get<std::string>().find("max_position_embeddings") != std::string::npos);

  // Deep nesting is parsed and rejected without recursing on the stack.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  require_error(ts.post(path, deep), 400);
  require_field_error(ts.post(path, R"({"prompt": "x", "temperature": )" + deep + "}"), "temperature");

  // Another model's name: 404, as OpenAI and vLLM answer.
  const json other = require_error(ts.post(path, with({{"model", "gpt-4"}})), 404);
  CHECK(other["param"] == "model");

  // Null means "absent", as OpenAI clients send for unset options.
  auto nulls = ts.post(path, with({{"temperature", nullptr}, {"stop", nullptr}, {"seed", nullptr}}));
  REQUIRE(nulls);
  CHECK(nulls->status == 200);

  // Every refusal was counted, and the server still serves.
  auto metrics = ts.get("/metrics");
  REQUIRE(metrics);
  CHECK(metrics->body.find("photon_server_rejected_requests_total 0") == std::string::npos);
  auto health = ts.get("/health");
  REQUIRE(health);
  CHECK(health->status == 200);
}

TEST_CASE("server: malformed chat requests are 400 naming the field", "[api]") {
  TestServer ts(photon::test::stories_dir());
  const std::string path = "/v1/chat/completions";
  require_field_error(ts.post(path, json{{"max_tokens", 4}}), "messages");
  require_field_error(ts.post(path, json{{"messages", "hi"}}), "messages");
  require_field_error(ts.post(path, json{{"messages", json::array()}}), "messages");
  require_field_error(ts.post(path, json{{"messages", {1}}}), "messages[0]");
  require_field_error(ts.post(path, json{{"messages", {{{"content", "hi"}}}}}), "messages[0].role");
  require_field_error(ts.post(path, json{{"messages", {{{"role", "user"}, {"content", 5}}}}}), "messages[0].content");
  require_field_error(
      ts.post(path, json{{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}}}}),
      "messages[0].content[0].type");
  const json hi = {{{"role", "user"}, {"content", "hi"}}};
  require_field_error(ts.post(path, json{{"messages", hi}, {"top_logprobs", 3}}), "top_logprobs");
  require_field_error(ts.post(path, json{{"messages", hi}, {"logprobs", 1}}), "logprobs");
  require_field_error(ts.post(path, json{{"messages", hi}, {"tools", {{{"type", "function"}}}}}), "tools");
  require_field_error(ts.post(path, json{{"messages", hi}, {"response_format", {{"type", "json_object"}}}}),
                      "response_format");
  require_field_error(ts.post(path, json{{"messages", hi}, {"chat_template_kwargs", {{"enable_thinking", "no"}}}}),
                      "chat_template_kwargs.enable_thinking");

  // A well-formed chat request on a model without a chat template: 400 that says so.
  const json e = require_error(ts.post(path, json{{"messages", hi}}), 400);
  CHECK(e["param"] == "messages");
  CHECK(e["message"].get<std::string>().find("no chat template") != std::string::npos);
}

TEST_CASE("server: mangled request bodies never crash it", "[api]") {
  TestServer ts(photon::test::stories_dir());
  const std::string valid =
      R"({"prompt": [1, 403, 407], "max_tokens": 2, "temperature": 0.5, "top_k": 5, "stop": ["a", "b"],)"
      R"( "logprobs": 1, "stream": false, "messages": [{"role": "user", "content": "hi"}]})";
  const char alphabet[] = "{}[]\",:0123456789-.eEtrufalsn \\u";
  std::mt19937 rng(1234);
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  int answered = 0;
  for (int i = 0; i < 150; ++i) {
    std::string body = valid;
    for (int k = 1 + int(pick(4)); k > 0; --k) {
      const size_t at = pick(body.size());
      switch (pick(3)) {
        case 0: body[at] = alphabet[pick(sizeof(alphabet) - 1)]; break;
        case 1: body.erase(at, 1 + pick(8)); break;
        default: body.insert(at, 1, alphabet[pick(sizeof(alphabet) - 1)]); break;
      }
    }
    const std::string path = i % 2 ? "/v1/completions" : "/v1/chat/completions";
    auto res = ts.post(path, body);
    REQUIRE(res);  // an answer, not a dropped connection
    INFO(path << " " << body << " -> " << res->status << " " << res->body);
    CHECK((res->status == 200 || res->status == 400 || res->status == 404));
    if (res->get_header_value("Content-Type").rfind("text/event-stream", 0) == 0) {
      bool done = false;
      sse_payloads(res->body, done);  // a mutation may have turned streaming on
      CHECK(done);
    } else {
      const json j = json::parse(res->body, nullptr, false);
      CHECK_FALSE(j.is_discarded());
      if (res->status != 200) CHECK(j.contains("error"));
    }
    ++answered;
  }
  CHECK(answered == 150);
  auto health = ts.get("/health");
  REQUIRE(health);
  CHECK(health->status == 200);
}
