#include "convert.hpp"

#include <cstring>
#include <string>

#include "core/try.hpp"
#include "layouts.hpp"

namespace photon::capi {

Result<std::string_view> view(const char* data, size_t len, std::string_view what) {
  if (data == nullptr && len != 0) {
    return fail(Errc::invalid_argument, std::string(what) + " is NULL but its length is " + std::to_string(len));
  }
  return data == nullptr ? std::string_view() : std::string_view(data, len);
}

Result<void> write_text(char* out, size_t capacity, size_t* out_size, std::string_view text) {
  if (out_size == nullptr) return fail(Errc::invalid_argument, "out_size is NULL");
  if (out == nullptr && capacity != 0) {
    return fail(Errc::invalid_argument, "the output buffer is NULL but its capacity is " + std::to_string(capacity));
  }
  *out_size = text.size() + 1;
  if (capacity < text.size() + 1) {
    return fail(Errc::buffer_too_small, "the text needs " + std::to_string(text.size() + 1) +
                                            " bytes with its NUL; the buffer holds " + std::to_string(capacity));
  }
  if (!text.empty()) std::memcpy(out, text.data(), text.size());
  out[text.size()] = '\0';
  return {};
}

Result<void> write_ids(int32_t* out, size_t capacity, size_t* out_count, std::span<const int32_t> ids) {
  if (out_count == nullptr) return fail(Errc::invalid_argument, "out_count is NULL");
  if (out == nullptr && capacity != 0) {
    return fail(Errc::invalid_argument, "the output array is NULL but its capacity is " + std::to_string(capacity));
  }
  *out_count = ids.size();
  if (capacity < ids.size()) {
    return fail(Errc::buffer_too_small,
                std::to_string(ids.size()) + " ids do not fit in an array of " + std::to_string(capacity));
  }
  if (!ids.empty()) std::memcpy(out, ids.data(), ids.size() * sizeof(int32_t));
  return {};
}

photon_tokenize_params default_tokenize_params() {
  const EncodeOptions d;
  photon_tokenize_params p{};
  p.struct_size = sizeof p;
  p.add_special_tokens = d.add_special_tokens;
  p.parse_special = d.parse_special;
  return p;
}

photon_detokenize_params default_detokenize_params() {
  const DecodeOptions d;
  photon_detokenize_params p{};
  p.struct_size = sizeof p;
  p.skip_special_tokens = d.skip_special_tokens;
  return p;
}

photon_chat_message default_chat_message() {
  photon_chat_message m{};
  m.struct_size = sizeof m;
  return m;
}

photon_chat_params default_chat_params() {
  const ChatOptions d;
  photon_chat_params p{};
  p.struct_size = sizeof p;
  p.add_generation_prompt = d.add_generation_prompt;
  p.enable_thinking = d.enable_thinking;
  return p;
}

photon_engine_params default_engine_params() {
  const EngineOptions d;
  photon_engine_params p{};
  p.struct_size = sizeof p;
  p.backend = backend_from_name(d.backend);
  p.device = d.device;
  p.threads = d.threads;
  p.kv_blocks = d.kv_blocks;
  p.block_size = d.block_size;
  p.kv_bytes = d.kv_bytes;
  p.kv_memory_fraction = d.kv_memory_fraction;
  p.max_batch_tokens = d.max_batch_tokens;
  p.max_seqs = d.max_seqs;
  p.prefix_caching = d.prefix_caching;
  p.load_tokenizer = d.load_tokenizer;
  p.weights = d.weights == "int8"           ? PHOTON_WEIGHTS_INT8
              : d.weights == "int8-lm-head" ? PHOTON_WEIGHTS_INT8_LM_HEAD
                                            : PHOTON_WEIGHTS_AUTO;
  p.int8_group_size = d.int8_group_size;
  p.step_overlap = d.step_overlap == "on"    ? PHOTON_STEP_OVERLAP_ON
                   : d.step_overlap == "off" ? PHOTON_STEP_OVERLAP_OFF
                                             : PHOTON_STEP_OVERLAP_AUTO;
  p.lm_head_screen = d.lm_head_screen;
  return p;
}

photon_request_params default_request_params() {
  const Request d;
  photon_request_params p{};
  p.struct_size = sizeof p;
  p.temperature = d.sampling.temperature;
  p.top_k = d.sampling.top_k;
  p.top_p = d.sampling.top_p;
  p.min_p = d.sampling.min_p;
  p.repetition_penalty = d.sampling.repetition_penalty;
  p.presence_penalty = d.sampling.presence_penalty;
  p.frequency_penalty = d.sampling.frequency_penalty;
  p.use_seed = d.sampling.seed.has_value();
  p.seed = d.sampling.seed.value_or(0);
  p.max_tokens = d.max_tokens;
  p.ignore_eos = d.ignore_eos;
  p.num_top_logprobs = d.logprobs;
  p.detokenize = d.detokenize;
  p.skip_special_tokens = d.skip_special_tokens;
  return p;
}

Result<EncodeOptions> to_encode_options(const photon_tokenize_params* params) {
  PHOTON_ASSIGN_OR_RETURN(photon_tokenize_params p, read_params(params, default_tokenize_params(), "tokenize_params"));
  EncodeOptions o;
  o.add_special_tokens = p.add_special_tokens;
  o.parse_special = p.parse_special;
  return o;
}

Result<DecodeOptions> to_decode_options(const photon_detokenize_params* params) {
  PHOTON_ASSIGN_OR_RETURN(photon_detokenize_params p, read_params(params, default_detokenize_params(), "params"));
  DecodeOptions o;
  o.skip_special_tokens = p.skip_special_tokens;
  return o;
}

Result<ChatOptions> to_chat_options(const photon_chat_params* params) {
  PHOTON_ASSIGN_OR_RETURN(photon_chat_params p, read_params(params, default_chat_params(), "chat_params"));
  ChatOptions o;
  o.add_generation_prompt = p.add_generation_prompt;
  o.enable_thinking = p.enable_thinking;
  PHOTON_ASSIGN_OR_RETURN(std::string_view date, view(p.date_string, "chat_params->date_string.data"));
  o.date_string.assign(date);
  return o;
}

Result<std::vector<ChatMessage>> to_chat_messages(const photon_chat_message* messages, size_t num_messages) {
  std::vector<ChatMessage> out;
  if (num_messages == 0) return out;
  if (messages == nullptr) {
    return fail(Errc::invalid_argument, "messages is NULL but num_messages is " + std::to_string(num_messages));
  }
  const size_t stride = messages[0].struct_size;
  PHOTON_TRY(check_caller_size<photon_chat_message>(nullptr, stride, "messages[0].struct_size"));
  out.reserve(num_messages);
  const auto* base = reinterpret_cast<const unsigned char*>(messages);
  for (size_t i = 0; i < num_messages; ++i) {
    const std::string at = "messages[" + std::to_string(i) + "]";
    const auto* m = reinterpret_cast<const photon_chat_message*>(base + i * stride);
    if (m->struct_size != stride) {
      return fail(Errc::invalid_argument, at + ".struct_size = " + std::to_string(m->struct_size) +
                                              " differs from messages[0].struct_size = " + std::to_string(stride));
    }
    PHOTON_ASSIGN_OR_RETURN(photon_chat_message c, read_params(m, default_chat_message(), at));
    ChatMessage msg;
    PHOTON_ASSIGN_OR_RETURN(std::string_view role, view(c.role, at + ".role.data"));
    PHOTON_ASSIGN_OR_RETURN(std::string_view content, view(c.content, at + ".content.data"));
    if (role.empty()) return fail(Errc::invalid_argument, at + ".role is empty");
    msg.role.assign(role);
    msg.content.assign(content);
    if (c.reasoning_content.data != nullptr) {
      msg.reasoning_content.emplace(c.reasoning_content.data, c.reasoning_content.len);
    } else if (c.reasoning_content.len != 0) {
      return fail(Errc::invalid_argument, at + ".reasoning_content.data is NULL but its length is " +
                                              std::to_string(c.reasoning_content.len));
    }
    out.push_back(std::move(msg));
  }
  return out;
}

Result<EngineOptions> to_engine_options(const char* model_dir, const photon_engine_params* params) {
  if (model_dir == nullptr) return fail(Errc::invalid_argument, "model_dir is NULL");
  PHOTON_ASSIGN_OR_RETURN(photon_engine_params p, read_params(params, default_engine_params(), "params"));
  EngineOptions o;
  o.model_dir = model_dir;
  switch (p.backend) {
    case PHOTON_BACKEND_AUTO: o.backend = "auto"; break;
    case PHOTON_BACKEND_CPU: o.backend = "cpu"; break;
    case PHOTON_BACKEND_CUDA: o.backend = "cuda"; break;
    default:
      return fail(Errc::invalid_argument,
                  "params->backend = " + std::to_string(int(p.backend)) + " is not a photon_backend value");
  }
  o.device = p.device;
  o.threads = p.threads;
  o.kv_blocks = p.kv_blocks;
  o.block_size = p.block_size;
  o.kv_bytes = p.kv_bytes;
  o.kv_memory_fraction = p.kv_memory_fraction;
  o.max_batch_tokens = p.max_batch_tokens;
  o.max_seqs = p.max_seqs;
  o.prefix_caching = p.prefix_caching;
  o.load_tokenizer = p.load_tokenizer;
  switch (p.weights) {
    case PHOTON_WEIGHTS_AUTO: o.weights = "auto"; break;
    case PHOTON_WEIGHTS_INT8: o.weights = "int8"; break;
    case PHOTON_WEIGHTS_INT8_LM_HEAD: o.weights = "int8-lm-head"; break;
    default:
      return fail(Errc::invalid_argument,
                  "params->weights = " + std::to_string(int(p.weights)) + " is not a photon_weights value");
  }
  o.int8_group_size = p.int8_group_size;
  switch (p.step_overlap) {
    case PHOTON_STEP_OVERLAP_AUTO: o.step_overlap = "auto"; break;
    case PHOTON_STEP_OVERLAP_ON: o.step_overlap = "on"; break;
    case PHOTON_STEP_OVERLAP_OFF: o.step_overlap = "off"; break;
    default:
      return fail(Errc::invalid_argument, "params->step_overlap = " + std::to_string(int(p.step_overlap)) +
                                              " is not a photon_step_overlap value");
  }
  o.lm_head_screen = p.lm_head_screen;
  return o;
}

Result<Request> to_request(const photon_request_params* params) {
  PHOTON_ASSIGN_OR_RETURN(photon_request_params p, read_params(params, default_request_params(), "params"));
  Request r;
  SamplingOptions& s = r.sampling;
  s.temperature = p.temperature;
  s.top_k = p.top_k;
  s.top_p = p.top_p;
  s.min_p = p.min_p;
  s.repetition_penalty = p.repetition_penalty;
  s.presence_penalty = p.presence_penalty;
  s.frequency_penalty = p.frequency_penalty;
  if (p.use_seed) s.seed = p.seed;
  r.max_tokens = p.max_tokens;
  r.ignore_eos = p.ignore_eos;
  r.logprobs = p.num_top_logprobs;
  if (p.num_stop_token_ids != 0) {
    if (p.stop_token_ids == nullptr) {
      return fail(Errc::invalid_argument, "params->stop_token_ids is NULL but num_stop_token_ids is " +
                                              std::to_string(p.num_stop_token_ids));
    }
    r.stop_token_ids.assign(p.stop_token_ids, p.stop_token_ids + p.num_stop_token_ids);
  }
  if (p.num_stop_strings != 0) {
    if (p.stop_strings == nullptr) {
      return fail(Errc::invalid_argument,
                  "params->stop_strings is NULL but num_stop_strings is " + std::to_string(p.num_stop_strings));
    }
    for (size_t i = 0; i < p.num_stop_strings; ++i) {
      const std::string at = "params->stop_strings[" + std::to_string(i) + "]";
      PHOTON_ASSIGN_OR_RETURN(std::string_view s_i, view(p.stop_strings[i], at + ".data"));
      if (s_i.empty()) return fail(Errc::invalid_argument, at + " is empty");
      r.stop.emplace_back(s_i);
    }
  }
  r.detokenize = p.detokenize;
  r.skip_special_tokens = p.skip_special_tokens;
  return r;
}

photon_chat_template to_c(ChatTemplateKind kind) {
  switch (kind) {
    case ChatTemplateKind::none: return PHOTON_CHAT_TEMPLATE_NONE;
    case ChatTemplateKind::llama3: return PHOTON_CHAT_TEMPLATE_LLAMA3;
    case ChatTemplateKind::llama3_1: return PHOTON_CHAT_TEMPLATE_LLAMA3_1;
    case ChatTemplateKind::qwen3: return PHOTON_CHAT_TEMPLATE_QWEN3;
    case ChatTemplateKind::unknown: return PHOTON_CHAT_TEMPLATE_UNKNOWN;
  }
  return PHOTON_CHAT_TEMPLATE_UNKNOWN;
}

photon_finish_reason to_c(FinishReason reason) {
  switch (reason) {
    case FinishReason::none: return PHOTON_FINISH_NONE;
    case FinishReason::stop: return PHOTON_FINISH_STOP;
    case FinishReason::length: return PHOTON_FINISH_LENGTH;
    case FinishReason::cancelled: return PHOTON_FINISH_CANCELLED;
    case FinishReason::error: return PHOTON_FINISH_ERROR;
  }
  return PHOTON_FINISH_ERROR;
}

photon_backend backend_from_name(std::string_view name) {
  if (name == "cpu") return PHOTON_BACKEND_CPU;
  if (name == "cuda") return PHOTON_BACKEND_CUDA;
  return PHOTON_BACKEND_AUTO;
}

}  // namespace photon::capi
