// photon_tokenizer_*: the C shims of photon::Tokenizer.
#include <string>
#include <vector>

#include "convert.hpp"
#include "core/try.hpp"
#include "error.hpp"
#include "handles.hpp"
#include "layouts.hpp"

using namespace photon;
using namespace photon::capi;

namespace {
Result<const Tokenizer*> get(const photon_tokenizer* t) {
  if (t == nullptr) return fail(Errc::invalid_argument, "tokenizer is NULL");
  if (t->tokenizer == nullptr) return fail(Errc::invalid_state, "the tokenizer handle is empty");
  return t->tokenizer;
}
}  // namespace

extern "C" {

PHOTON_API photon_status photon_tokenizer_open(photon_tokenizer** out_tokenizer, const char* dir) {
  if (out_tokenizer != nullptr) *out_tokenizer = nullptr;
  return guarded(__func__, [&]() -> Result<void> {
    PHOTON_CAPI_REQUIRE_NONNULL(out_tokenizer);
    PHOTON_CAPI_REQUIRE_NONNULL(dir);
    PHOTON_ASSIGN_OR_RETURN(Tokenizer t, Tokenizer::load(dir));
    auto handle = std::make_unique<photon_tokenizer>();
    handle->owned.emplace(std::move(t));
    handle->tokenizer = &*handle->owned;
    *out_tokenizer = handle.release();
    return {};
  });
}

PHOTON_API void photon_tokenizer_destroy(photon_tokenizer* tokenizer) {
  // An engine's tokenizer (not owned) belongs to its engine: left alone.
  if (tokenizer != nullptr && tokenizer->owned) delete tokenizer;
}

PHOTON_API photon_status photon_tokenizer_get_info(photon_tokenizer_info* out_info,
                                                   const photon_tokenizer* tokenizer) {
  return guarded(__func__, [&]() -> Result<void> {
    PHOTON_CAPI_REQUIRE_NONNULL(out_info);
    PHOTON_ASSIGN_OR_RETURN(const Tokenizer* t, get(tokenizer));
    photon_tokenizer_info info{};
    info.vocab_size = t->vocab_size();
    info.bos_token_id = t->bos_token_id();
    info.eos_token_id = t->eos_token_id();
    info.pad_token_id = t->pad_token_id();
    info.is_sentencepiece = t->kind() == "sentencepiece";
    info.chat_template = to_c(t->chat_template_kind());
    return write_out(out_info, info, "out_info");
  });
}

PHOTON_API photon_status photon_tokenizer_eos_token_ids(int32_t* out_ids, size_t capacity, size_t* out_count,
                                                        const photon_tokenizer* tokenizer) {
  return guarded(__func__, [&]() -> Result<void> {
    PHOTON_ASSIGN_OR_RETURN(const Tokenizer* t, get(tokenizer));
    return write_ids(out_ids, capacity, out_count, t->eos_token_ids());
  });
}

PHOTON_API photon_status photon_tokenizer_encode(int32_t* out_ids, size_t capacity, size_t* out_count,
                                                 const photon_tokenizer* tokenizer, const char* text,
                                                 size_t text_len, const photon_tokenize_params* params) {
  return guarded(__func__, [&]() -> Result<void> {
    PHOTON_ASSIGN_OR_RETURN(const Tokenizer* t, get(tokenizer));
    PHOTON_ASSIGN_OR_RETURN(std::string_view s, view(text, text_len, "text"));
    PHOTON_ASSIGN_OR_RETURN(EncodeOptions options, to_encode_options(params));
    PHOTON_ASSIGN_OR_RETURN(std::vector<int32_t> ids, t->encode(s, options));
    return write_ids(out_ids, capacity, out_count, ids);
  });
}

PHOTON_API photon_status photon_tokenizer_decode(char* out_text, size_t capacity, size_t* out_size,
                                                 const photon_tokenizer* tokenizer, const int32_t* ids,
                                                 size_t num_ids, const photon_detokenize_params* params) {
  return guarded(__func__, [&]() -> Result<void> {
    PHOTON_ASSIGN_OR_RETURN(const Tokenizer* t, get(tokenizer));
    if (ids == nullptr && num_ids != 0) {
      return fail(Errc::invalid_argument, "ids is NULL but num_ids is " + std::to_string(num_ids));
    }
    PHOTON_ASSIGN_OR_RETURN(DecodeOptions options, to_decode_options(params));
    PHOTON_ASSIGN_OR_RETURN(std::string text, t->decode(std::span<const int32_t>(ids, num_ids), options));
    return write_text(out_text, capacity, out_size, text);
  });
}

PHOTON_API photon_status photon_tokenizer_token_to_piece(char* out_piece, size_t capacity, size_t* out_size,
                                                         const photon_tokenizer* tokenizer, int32_t token_id) {
  return guarded(__func__, [&]() -> Result<void> {
    PHOTON_ASSIGN_OR_RETURN(const Tokenizer* t, get(tokenizer));
    PHOTON_ASSIGN_OR_RETURN(std::string piece, t->token_to_piece(token_id));
    return write_text(out_piece, capacity, out_size, piece);
  });
}

PHOTON_API photon_status photon_tokenizer_render_chat(char* out_text, size_t capacity, size_t* out_size,
                                                      const photon_tokenizer* tokenizer,
                                                      const photon_chat_message* messages, size_t num_messages,
                                                      const photon_chat_params* params) {
  return guarded(__func__, [&]() -> Result<void> {
    PHOTON_ASSIGN_OR_RETURN(const Tokenizer* t, get(tokenizer));
    PHOTON_ASSIGN_OR_RETURN(std::vector<ChatMessage> msgs, to_chat_messages(messages, num_messages));
    PHOTON_ASSIGN_OR_RETURN(ChatOptions options, to_chat_options(params));
    PHOTON_ASSIGN_OR_RETURN(std::string text, t->render_chat(msgs, options));
    return write_text(out_text, capacity, out_size, text);
  });
}

}  // extern "C"
