// Chat renderers against Jinja2 renderings of the real templates
// (golden/chat_jinja_cases.json, made by tests/data/tokenizers/make_chat_jinja_cases.py)
// and the template family detection.
#include "model/chat_template.hpp"
#include "tokenizer_test_util.hpp"

using namespace photon;
using photon::test::read_json;
using photon::test::tokenizer;

namespace {

std::vector<ChatMessage> messages_of(const nlohmann::json& j) {
  std::vector<ChatMessage> out;
  for (const auto& m : j) {
    ChatMessage msg{m["role"].get<std::string>(), m["content"].get<std::string>(), std::nullopt};
    if (m.contains("reasoning_content")) msg.reasoning_content = m["reasoning_content"].get<std::string>();
    out.push_back(std::move(msg));
  }
  return out;
}

ChatOptions options_of(const nlohmann::json& c) {
  ChatOptions o;
  o.add_generation_prompt = c["add_generation_prompt"].get<bool>();
  const auto kw = c.value("kwargs", nlohmann::json::object());
  if (kw.contains("enable_thinking")) o.enable_thinking = kw["enable_thinking"].get<bool>();
  if (kw.contains("date_string")) o.date_string = kw["date_string"].get<std::string>();
  return o;
}

}  // namespace

TEST_CASE("chat renderers match Jinja2 renderings of the real Llama 3.2 and Qwen3 templates", "[model]") {
  for (const char* name : {"llama3", "qwen3"}) {
    const Tokenizer& tok = tokenizer(name);
    const auto ref = read_json(photon::test::tokenizer_dir(name) + "/golden/chat_jinja_cases.json");
    REQUIRE(ref["cases"].size() >= 5);
    for (const auto& c : ref["cases"]) {
      INFO(name << " case " << c["name"].get<std::string>());
      auto r = tok.render_chat(messages_of(c["messages"]), options_of(c));
      REQUIRE(r.has_value());
      CHECK(*r == c["rendered"].get<std::string>());
    }
  }
}

TEST_CASE("the Llama 3.0 renderer matches Jinja2 renderings of Meta-Llama-3-8B-Instruct's template", "[model]") {
  const auto ref = read_json(photon::test::tokenizer_dir("llama3") + "/golden/chat_jinja_cases.json");
  const std::string tmpl = ref["llama30_template"].get<std::string>();
  REQUIRE(detect_chat_template(tmpl) == ChatTemplateKind::llama3);
  const ChatTemplateContext ctx{tmpl, "<|begin_of_text|>"};
  REQUIRE(ref["llama30_cases"].size() >= 5);
  for (const auto& c : ref["llama30_cases"]) {
    INFO("case " << c["name"].get<std::string>());
    auto r = render_chat_template(ChatTemplateKind::llama3, ctx, messages_of(c["messages"]), options_of(c));
    REQUIRE(r.has_value());
    CHECK(*r == c["rendered"].get<std::string>());
  }
}

TEST_CASE("template detection, empty conversations and the date default", "[model]") {
  CHECK(detect_chat_template("") == ChatTemplateKind::none);
  CHECK(detect_chat_template("{{ messages }}") == ChatTemplateKind::unknown);
  // ChatML without Qwen3's thinking switch (e.g. Qwen2.5) is not rendered as Qwen3.
  CHECK(detect_chat_template("<|im_start|>{{ m.content }}<|im_end|>") == ChatTemplateKind::unknown);
  const Tokenizer& llama = tokenizer("llama3");
  CHECK(llama.render_chat(std::vector<ChatMessage>{}).error().code == Errc::template_error);
  // Llama 3.2's template calls strftime_now: without date_string the date is today's.
  auto r = llama.render_chat(std::vector<ChatMessage>{{"user", "hi", std::nullopt}});
  REQUIRE(r.has_value());
  CHECK_THAT(*r, Catch::Contains("Today Date: " + today_date_string() + "\n"));
  const std::string date = today_date_string();
  CHECK(date.size() == 11);  // "DD Mon YYYY"
  CHECK(json_dumps_string("a\"b\\c\n\x01é") == "\"a\\\"b\\\\c\\n\\u0001é\"");
}
