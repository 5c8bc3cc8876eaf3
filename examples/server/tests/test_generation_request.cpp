// Request parsing without HTTP: how OpenAI fields map to photon::Request, and
// which field an error names.
#include <catch2/catch.hpp>

#include "generation_request.hpp"

using namespace photon;
using namespace photon::server;

namespace {

GenerationRequest parse_ok(ApiKind kind, const std::string& body) {
  GenerationRequest r;
  const auto err = parse_generation_request(kind, body, r);
  INFO(body << " -> " << (err ? err->message : std::string("ok")));
  REQUIRE_FALSE(err.has_value());
  return r;
}

std::string error_param(ApiKind kind, const std::string& body) {
  GenerationRequest r;
  const auto err = parse_generation_request(kind, body, r);
  INFO(body);
  REQUIRE(err.has_value());
  CHECK(err->status == 400);
  return err->param;
}

}  // namespace

TEST_CASE("server request: completion fields map to the engine request", "[api]") {
  const GenerationRequest r = parse_ok(ApiKind::completion, R"({
    "model": "m", "prompt": "Hello", "max_tokens": 7, "temperature": 0.25, "top_p": 0.5, "top_k": -1,
    "min_p": 0.1, "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.1, "seed": 42,
    "stop": "END", "stop_token_ids": [2, 3], "ignore_eos": true, "logprobs": 3, "stream": true,
    "stream_options": {"include_usage": true}, "return_token_ids": true, "user": "ignored"})");
  CHECK(r.kind == ApiKind::completion);
  CHECK(r.model == "m");
  CHECK(r.prompt_is_text);
  CHECK(r.prompt_text == "Hello");
  CHECK(r.engine.max_tokens == 7);
  CHECK(r.engine.sampling.temperature == 0.25f);
  CHECK(r.engine.sampling.top_p == 0.5f);
  CHECK(r.engine.sampling.top_k == 0);  // -1 (vLLM) means off
  CHECK(r.engine.sampling.min_p == Approx(0.1f));
  CHECK(r.engine.sampling.presence_penalty == 0.5f);
  CHECK(r.engine.sampling.frequency_penalty == -0.5f);
  CHECK(r.engine.sampling.repetition_penalty == Approx(1.1f));
  REQUIRE(r.engine.sampling.seed.has_value());
  CHECK(*r.engine.sampling.seed == 42u);
  CHECK(r.engine.stop == std::vector<std::string>{"END"});
  CHECK(r.engine.stop_token_ids == std::vector<int32_t>{2, 3});
  CHECK(r.engine.ignore_eos);
  CHECK(r.logprobs);
  CHECK(r.engine.logprobs == 3);
  CHECK(r.stream);
  CHECK(r.include_usage);
  CHECK(r.return_token_ids);
}

TEST_CASE("server request: defaults and prompt forms", "[api]") {
  const GenerationRequest plain = parse_ok(ApiKind::completion, R"({"prompt": "x"})");
  CHECK(plain.engine.max_tokens == 16);  // OpenAI's completions default
  CHECK(plain.engine.sampling.temperature == 1.0f);
  CHECK_FALSE(plain.engine.sampling.seed.has_value());
  CHECK_FALSE(plain.logprobs);
  CHECK_FALSE(plain.stream);

  const GenerationRequest ids = parse_ok(ApiKind::completion, R"({"prompt": [1, 2, 3]})");
  CHECK_FALSE(ids.prompt_is_text);
  CHECK(ids.engine.prompt_tokens == std::vector<int32_t>{1, 2, 3});
  CHECK(parse_ok(ApiKind::completion, R"({"prompt": ["one"]})").prompt_text == "one");
  CHECK(parse_ok(ApiKind::completion, R"({"prompt": [[4, 5]]})").engine.prompt_tokens == std::vector<int32_t>{4, 5});
  CHECK(parse_ok(ApiKind::completion, R"({"prompt": "x", "logprobs": 0})").logprobs);

  const GenerationRequest chat = parse_ok(ApiKind::chat, R"({"messages": [{"role": "user", "content": "hi"}]})");
  CHECK(chat.engine.max_tokens == 0);  // chat: the rest of the context
  REQUIRE(chat.engine.messages.size() == 1);
  CHECK(chat.engine.messages[0].role == "user");
  CHECK(chat.engine.messages[0].content == "hi");
}

