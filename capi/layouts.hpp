// Field lists (Layout<T>, capi/struct_size.hpp) of every photon.h struct
// whose size crosses the boundary. A new field is appended to the struct
// and to its list; layout_is_complete<T>() fails the build if one is missed.
#pragma once

#include "photon/photon.h"
#include "struct_size.hpp"

namespace photon::capi {

#define PHOTON_CAPI_LAYOUT(T, ...)                                   \
  template <>                                                        \
  struct Layout<T> {                                                 \
    static constexpr std::string_view name = #T;                     \
    static constexpr FieldSpan fields[] = {__VA_ARGS__};             \
  };                                                                 \
  static_assert(layout_is_complete<T>(), "Layout<" #T "> misses a field")

#define F(T, f) PHOTON_CAPI_FIELD(T, f)

PHOTON_CAPI_LAYOUT(photon_tokenize_params, F(photon_tokenize_params, struct_size),
                   F(photon_tokenize_params, add_special_tokens), F(photon_tokenize_params, parse_special));
PHOTON_CAPI_LAYOUT(photon_detokenize_params, F(photon_detokenize_params, struct_size),
                   F(photon_detokenize_params, skip_special_tokens));
PHOTON_CAPI_LAYOUT(photon_chat_message, F(photon_chat_message, struct_size), F(photon_chat_message, role),
                   F(photon_chat_message, content), F(photon_chat_message, reasoning_content));
PHOTON_CAPI_LAYOUT(photon_chat_params, F(photon_chat_params, struct_size),
                   F(photon_chat_params, add_generation_prompt), F(photon_chat_params, enable_thinking),
                   F(photon_chat_params, date_string));
PHOTON_CAPI_LAYOUT(photon_tokenizer_info, F(photon_tokenizer_info, struct_size), F(photon_tokenizer_info, vocab_size),
                   F(photon_tokenizer_info, bos_token_id), F(photon_tokenizer_info, eos_token_id),
                   F(photon_tokenizer_info, pad_token_id), F(photon_tokenizer_info, is_sentencepiece),
                   F(photon_tokenizer_info, chat_template));
PHOTON_CAPI_LAYOUT(photon_engine_params, F(photon_engine_params, struct_size), F(photon_engine_params, backend),
                   F(photon_engine_params, device), F(photon_engine_params, threads),
                   F(photon_engine_params, kv_blocks), F(photon_engine_params, block_size),
                   F(photon_engine_params, kv_bytes), F(photon_engine_params, kv_memory_fraction),
                   F(photon_engine_params, max_batch_tokens), F(photon_engine_params, max_seqs),
                   F(photon_engine_params, prefix_caching), F(photon_engine_params, load_tokenizer),
                   F(photon_engine_params, weights), F(photon_engine_params, int8_group_size),
                   F(photon_engine_params, step_overlap), F(photon_engine_params, lm_head_screen));
PHOTON_CAPI_LAYOUT(photon_engine_info, F(photon_engine_info, struct_size), F(photon_engine_info, backend),
                   F(photon_engine_info, vocab_size), F(photon_engine_info, max_model_len),
                   F(photon_engine_info, block_size), F(photon_engine_info, kv_capacity_tokens),
                   F(photon_engine_info, has_tokenizer));
PHOTON_CAPI_LAYOUT(photon_request_params, F(photon_request_params, struct_size),
                   F(photon_request_params, temperature), F(photon_request_params, top_k),
                   F(photon_request_params, top_p), F(photon_request_params, min_p),
                   F(photon_request_params, repetition_penalty), F(photon_request_params, presence_penalty),
                   F(photon_request_params, frequency_penalty), F(photon_request_params, use_seed),
                   F(photon_request_params, seed), F(photon_request_params, max_tokens),
                   F(photon_request_params, ignore_eos), F(photon_request_params, stop_token_ids),
                   F(photon_request_params, num_stop_token_ids), F(photon_request_params, stop_strings),
                   F(photon_request_params, num_stop_strings), F(photon_request_params, num_top_logprobs),
                   F(photon_request_params, detokenize), F(photon_request_params, skip_special_tokens));
PHOTON_CAPI_LAYOUT(photon_event, F(photon_event, request_id), F(photon_event, token_id), F(photon_event, logprob),
                   F(photon_event, finish_reason),
                   F(photon_event, text_offset), F(photon_event, text_len), F(photon_event, top_logprobs_offset),
                   F(photon_event, num_top_logprobs), F(photon_event, error_offset), F(photon_event, error_len),
                   F(photon_event, stop_string_index));
PHOTON_CAPI_LAYOUT(photon_step_stats, F(photon_step_stats, struct_size), F(photon_step_stats, seqs),
                   F(photon_step_stats, tokens), F(photon_step_stats, sampled), F(photon_step_stats, preempted),
                   F(photon_step_stats, finished));
PHOTON_CAPI_LAYOUT(photon_engine_metrics, F(photon_engine_metrics, struct_size), F(photon_engine_metrics, running),
                   F(photon_engine_metrics, waiting), F(photon_engine_metrics, kv_blocks_total),
                   F(photon_engine_metrics, kv_blocks_used), F(photon_engine_metrics, kv_blocks_cached),
                   F(photon_engine_metrics, block_size), F(photon_engine_metrics, kv_usage),
                   F(photon_engine_metrics, prefix_hit_rate), F(photon_engine_metrics, steps),
                   F(photon_engine_metrics, tokens_scheduled), F(photon_engine_metrics, tokens_generated),
                   F(photon_engine_metrics, preemptions), F(photon_engine_metrics, tokens_per_step));

#undef F
#undef PHOTON_CAPI_LAYOUT

}  // namespace photon::capi
