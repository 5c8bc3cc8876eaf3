#include "generation_request.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <utility>

#include "json_fields.hpp"

namespace photon::server {

using nlohmann::json;

namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int32_t kMaxTopLogprobs = 20;  // the engine's limit (Request::logprobs)
constexpr double kUnbounded = std::numeric_limits<double>::infinity();  // no upper bound

std::string at(const std::string& name, size_t i) { return name + "[" + std::to_string(i) + "]"; }

// Sampling and stop fields shared by both endpoints.
void read_sampling(JsonFields& f, GenerationRequest& out) {
  SamplingOptions& s = out.engine.sampling;
  f.read("temperature", s.temperature, 0.0, kUnbounded);
  f.read("top_p", s.top_p, 0.0, 1.0, /*lo_open=*/true);
  int32_t top_k = 0;
  f.read("top_k", top_k, -1, kInt32Max);  // -1 (vLLM) or 0: off
  s.top_k = top_k < 0 ? 0 : top_k;
  f.read("min_p", s.min_p, 0.0, 1.0);
  f.read("presence_penalty", s.presence_penalty, -2.0, 2.0);
  f.read("frequency_penalty", s.frequency_penalty, -2.0, 2.0);
  f.read("repetition_penalty", s.repetition_penalty, 0.0, kUnbounded, /*lo_open=*/true);
  f.read("seed", s.seed);
  f.read_strings("stop", out.engine.stop);
  f.read_ids("stop_token_ids", out.engine.stop_token_ids);
  f.read("ignore_eos", out.engine.ignore_eos);
  f.read("skip_special_tokens", out.engine.skip_special_tokens);
  f.read("return_token_ids", out.return_token_ids);
  f.read("model", out.model);
}

// Options this server does not implement: refused rather than ignored, so a
// client never gets an answer that silently differs from what it asked for.
void refuse_unsupported(JsonFields& f) {
  int32_t n = 1;
  f.read("n", n, 1, kInt32Max);
  if (f.ok() && n != 1) f.fail("n", "must be 1: this server returns one choice per request (send several requests)");
  if (const json* bias = f.ok() ? f.get("logit_bias") : nullptr) {
    if (!bias->is_object()) f.fail("logit_bias", std::string("must be an object, got ") + bias->type_name());
    else if (!bias->empty()) f.fail("logit_bias", "is not supported by this server");
  }
}

void read_stream_options(JsonFields& f, GenerationRequest& out) {
  f.read("stream", out.stream);
  if (const json* so = f.ok() ? f.get("stream_options") : nullptr) {
    if (!so->is_object()) return f.fail("stream_options", std::string("must be an object, got ") + so->type_name());
    JsonFields sf(*so, "stream_options");
    sf.read("include_usage", out.include_usage);
    f.adopt(sf);
  }
}

// "prompt": a string, an array of token ids, or a one-element array of either.
void read_prompt(JsonFields& f, GenerationRequest& out) {
  const json* p = f.ok() ? f.get("prompt") : nullptr;
  if (!f.ok()) return;
  if (p == nullptr) return f.fail("prompt", "is required");
  const json* prompt = p;
  std::string name = "prompt";
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) {
    prompt = &(*p)[0];  // a batch of one
    name = "prompt[0]";
  } else if (p->is_array() && !p->empty() && ((*p)[0].is_string() || (*p)[0].is_array())) {
    return f.fail("prompt", "holds " + std::to_string(p->size()) +
                                " prompts: this server takes one prompt per request (send several requests)");
  }
  if (prompt->is_string()) {
    out.prompt_text = prompt->get<std::string>();
    out.prompt_is_text = true;
    return;
  }
  if (!prompt->is_array())
    return f.fail(name, std::string("must be a string or an array of token ids, got ") + prompt->type_name());
  if (prompt->empty()) return f.fail(name, "is an empty array of token ids");
  f.read_ids(*prompt, name, out.engine.prompt_tokens);
}

void parse_completion(JsonFields& f, GenerationRequest& out) {
  out.engine.max_tokens = 16;  // OpenAI's default for completions
  f.read("max_tokens", out.engine.max_tokens, 1, kInt32Max);
  if (const json* lp = f.ok() ? f.get("logprobs") : nullptr) {
    f.read("logprobs", out.engine.logprobs, 0, kMaxTopLogprobs);
    out.logprobs = lp->is_number_integer();
  }
  bool echo = false;
  f.read("echo", echo);
  if (f.ok() && echo) f.fail("echo", "is not supported by this server");
  int32_t best_of = 1;
  f.read("best_of", best_of, 1, kInt32Max);
  if (f.ok() && best_of != 1) f.fail("best_of", "must be 1: this server samples one sequence per request");
  std::string suffix;
  f.read("suffix", suffix);
  if (f.ok() && !suffix.empty()) f.fail("suffix", "is not supported by this server");
  read_prompt(f, out);
}

// One message's "content": a string, null, or an array of {"type": "text"} parts.
// `mf` reads the message; names are relative to it.
void read_content(const json& content, JsonFields& mf, std::string& out) {
  if (content.is_null()) return;
  if (content.is_string()) {
    out = content.get<std::string>();
    return;
  }
  if (!content.is_array())
    return mf.fail("content", std::string("must be a string or an array of content parts, got ") + content.type_name());
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    if (!part.is_object()) return mf.fail(at("content", i), std::string("must be an object, got ") + part.type_name());
    JsonFields pf(part, mf.path(at("content", i)));
    std::string type, text;
    pf.read("type", type);
    pf.read("text", text);
    if (pf.ok() && type != "text")
      pf.fail("type", "'" + type + "' is not supported: this server takes text content parts only");
    if (pf.ok() && !pf.has("text")) pf.fail("text", "is required");
    mf.adopt(pf);
    if (!mf.ok()) return;
    if (!out.empty()) out += "\n";  // parts joined by newlines, as vLLM does
    out += text;
  }
}

