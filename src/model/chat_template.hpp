// Chat templates rendered by hand-written renderers, one per template family
// (see docs/tokenizer.md for why there is no Jinja engine). Each renderer
// reproduces the output of transformers' apply_chat_template for that
// family's official template, character for character.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "photon/result.hpp"
#include "photon/tokenizer.hpp"

namespace photon {

// Recognizes the family of a chat template text by its markers.
ChatTemplateKind detect_chat_template(std::string_view template_text) noexcept;

std::string_view chat_template_kind_name(ChatTemplateKind kind) noexcept;

struct ChatTemplateContext {
  std::string_view template_text;  // the template itself (for options it implies)
  std::string_view bos_token;      // tokenizer_config.json's bos_token text
};

Result<std::string> render_chat_template(ChatTemplateKind kind, const ChatTemplateContext& ctx,
                                         std::span<const ChatMessage> messages, const ChatOptions& options);

// Renderers (chat_render_*.cpp); messages are non-empty.
std::string render_llama3(const ChatTemplateContext& ctx, std::span<const ChatMessage> messages,
                          const ChatOptions& options, bool system_preamble);
std::string render_qwen3(std::span<const ChatMessage> messages, const ChatOptions& options);

// Python's json.dumps(s, ensure_ascii=False) of a string (transformers' tojson).
std::string json_dumps_string(std::string_view s);
// Today's local date as strftime("%d %b %Y") in the C locale: "26 Jul 2024".
std::string today_date_string();

}  // namespace photon
