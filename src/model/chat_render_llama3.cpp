// Llama 3 family templates.
// Llama 3.0 (Meta-Llama-3-*-Instruct): per message
//   [bos_token on the first] "<|start_header_id|>" role "<|end_header_id|>\n\n" content|trim "<|eot_id|>".
// Llama 3.1 / 3.2: bos_token, then a system header that always exists:
//   "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
//   "Today Date: " date "\n\n" system_message|trim "<|eot_id|>",
// the other messages as in 3.0, tool/ipython messages as an "ipython" header
// with the content as a JSON string (the template's `content is iterable`
// holds for strings), and the assistant header as generation prompt.
// Tools (custom_tools / tools / tool_calls) are outside ChatMessage.
#include "model/chat_template.hpp"
#include "model/unicode_text.hpp"

namespace photon {

std::string render_llama3(const ChatTemplateContext& ctx, std::span<const ChatMessage> messages,
                          const ChatOptions& options, bool system_preamble) {
  std::string out;
  auto header = [&](std::string_view role) {
    out += "<|start_header_id|>";
    out += role;
    out += "<|end_header_id|>\n\n";
  };
  if (!system_preamble) {
    for (size_t i = 0; i < messages.size(); ++i) {
      if (i == 0) out += ctx.bos_token;
      header(messages[i].role);
      out += unicode::python_strip(messages[i].content);
      out += "<|eot_id|>";
    }
  } else {
    out += ctx.bos_token;
    std::string_view system_message;
    if (messages[0].role == "system") {
      system_message = unicode::python_strip(messages[0].content);
      messages = messages.subspan(1);
    }
    std::string date = options.date_string;
    if (date.empty())
      date = ctx.template_text.find("strftime_now") != std::string_view::npos ? today_date_string() : "26 Jul 2024";
    header("system");
    out += "Cutting Knowledge Date: December 2023\n";
    out += "Today Date: " + date + "\n\n";
    out += system_message;
    out += "<|eot_id|>";
    for (const auto& m : messages) {
      if (m.role == "ipython" || m.role == "tool") {
        header("ipython");
        out += json_dumps_string(m.content);
      } else {
        header(m.role);
        out += unicode::python_strip(m.content);
      }
      out += "<|eot_id|>";
    }
  }
  if (options.add_generation_prompt) header("assistant");
  return out;
}

}  // namespace photon
