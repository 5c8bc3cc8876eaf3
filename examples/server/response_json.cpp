#include "response_json.hpp"

#include <algorithm>
#include <utility>

namespace photon::server {

using nlohmann::json;

std::string dump_json(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

ResponseBuilder::ResponseBuilder(ResponseContext ctx) : ctx_(std::move(ctx)) {}

void ResponseBuilder::add(const Event& e) {
  if (e.token >= 0) {
    tokens_.push_back(e.token);
    token_logprobs_.push_back(e.logprob);
    top_.push_back(e.top_logprobs);
    text_offset_.push_back(text_.size());
  }
  text_ += e.text;
  if (e.finish != FinishReason::none) {
    finish_ = e.finish;
    error_ = e.error;
    if (e.stop_string >= 0 && size_t(e.stop_string) < ctx_.stop.size()) {
      stop_reason_ = ctx_.stop[size_t(e.stop_string)];
    } else if (e.finish == FinishReason::stop && e.token >= 0 &&
               std::find(ctx_.stop_token_ids.begin(), ctx_.stop_token_ids.end(), e.token) != ctx_.stop_token_ids.end()) {
      stop_reason_ = e.token;
    }
  }
}

std::string ResponseBuilder::token_text(int32_t id) const {
  if (ctx_.tokenizer != nullptr) {
    if (auto piece = ctx_.tokenizer->token_to_piece(id)) return std::move(*piece);
  }
  return "token_id:" + std::to_string(id);  // vLLM's spelling for a token without text
}

json ResponseBuilder::logprobs_json(size_t from, size_t to) const {
  if (ctx_.kind == ApiKind::completion) {
    // The legacy completions layout: parallel arrays.
    json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
    for (size_t i = from; i < to; ++i) {
      tokens.push_back(token_text(tokens_[i]));
      lps.push_back(token_logprobs_[i]);
      json top = json::object();
      for (const TokenLogprob& t : top_[i]) top[token_text(t.token)] = t.logprob;
      tops.push_back(std::move(top));
      offsets.push_back(text_offset_[i]);
    }
    return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
  }
  auto entry = [&](int32_t id, float lp) {
    const std::string text = token_text(id);
    json bytes = json::array();
    for (unsigned char c : text) bytes.push_back(int(c));
    return json{{"token", text}, {"logprob", lp}, {"bytes", std::move(bytes)}};
  };
  json content = json::array();
  for (size_t i = from; i < to; ++i) {
    json e = entry(tokens_[i], token_logprobs_[i]);
    json top = json::array();
    for (const TokenLogprob& t : top_[i]) top.push_back(entry(t.token, t.logprob));
    e["top_logprobs"] = std::move(top);
    content.push_back(std::move(e));
  }
  return {{"content", std::move(content)}};
}

json ResponseBuilder::usage() const {
  const int64_t prompt = int64_t(ctx_.prompt_tokens.size()), completion = int64_t(tokens_.size());
  return {{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
}

json ResponseBuilder::chunk_base() const {
  return {{"id", ctx_.id},
          {"object", ctx_.kind == ApiKind::chat ? "chat.completion.chunk" : "text_completion"},
          {"created", ctx_.created},
          {"model", ctx_.model}};
}

std::optional<json> ResponseBuilder::take_chunk() {
  const bool new_text = sent_text_ < text_.size();
  const bool new_logprobs = ctx_.logprobs && sent_tokens_ < tokens_.size();
  const bool new_ids = ctx_.return_token_ids && sent_tokens_ < tokens_.size();
  const bool new_finish = finished() && !sent_finish_;
  if (!new_text && !new_logprobs && !new_ids && !new_finish) return std::nullopt;

  const std::string delta = text_.substr(sent_text_);
  json choice = {{"index", 0}};
  if (ctx_.kind == ApiKind::chat) {
    choice["delta"] = delta.empty() ? json::object() : json{{"content", delta}};
  } else {
    choice["text"] = delta;
  }
  choice["logprobs"] = ctx_.logprobs ? logprobs_json(sent_tokens_, tokens_.size()) : json(nullptr);
  choice["finish_reason"] = new_finish ? json(finish_reason_name(finish_)) : json(nullptr);
  choice["stop_reason"] = new_finish ? stop_reason_ : json(nullptr);
  if (ctx_.return_token_ids)
    choice["token_ids"] = std::vector<int32_t>(tokens_.begin() + std::ptrdiff_t(sent_tokens_), tokens_.end());
  sent_text_ = text_.size();
  sent_tokens_ = tokens_.size();
  sent_finish_ = sent_finish_ || new_finish;

  json chunk = chunk_base();
  chunk["choices"] = json::array({std::move(choice)});
  return chunk;
}

json ResponseBuilder::role_chunk() const {
  json chunk = chunk_base();
  chunk["choices"] = json::array(
      {{{"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr}, {"finish_reason", nullptr}}});
  return chunk;
}

json ResponseBuilder::usage_chunk() const {
  json chunk = chunk_base();
  chunk["choices"] = json::array();
  chunk["usage"] = usage();
  return chunk;
}

json ResponseBuilder::body() const {
  json choice = {{"index", 0}};
  if (ctx_.kind == ApiKind::chat) choice["message"] = {{"role", "assistant"}, {"content", text_}};
  else choice["text"] = text_;
  choice["logprobs"] = ctx_.logprobs ? logprobs_json(0, tokens_.size()) : json(nullptr);
  choice["finish_reason"] = finished() ? json(finish_reason_name(finish_)) : json(nullptr);
  choice["stop_reason"] = stop_reason_;
  if (ctx_.return_token_ids) {
    choice["token_ids"] = tokens_;
    choice["prompt_token_ids"] = ctx_.prompt_tokens;
  }
  return {{"id", ctx_.id},
          {"object", ctx_.kind == ApiKind::chat ? "chat.completion" : "text_completion"},
          {"created", ctx_.created},
          {"model", ctx_.model},
          {"choices", json::array({std::move(choice)})},
          {"usage", usage()}};
}

}  // namespace photon::server