TEST_CASE("server request: chat fields", "[api]") {
  const GenerationRequest r = parse_ok(ApiKind::chat, R"({
    "messages": [
      {"role": "system", "content": "be brief"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": null, "reasoning_content": "hmm"},
      {"role": "user", "content": "go"}],
    "max_completion_tokens": 9, "logprobs": true, "top_logprobs": 4, "add_generation_prompt": false,
    "chat_template_kwargs": {"enable_thinking": false}, "response_format": {"type": "text"}, "tools": []})");
  REQUIRE(r.engine.messages.size() == 4);
  CHECK(r.engine.messages[1].content == "a\nb");  // text parts joined by newlines
  CHECK(r.engine.messages[2].content.empty());
  REQUIRE(r.engine.messages[2].reasoning_content.has_value());
  CHECK(*r.engine.messages[2].reasoning_content == "hmm");
  CHECK(r.engine.max_tokens == 9);
  CHECK(r.logprobs);
  CHECK(r.engine.logprobs == 4);
  CHECK_FALSE(r.engine.chat.add_generation_prompt);
  CHECK_FALSE(r.engine.chat.enable_thinking);
}

TEST_CASE("server request: errors name the field by its path", "[api]") {
  CHECK(error_param(ApiKind::completion, "nope").empty());
  CHECK(error_param(ApiKind::completion, R"({"prompt": "x", "top_p": 1.5})") == "top_p");
  CHECK(error_param(ApiKind::completion, R"({"prompt": "x", "seed": 1.5})") == "seed");
  CHECK(error_param(ApiKind::completion, R"({"prompt": "x", "max_tokens": 0})") == "max_tokens");
  CHECK(error_param(ApiKind::completion, R"({"prompt": "x", "max_tokens": 4294967296})") == "max_tokens");
  CHECK(error_param(ApiKind::completion, R"({"prompt": [[1, 2.5]]})") == "prompt[0][1]");
  CHECK(error_param(ApiKind::completion, R"({"prompt": "x", "stop": ["a", 1]})") == "stop[1]");
  CHECK(error_param(ApiKind::completion, R"({"prompt": "x", "best_of": 2})") == "best_of");
  CHECK(error_param(ApiKind::completion, R"({"prompt": "x", "suffix": "y"})") == "suffix");
  CHECK(error_param(ApiKind::completion, R"({"prompt": "x", "stream_options": 1})") == "stream_options");
  CHECK(error_param(ApiKind::chat, R"({"messages": [{"role": "user", "content": "a"}, {"role": 3}]})") ==
        "messages[1].role");
  CHECK(error_param(ApiKind::chat, R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})") ==
        "messages[0].content[0].text");
  CHECK(error_param(ApiKind::chat, R"({"messages": [{"role": "user", "content": [7]}]})") ==
        "messages[0].content[0]");
  CHECK(error_param(ApiKind::chat,
                    R"({"messages": [{"role": "assistant", "content": "", "tool_calls": [{"id": "1"}]}]})") ==
        "messages[0].tool_calls");
  CHECK(error_param(ApiKind::chat, R"({"messages": [{"role": "user", "content": "a"}], "max_tokens": -3})") ==
        "max_tokens");
}

TEST_CASE("server request: prompt encoding needs a tokenizer", "[api]") {
  GenerationRequest r = parse_ok(ApiKind::completion, R"({"prompt": "x"})");
  auto err = encode_prompt(r, nullptr);
  REQUIRE(err.has_value());
  CHECK(err->param == "prompt");
  CHECK(err->message.find("tokenizer") != std::string::npos);
  // Token ids need none.
  GenerationRequest ids = parse_ok(ApiKind::completion, R"({"prompt": [1, 2]})");
  CHECK_FALSE(encode_prompt(ids, nullptr).has_value());
  CHECK(ids.engine.prompt_tokens == std::vector<int32_t>{1, 2});
}

// Found by the server_request fuzz target (tests/fuzz): "repetition_penalty": 1e308 was
// finite as a double and overflowed the float conversion to inf.
TEST_CASE("server request: numbers a float cannot hold are refused, naming the field", "[api]") {
  CHECK(error_param(ApiKind::completion, R"({"prompt": "a", "repetition_penalty": 1e308})") == "repetition_penalty");
  CHECK(error_param(ApiKind::completion, R"({"prompt": "a", "temperature": 3.5e38})") == "temperature");
  CHECK(error_param(ApiKind::chat, R"({"messages": [{"role": "user", "content": "a"}], "presence_penalty": -1e300})") ==
        "presence_penalty");
  // Rounds to 0 as a float: outside top_p's (0, 1] and repetition_penalty's (0, inf).
  CHECK(error_param(ApiKind::completion, R"({"prompt": "a", "top_p": 1e-50})") == "top_p");
  CHECK(error_param(ApiKind::completion, R"({"prompt": "a", "repetition_penalty": 1e-46})") == "repetition_penalty");
  // The largest float and the smallest positive one still pass where the range allows them.
  CHECK(parse_ok(ApiKind::completion, R"({"prompt": "a", "temperature": 3.4e38})").engine.sampling.temperature ==
        3.4e38f);
  CHECK(parse_ok(ApiKind::completion, R"({"prompt": "a", "top_p": 1e-45})").engine.sampling.top_p > 0.0f);
}