void read_messages(JsonFields& f, GenerationRequest& out) {
  const json* m = f.ok() ? f.get("messages") : nullptr;
  if (!f.ok()) return;
  if (m == nullptr) return f.fail("messages", "is required");
  if (!m->is_array()) return f.fail("messages", std::string("must be an array of messages, got ") + m->type_name());
  if (m->empty()) return f.fail("messages", "must hold at least one message");
  for (size_t i = 0; i < m->size() && f.ok(); ++i) {
    const json& msg = (*m)[i];
    const std::string name = at("messages", i);
    if (!msg.is_object()) return f.fail(name, std::string("must be an object, got ") + msg.type_name());
    JsonFields mf(msg, name);
    ChatMessage cm;
    mf.read("role", cm.role);
    if (mf.ok() && cm.role.empty()) mf.fail("role", "is required");
    if (mf.ok() && msg.contains("content")) read_content(msg["content"], mf, cm.content);
    if (mf.ok() && mf.has("reasoning_content")) {
      std::string reasoning;
      mf.read("reasoning_content", reasoning);
      cm.reasoning_content = std::move(reasoning);
    }
    if (const json* calls = mf.ok() ? mf.get("tool_calls") : nullptr; calls != nullptr && !calls->empty())
      mf.fail("tool_calls", "are not supported by this server");
    f.adopt(mf);
    if (!f.ok()) return;
    out.engine.messages.push_back(std::move(cm));
  }
}

void parse_chat(JsonFields& f, GenerationRequest& out) {
  out.engine.max_tokens = 0;  // the rest of the context, as OpenAI's chat default
  f.read("max_tokens", out.engine.max_tokens, 1, kInt32Max);
  f.read("max_completion_tokens", out.engine.max_tokens, 1, kInt32Max);
  f.read("logprobs", out.logprobs);
  f.read("top_logprobs", out.engine.logprobs, 0, kMaxTopLogprobs);
  if (f.ok() && out.engine.logprobs > 0 && !out.logprobs) f.fail("top_logprobs", "needs \"logprobs\": true");
  for (const char* name : {"tools", "functions"})
    if (const json* t = f.ok() ? f.get(name) : nullptr; t != nullptr && !(t->is_array() && t->empty()))
      f.fail(name, "are not supported by this server");
  if (const json* rf = f.ok() ? f.get("response_format") : nullptr) {
    JsonFields rff(*rf, "response_format");
    std::string type = "text";
    if (!rf->is_object()) f.fail("response_format", std::string("must be an object, got ") + rf->type_name());
    rff.read("type", type);
    f.adopt(rff);
    if (f.ok() && type != "text") f.fail("response_format", "type '" + type + "' is not supported: only \"text\"");
  }
  f.read("add_generation_prompt", out.engine.chat.add_generation_prompt);
  if (const json* kw = f.ok() ? f.get("chat_template_kwargs") : nullptr) {
    if (!kw->is_object()) return f.fail("chat_template_kwargs", std::string("must be an object, got ") + kw->type_name());
    JsonFields kf(*kw, "chat_template_kwargs");
    kf.read("enable_thinking", out.engine.chat.enable_thinking);
    kf.read("date_string", out.engine.chat.date_string);
    f.adopt(kf);
  }
  read_messages(f, out);
}

}  // namespace

std::optional<ApiError> parse_generation_request(ApiKind kind, std::string_view body, GenerationRequest& out) {
  const json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return bad_request("", "the request body is not valid JSON");
  if (!doc.is_object()) return bad_request("", std::string("the request body must be a JSON object, got ") + doc.type_name());
  out = GenerationRequest{};
  out.kind = kind;
  JsonFields f(doc, "");
  read_sampling(f, out);
  refuse_unsupported(f);
  read_stream_options(f, out);
  if (kind == ApiKind::completion) parse_completion(f, out);
  else parse_chat(f, out);
  return f.error();
}

std::optional<ApiError> encode_prompt(GenerationRequest& out, const Tokenizer* tokenizer) {
  const char* field = out.kind == ApiKind::chat ? "messages" : "prompt";
  if (!out.engine.prompt_tokens.empty() && !out.prompt_is_text) return std::nullopt;
  if (tokenizer == nullptr)
    return bad_request(field, std::string("'") + field +
                                  "' needs a tokenizer, and the model folder has none (tokenizer.json or "
                                  "tokenizer.model): send the prompt as token ids to /v1/completions");
  if (out.kind == ApiKind::completion) {
    auto ids = tokenizer->encode(out.prompt_text);
    if (!ids) return from_photon_error(ids.error(), field);
    out.engine.prompt_tokens = std::move(*ids);
    out.prompt_text.clear();
    return std::nullopt;
  }
  if (tokenizer->chat_template_kind() == ChatTemplateKind::none)
    return bad_request(field,
                       "this model has no chat template (no \"chat_template\" in its tokenizer_config.json, no "
                       "chat_template.jinja), so it cannot serve /v1/chat/completions: send a prompt you render "
                       "yourself to /v1/completions");
  auto text = tokenizer->render_chat(out.engine.messages, out.engine.chat);
  if (!text) return from_photon_error(text.error(), field);
  EncodeOptions enc;
  enc.add_special_tokens = false;  // the template wrote them
  auto ids = tokenizer->encode(*text, enc);
  if (!ids) return from_photon_error(ids.error(), field);
  out.engine.prompt_tokens = std::move(*ids);
  out.engine.messages.clear();
  return std::nullopt;
}

}  // namespace photon::server
