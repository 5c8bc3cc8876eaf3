// Qwen3's ChatML template (Qwen/Qwen3-* tokenizer_config.json), without tools:
//  - a first "system" message becomes "<|im_start|>system\n" content "<|im_end|>\n";
//  - last_query_index: the last user message that is not a bare <tool_response> block;
//  - user (and later system) messages: "<|im_start|>" role "\n" content "<|im_end|>\n";
//  - assistant messages: reasoning from reasoning_content, else split out of a
//    "<think>...</think>" prefix of content; after the last query, the final
//    message (or one with reasoning) is written with its <think> block, earlier
//    turns without it;
//  - consecutive tool messages are wrapped in one user turn of <tool_response> blocks;
//  - generation prompt "<|im_start|>assistant\n", plus "<think>\n\n</think>\n\n"
//    when enable_thinking is false.
#include "model/chat_template.hpp"

namespace photon {
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}
std::string_view lstrip_nl(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return s;
}
std::string_view rstrip_nl(std::string_view s) {
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}

}  // namespace

std::string render_qwen3(std::span<const ChatMessage> messages, const ChatOptions& options) {
  std::string out;
  const size_t n = messages.size();
  if (messages[0].role == "system") out += "<|im_start|>system\n" + messages[0].content + "<|im_end|>\n";

  size_t last_query_index = n - 1;
  for (size_t k = n; k-- > 0;) {
    const auto& m = messages[k];
    if (m.role == "user" && !(starts_with(m.content, "<tool_response>") && ends_with(m.content, "</tool_response>"))) {
      last_query_index = k;
      break;
    }
  }

  for (size_t i = 0; i < n; ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user" || (m.role == "system" && i != 0)) {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      std::string_view content = m.content;
      std::string_view reasoning;
      if (m.reasoning_content) {
        reasoning = *m.reasoning_content;
      } else if (const size_t close = content.find("</think>"); close != std::string_view::npos) {
        // content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
        std::string_view before = rstrip_nl(content.substr(0, close));
        if (const size_t open = before.rfind("<think>"); open != std::string_view::npos)
          before = before.substr(open + 7);
        reasoning = lstrip_nl(before);
        // content.split('</think>')[-1].lstrip('\n')
        content = lstrip_nl(content.substr(content.rfind("</think>") + 8));
      }
      out += "<|im_start|>assistant\n";
      const bool after_query = i > last_query_index;
      if (after_query && (i + 1 == n || !reasoning.empty())) {
        out += "<think>\n";
        out += rstrip_nl(lstrip_nl(reasoning));
        out += "\n</think>\n\n";
        out += lstrip_nl(content);
      } else {
        out += content;
      }
      out += "<|im_end|>\n";
    } else if (m.role == "tool") {
      if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
      out += "\n<tool_response>\n" + m.content + "\n</tool_response>";
      if (i + 1 == n || messages[i + 1].role != "tool") out += "<|im_end|>\n";
    }
  }
  if (options.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (!options.enable_thinking) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

}  // namespace photon
