#include "model/chat_template.hpp"

#include <fmt/core.h>

#include <ctime>

namespace photon {

ChatTemplateKind detect_chat_template(std::string_view t) noexcept {
  auto has = [&](std::string_view s) { return t.find(s) != std::string_view::npos; };
  if (t.empty()) return ChatTemplateKind::none;
  if (has("<|start_header_id|>") && has("<|end_header_id|>") && has("<|eot_id|>"))
    return has("Cutting Knowledge Date") ? ChatTemplateKind::llama3_1 : ChatTemplateKind::llama3;
  if (has("<|im_start|>") && has("<|im_end|>") && has("enable_thinking") && has("</think>"))
    return ChatTemplateKind::qwen3;
  return ChatTemplateKind::unknown;
}

std::string_view chat_template_kind_name(ChatTemplateKind kind) noexcept {
  switch (kind) {
    case ChatTemplateKind::none: return "none";
    case ChatTemplateKind::llama3: return "llama3";
    case ChatTemplateKind::llama3_1: return "llama3.1";
    case ChatTemplateKind::qwen3: return "qwen3";
    case ChatTemplateKind::unknown: return "unknown";
  }
  return "unknown";
}

Result<std::string> render_chat_template(ChatTemplateKind kind, const ChatTemplateContext& ctx,
                                         std::span<const ChatMessage> messages, const ChatOptions& options) {
  if (kind == ChatTemplateKind::none)
    return fail(Errc::template_error,
                "the tokenizer folder has no chat template (tokenizer_config.json \"chat_template\" or "
                "chat_template.jinja); pass an already-rendered prompt instead");
  if (kind == ChatTemplateKind::unknown) {
    std::string_view head = ctx.template_text.substr(0, 80);
    if (auto nl = head.find('\n'); nl != std::string_view::npos) head = head.substr(0, nl);
    return fail(Errc::template_error,
                fmt::format("chat template not recognized (begins \"{}\", {} bytes): photon renders the Llama 3.x "
                            "and Qwen3 templates; pass an already-rendered prompt instead",
                            head, ctx.template_text.size()));
  }
  // The templates index messages[0]; Jinja fails on an empty list.
  if (messages.empty()) return fail(Errc::template_error, "render_chat: the conversation has no messages");
  switch (kind) {
    case ChatTemplateKind::llama3: return render_llama3(ctx, messages, options, false);
    case ChatTemplateKind::llama3_1: return render_llama3(ctx, messages, options, true);
    case ChatTemplateKind::qwen3: return render_qwen3(messages, options);
    default: break;
  }
  return fail(Errc::internal, "render_chat: unhandled template kind");
}

std::string json_dumps_string(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('"');
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) out += fmt::format("\\u{:04x}", c);
        else out.push_back(ch);
    }
  }
  out.push_back('"');
  return out;
}

std::string today_date_string() {
  static constexpr const char* kMonths[12] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                              "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  return fmt::format("{:02d} {} {}", tm.tm_mday, kMonths[tm.tm_mon], tm.tm_year + 1900);
}

}  // namespace photon
