// Conversions between photon.h's C types and photon's C++ options, with the
// checks that only the C side needs (NULL pointers with non-zero lengths,
// enum values, struct sizes), and the writers of caller-owned outputs.
// Messages name the C argument or field ("params->stop_strings[2]").
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "photon/engine.hpp"
#include "photon/photon.h"
#include "photon/result.hpp"
#include "photon/tokenizer.hpp"

namespace photon::capi {

// (data, len) as a view; data may be NULL only when len is 0.
Result<std::string_view> view(const char* data, size_t len, std::string_view what);
inline Result<std::string_view> view(photon_str s, std::string_view what) { return view(s.data, s.len, what); }

// Writes `text` plus a NUL into out[capacity]; *out_size = text.size() + 1
// whether it fits or not (BUFFER_TOO_SMALL when not).
Result<void> write_text(char* out, size_t capacity, size_t* out_size, std::string_view text);
// Writes `ids` into out[capacity]; *out_count = ids.size() (BUFFER_TOO_SMALL when it does not fit).
Result<void> write_ids(int32_t* out, size_t capacity, size_t* out_count, std::span<const int32_t> ids);

// Defaults of each params struct: photon's C++ option defaults.
photon_tokenize_params default_tokenize_params();
photon_detokenize_params default_detokenize_params();
photon_chat_message default_chat_message();
photon_chat_params default_chat_params();
photon_engine_params default_engine_params();
photon_request_params default_request_params();

Result<EncodeOptions> to_encode_options(const photon_tokenize_params* params);
Result<DecodeOptions> to_decode_options(const photon_detokenize_params* params);
Result<ChatOptions> to_chat_options(const photon_chat_params* params);
// num_messages elements with a stride of messages[0].struct_size.
Result<std::vector<ChatMessage>> to_chat_messages(const photon_chat_message* messages, size_t num_messages);

Result<EngineOptions> to_engine_options(const char* model_dir, const photon_engine_params* params);

// Every field but the prompt.
Result<Request> to_request(const photon_request_params* params);

photon_chat_template to_c(ChatTemplateKind kind);
photon_finish_reason to_c(FinishReason reason);
photon_backend backend_from_name(std::string_view name);

}  // namespace photon::capi
