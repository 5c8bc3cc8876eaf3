// /v1/chat/completions on a model folder with a chat template: stories260K's
// weights and SentencePiece tokenizer with Qwen3's chat template added (the
// template renders ChatML text, which the 512-token vocabulary encodes as
// plain text). The answer must equal a completion of the rendered prompt.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "photon/tokenizer.hpp"
#include "server_fixture.hpp"

using namespace photon;
using namespace photon::server::test;
namespace fs = std::filesystem;

namespace {

// A temporary model folder; removed with the object.
class ChatModelDir {
 public:
  ChatModelDir() {
    std::random_device rd;
    dir_ = fs::temp_directory_path() /
           ("photon-server-chat-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
    fs::create_directories(dir_);
    const fs::path stories = photon::test::stories_dir();
    for (const char* f : {"config.json", "model.safetensors", "tokenizer.model"})
      fs::copy_file(stories / f, dir_ / f);
    json cfg = read_json_file((stories / "tokenizer_config.json").string());
    const json qwen3 = read_json_file(photon::test::tokenizer_dir("qwen3") + "/tokenizer_config.json");
    cfg["chat_template"] = qwen3["chat_template"];
    std::ofstream(dir_ / "tokenizer_config.json") << cfg.dump(1);
  }
  ~ChatModelDir() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  ChatModelDir(const ChatModelDir&) = delete;
  ChatModelDir& operator=(const ChatModelDir&) = delete;
  std::string path() const { return dir_.string(); }

 private:
  fs::path dir_;
};

const json kMessages = json::array({{{"role", "system"}, {"content", "You tell short stories."}},
                                    {{"role", "user"}, {"content", "Once upon a time"}}});

// The prompt ids the server should build: the template's text, encoded
// without adding special tokens.
std::vector<int32_t> rendered_ids(const std::string& dir, bool enable_thinking) {
  auto tok = Tokenizer::load(dir);
  REQUIRE(tok.has_value());
  REQUIRE(tok->chat_template_kind() == ChatTemplateKind::qwen3);
  std::vector<ChatMessage> msgs;
  for (const json& m : kMessages) msgs.push_back({m["role"], m["content"], std::nullopt});
  ChatOptions opts;
  opts.enable_thinking = enable_thinking;
  auto text = tok->render_chat(msgs, opts);
  REQUIRE(text.has_value());
  CHECK(text->find("<|im_start|>user\nOnce upon a time<|im_end|>") != std::string::npos);
  EncodeOptions enc;
  enc.add_special_tokens = false;
  auto ids = tok->encode(*text, enc);
  REQUIRE(ids.has_value());
  return *ids;
}

}  // namespace

TEST_CASE("server: a chat completion equals the completion of its rendered prompt", "[api]") {
  ChatModelDir dir;
  FixtureOptions fo;
  fo.model_name = "stories-chat";
  TestServer ts(dir.path(), fo);

  for (const bool thinking : {true, false}) {
    INFO("enable_thinking " << thinking);
    const std::vector<int32_t> prompt = rendered_ids(dir.path(), thinking);
    const json chat_req = {{"model", "stories-chat"},
                           {"messages", kMessages},
                           {"temperature", 0},
                           {"max_tokens", 24},
                           {"return_token_ids", true},
                           {"chat_template_kwargs", {{"enable_thinking", thinking}}}};
    auto chat = ts.post("/v1/chat/completions", chat_req);
    REQUIRE(chat);
    INFO(chat->body);
    REQUIRE(chat->status == 200);
    const json cb = json::parse(chat->body);
    CHECK(cb["object"] == "chat.completion");
    CHECK(cb["id"].get<std::string>().rfind("chatcmpl-", 0) == 0);
    const json& choice = cb["choices"][0];
    CHECK(choice["message"]["role"] == "assistant");
    CHECK(choice["prompt_token_ids"].get<std::vector<int32_t>>() == prompt);
    CHECK(cb["usage"]["prompt_tokens"] == prompt.size());
    const std::string finish = choice["finish_reason"];
    CHECK((finish == "stop" || finish == "length"));
    CHECK(cb["usage"]["completion_tokens"] == choice["token_ids"].size());

    const json completion_req = {
        {"prompt", prompt}, {"temperature", 0}, {"max_tokens", 24}, {"return_token_ids", true}};
    auto comp = ts.post("/v1/completions", completion_req);
    REQUIRE(comp);
    REQUIRE(comp->status == 200);
    const json cc = json::parse(comp->body)["choices"][0];
    CHECK(choice["token_ids"] == cc["token_ids"]);
    CHECK(choice["message"]["content"] == cc["text"]);
    CHECK(choice["finish_reason"] == cc["finish_reason"]);
  }
}

TEST_CASE("server: streamed chat deltas concatenate to the whole answer", "[api]") {
  ChatModelDir dir;
  TestServer ts(dir.path());
  json req = {{"messages", kMessages}, {"temperature", 0}, {"max_tokens", 24}};
  auto whole = ts.post("/v1/chat/completions", req);
  REQUIRE(whole);
  REQUIRE(whole->status == 200);
  const std::string content = json::parse(whole->body)["choices"][0]["message"]["content"];
  CHECK_FALSE(content.empty());

  req["stream"] = true;
  auto res = ts.post("/v1/chat/completions", req);
  REQUIRE(res);
  REQUIRE(res->status == 200);
  bool done = false;
  const std::vector<json> chunks = sse_payloads(res->body, done);
  CHECK(done);
  REQUIRE(chunks.size() >= 2);
  CHECK(chunks[0]["object"] == "chat.completion.chunk");
  CHECK(chunks[0]["choices"][0]["delta"]["role"] == "assistant");
  std::string text;
  int finishes = 0;
  for (const json& c : chunks) {
    CHECK(c["id"] == chunks[0]["id"]);
    const json& delta = c["choices"][0]["delta"];
    if (delta.contains("content")) text += delta["content"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) ++finishes;
  }
  CHECK(finishes == 1);
  CHECK(text == content);
}

TEST_CASE("server: chat logprobs list each token with its top alternatives", "[api]") {
  ChatModelDir dir;
  TestServer ts(dir.path());
  const json req = {{"messages", kMessages}, {"temperature", 0}, {"max_tokens", 6}, {"logprobs", true},
                    {"top_logprobs", 3}, {"ignore_eos", true}};
  auto res = ts.post("/v1/chat/completions", req);
  REQUIRE(res);
  REQUIRE(res->status == 200);
  const json content = json::parse(res->body)["choices"][0]["logprobs"]["content"];
  REQUIRE(content.size() == 6);
  for (const json& e : content) {
    CHECK(e["token"].is_string());
    CHECK(e["logprob"].get<double>() <= 0.0);
    CHECK(e["bytes"].is_array());
    REQUIRE(e["top_logprobs"].size() == 3);
    CHECK(e["top_logprobs"][0]["logprob"].get<double>() == Approx(e["logprob"].get<double>()));  // greedy
    CHECK(e["top_logprobs"][0]["logprob"].get<double>() >= e["top_logprobs"][1]["logprob"].get<double>());
  }
}
