// photon_engine_*: the C shims of photon::Engine.
#include <chrono>
#include <cstring>
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

Result<Engine*> get(photon_engine* e) {
  if (e == nullptr) return fail(Errc::invalid_argument, "engine is NULL");
  return &e->engine;
}
Result<const Engine*> get(const photon_engine* e) {
  if (e == nullptr) return fail(Errc::invalid_argument, "engine is NULL");
  return &e->engine;
}

// Shared by the three submit calls: `fill_prompt` sets the request's prompt.
template <class FillPrompt>
photon_status submit_with(const char* function, uint64_t* out_request_id, photon_engine* engine,
                          const photon_request_params* params, FillPrompt&& fill_prompt) {
  if (out_request_id != nullptr) *out_request_id = 0;
  return guarded(function, [&]() -> Result<void> {
    PHOTON_CAPI_REQUIRE_NONNULL(out_request_id);
    PHOTON_ASSIGN_OR_RETURN(Engine * e, get(engine));
    PHOTON_ASSIGN_OR_RETURN(Request request, to_request(params));
    PHOTON_TRY(fill_prompt(*e, request));
    PHOTON_ASSIGN_OR_RETURN(RequestId id, e->submit(std::move(request)));
    *out_request_id = id;
    return {};
  });
}

// The blocking form of submit_with: runs the request to its end (Engine::generate)
// and hands the caller a new photon_completion.
template <class FillPrompt>
photon_status generate_with(const char* function, photon_completion** out_completion, photon_engine* engine,
                            const photon_request_params* params, FillPrompt&& fill_prompt) {
  if (out_completion != nullptr) *out_completion = nullptr;
  return guarded(function, [&]() -> Result<void> {
    PHOTON_CAPI_REQUIRE_NONNULL(out_completion);
    PHOTON_ASSIGN_OR_RETURN(Engine * e, get(engine));
    PHOTON_ASSIGN_OR_RETURN(Request request, to_request(params));
    PHOTON_TRY(fill_prompt(*e, request));
    PHOTON_ASSIGN_OR_RETURN(Completion done, e->generate(request));
    *out_completion = new photon_completion{std::move(done)};
    return {};
  });
}

// The prompt forms shared by submit_* and generate_*.
Result<void> fill_tokens(Request& r, const int32_t* prompt_ids, size_t num_prompt_ids) {
  if (prompt_ids == nullptr && num_prompt_ids != 0) {
    return fail(Errc::invalid_argument, "prompt_ids is NULL but num_prompt_ids is " + std::to_string(num_prompt_ids));
  }
  if (num_prompt_ids == 0) return fail(Errc::invalid_argument, "num_prompt_ids is 0");
  r.prompt_tokens.assign(prompt_ids, prompt_ids + num_prompt_ids);
  return {};
}

Result<void> fill_text(Engine& e, Request& r, const char* prompt, size_t prompt_len,
                       const photon_tokenize_params* tokenize_params) {
  PHOTON_ASSIGN_OR_RETURN(std::string_view text, view(prompt, prompt_len, "prompt"));
  PHOTON_ASSIGN_OR_RETURN(EncodeOptions encode, to_encode_options(tokenize_params));
  // Encoded here rather than by the engine (Request::prompt) to honour tokenize_params.
  if (e.tokenizer() == nullptr) {
    return fail(Errc::invalid_state, "a text prompt needs a tokenizer, and the engine has none");
  }
  PHOTON_TRY(e.tokenizer()->encode_into(text, r.prompt_tokens, encode));
  if (r.prompt_tokens.empty()) return fail(Errc::invalid_argument, "the prompt encodes to no tokens");
  return {};
}

Result<void> fill_chat(Request& r, const photon_chat_message* messages, size_t num_messages,
                       const photon_chat_params* chat_params) {
  PHOTON_ASSIGN_OR_RETURN(r.messages, to_chat_messages(messages, num_messages));
  if (r.messages.empty()) return fail(Errc::invalid_argument, "num_messages is 0");
  PHOTON_ASSIGN_OR_RETURN(r.chat, to_chat_options(chat_params));
  return {};
}

// Writes one event into the caller's events array and buffers, at the
// offsets given (already checked to fit).
void write_event(unsigned char* slot, size_t event_size, const Event& e, char* text, size_t text_at,
                 photon_token_logprob* tops, size_t top_at) {
  photon_event ev{};
  ev.request_id = e.request;
  ev.token_id = e.token;
  ev.logprob = e.logprob;
  ev.finish_reason = to_c(e.finish);
  ev.text_offset = text_at;
  ev.text_len = e.text.size();
  ev.error_offset = text_at + e.text.size();
  ev.error_len = e.error.size();
  ev.top_logprobs_offset = top_at;
  ev.num_top_logprobs = e.top_logprobs.size();
  ev.stop_string_index = e.stop_string;
  if (text != nullptr) {
    if (!e.text.empty()) std::memcpy(text + ev.text_offset, e.text.data(), e.text.size());
    if (!e.error.empty()) std::memcpy(text + ev.error_offset, e.error.data(), e.error.size());
  }
  if (tops != nullptr) {
    for (size_t i = 0; i < e.top_logprobs.size(); ++i) {
      tops[top_at + i] = photon_token_logprob{e.top_logprobs[i].token, e.top_logprobs[i].logprob};
    }
  }
  write_sized(slot, event_size, ev);
}

}  // namespace

extern "C" {

PHOTON_API photon_status photon_engine_open(photon_engine** out_engine, const char* model_dir,
                                            const photon_engine_params* params) {
  if (out_engine != nullptr) *out_engine = nullptr;
  return guarded(__func__, [&]() -> Result<void> {
    PHOTON_CAPI_REQUIRE_NONNULL(out_engine);
    PHOTON_ASSIGN_OR_RETURN(EngineOptions options, to_engine_options(model_dir, params));
    PHOTON_ASSIGN_OR_RETURN(Engine e, Engine::open(options));
    *out_engine = new photon_engine(std::move(e));
    return {};
  });
}

PHOTON_API void photon_engine_destroy(photon_engine* engine) { delete engine; }

PHOTON_API photon_status photon_engine_get_info(photon_engine_info* out_info, const photon_engine* engine) {
  return guarded(__func__, [&]() -> Result<void> {
    PHOTON_CAPI_REQUIRE_NONNULL(out_info);
    PHOTON_ASSIGN_OR_RETURN(const Engine* e, get(engine));
    photon_engine_info info{};
    info.backend = backend_from_name(e->backend_name());
    info.vocab_size = e->vocab_size();
    info.max_model_len = e->max_model_len();
    info.block_size = e->metrics().block_size;
    info.kv_capacity_tokens = e->kv_capacity_tokens();
    info.has_tokenizer = e->tokenizer() != nullptr;
    return write_out(out_info, info, "out_info");
  });
}

PHOTON_API photon_status photon_engine_eos_token_ids(int32_t* out_ids, size_t capacity, size_t* out_count,
                                                     const photon_engine* engine) {
  return guarded(__func__, [&]() -> Result<void> {
    PHOTON_ASSIGN_OR_RETURN(const Engine* e, get(engine));
    return write_ids(out_ids, capacity, out_count, e->eos_token_ids());
  });
}

PHOTON_API photon_status photon_engine_get_tokenizer(const photon_tokenizer** out_tokenizer,
                                                     const photon_engine* engine) {
  if (out_tokenizer != nullptr) *out_tokenizer = nullptr;
  return guarded(__func__, [&]() -> Result<void> {
    PHOTON_CAPI_REQUIRE_NONNULL(out_tokenizer);
    PHOTON_ASSIGN_OR_RETURN(const Engine* e, get(engine));
    if (e->tokenizer() == nullptr) {
      return fail(Errc::invalid_state, "the engine has no tokenizer (its model folder has no tokenizer.json or "
                                       "tokenizer.model, or params->load_tokenizer was false)");
    }
    *out_tokenizer = &engine->tokenizer_view;
    return {};
  });
}

PHOTON_API photon_status photon_engine_submit_tokens(uint64_t* out_request_id, photon_engine* engine,
                                                     const int32_t* prompt_ids, size_t num_prompt_ids,
                                                     const photon_request_params* params) {
  return submit_with(__func__, out_request_id, engine, params, [&](Engine&, Request& r) {
    return fill_tokens(r, prompt_ids, num_prompt_ids);
  });
}

PHOTON_API photon_status photon_engine_submit_text(uint64_t* out_request_id, photon_engine* engine,
                                                   const char* prompt, size_t prompt_len,
                                                   const photon_tokenize_params* tokenize_params,
                                                   const photon_request_params* params) {
  return submit_with(__func__, out_request_id, engine, params, [&](Engine& e, Request& r) {
    return fill_text(e, r, prompt, prompt_len, tokenize_params);
  });
}

PHOTON_API photon_status photon_engine_submit_chat(uint64_t* out_request_id, photon_engine* engine,
                                                   const photon_chat_message* messages, size_t num_messages,
                                                   const photon_chat_params* chat_params,
                                                   const photon_request_params* params) {
  return submit_with(__func__, out_request_id, engine, params, [&](Engine&, Request& r) {
    return fill_chat(r, messages, num_messages, chat_params);
  });
}

PHOTON_API photon_status photon_engine_generate_tokens(photon_completion** out_completion, photon_engine* engine,
                                                       const int32_t* prompt_ids, size_t num_prompt_ids,
                                                       const photon_request_params* params) {
  return generate_with(__func__, out_completion, engine, params, [&](Engine&, Request& r) {
    return fill_tokens(r, prompt_ids, num_prompt_ids);
  });
}

PHOTON_API photon_status photon_engine_generate_text(photon_completion** out_completion, photon_engine* engine,
                                                     const char* prompt, size_t prompt_len,
                                                     const photon_tokenize_params* tokenize_params,
                                                     const photon_request_params* params) {
  return generate_with(__func__, out_completion, engine, params, [&](Engine& e, Request& r) {
    return fill_text(e, r, prompt, prompt_len, tokenize_params);
  });
}

PHOTON_API photon_status photon_engine_generate_chat(photon_completion** out_completion, photon_engine* engine,
                                                     const photon_chat_message* messages, size_t num_messages,
                                                     const photon_chat_params* chat_params,
                                                     const photon_request_params* params) {
  return generate_with(__func__, out_completion, engine, params, [&](Engine&, Request& r) {
    return fill_chat(r, messages, num_messages, chat_params);
  });
}

PHOTON_API photon_status photon_engine_cancel(photon_engine* engine, uint64_t request_id) {
  return guarded(__func__, [&]() -> Result<void> {
    PHOTON_ASSIGN_OR_RETURN(Engine * e, get(engine));
    return e->cancel(request_id);
  });
}

PHOTON_API photon_status photon_engine_step(photon_step_stats* out_stats, photon_engine* engine) {
  return guarded(__func__, [&]() -> Result<void> {
    PHOTON_ASSIGN_OR_RETURN(Engine * e, get(engine));
    if (out_stats != nullptr) {  // checked before stepping, so a bad size never loses a step's counts
      PHOTON_TRY(check_caller_size<photon_step_stats>(nullptr, out_stats->struct_size, "out_stats->struct_size"));
    }
    PHOTON_ASSIGN_OR_RETURN(StepStats st, e->step());
    if (out_stats == nullptr) return {};
    photon_step_stats c{};
    c.seqs = st.seqs;
    c.tokens = st.tokens;
    c.sampled = st.sampled;
    c.preempted = st.preempted;
    c.finished = st.finished;
    return write_out(out_stats, c, "out_stats");
  });
}

PHOTON_API photon_status photon_engine_has_work(bool* out_has_work, const photon_engine* engine) {
  return guarded(__func__, [&]() -> Result<void> {
    PHOTON_CAPI_REQUIRE_NONNULL(out_has_work);
    PHOTON_ASSIGN_OR_RETURN(const Engine* e, get(engine));
    *out_has_work = e->has_work();
    return {};
  });
}

}  // extern "C"

namespace {

// photon_engine_poll and photon_engine_poll_wait (timeout_ms < 0: no wait).
photon_status poll_into(const char* function, size_t* out_num_events, photon_engine* engine, photon_event* events,
                        size_t event_size, size_t max_events, char* text, size_t text_capacity,
                        photon_token_logprob* top_logprobs, size_t top_logprobs_capacity, int64_t timeout_ms) {
  if (out_num_events != nullptr) *out_num_events = 0;
  return guarded(function, [&]() -> Result<void> {
    PHOTON_CAPI_REQUIRE_NONNULL(out_num_events);
    PHOTON_CAPI_REQUIRE_NONNULL(engine);
    PHOTON_CAPI_REQUIRE_NONNULL(events);
    if (max_events == 0) return fail(Errc::invalid_argument, "max_events is 0");
    PHOTON_TRY(check_caller_size<photon_event>(nullptr, event_size, "event_size"));
    if (text == nullptr && text_capacity != 0) {
      return fail(Errc::invalid_argument, "text is NULL but text_capacity is " + std::to_string(text_capacity));
    }
    if (top_logprobs == nullptr && top_logprobs_capacity != 0) {
      return fail(Errc::invalid_argument,
                  "top_logprobs is NULL but top_logprobs_capacity is " + std::to_string(top_logprobs_capacity));
    }
    auto* slots = reinterpret_cast<unsigned char*>(events);
    size_t n = 0, text_used = 0, tops_used = 0;
    size_t need_text = 0, need_tops = 0;  // of the oldest event when it does not fit
    bool oldest_too_big = false;
    std::lock_guard lock(engine->poll_mutex);
    engine->scratch.clear();
    if (timeout_ms >= 0 && engine->pending.empty()) {
      engine->engine.poll(engine->scratch, std::chrono::milliseconds(timeout_ms));
    } else {
      engine->engine.poll(engine->scratch);
    }
    for (Event& e : engine->scratch) engine->pending.push_back(std::move(e));
    engine->scratch.clear();
    while (!engine->pending.empty() && n < max_events) {
      const Event& e = engine->pending.front();
      const size_t t = e.text.size() + e.error.size();
      const size_t k = e.top_logprobs.size();
      if (t > text_capacity - text_used || k > top_logprobs_capacity - tops_used) {
        if (n == 0) {  // report what it needs; it stays pending
          oldest_too_big = true;
          need_text = t;
          need_tops = k;
          write_event(slots, event_size, e, nullptr, 0, nullptr, 0);
        }
        break;
      }
      write_event(slots + n * event_size, event_size, e, text, text_used, top_logprobs, tops_used);
      text_used += t;
      tops_used += k;
      ++n;
      engine->pending.pop_front();
    }
    *out_num_events = n;
    if (oldest_too_big) {
      return fail(Errc::buffer_too_small, "the oldest event needs " + std::to_string(need_text) +
                                              " text bytes and " + std::to_string(need_tops) +
                                              " top_logprobs entries; the buffers hold " +
                                              std::to_string(text_capacity) + " and " +
                                              std::to_string(top_logprobs_capacity));
    }
    return {};
  });
}

}  // namespace

extern "C" {

PHOTON_API photon_status photon_engine_poll(size_t* out_num_events, photon_engine* engine, photon_event* events,
                                            size_t event_size, size_t max_events, char* text, size_t text_capacity,
                                            photon_token_logprob* top_logprobs, size_t top_logprobs_capacity) {
  return poll_into(__func__, out_num_events, engine, events, event_size, max_events, text, text_capacity,
                   top_logprobs, top_logprobs_capacity, -1);
}

PHOTON_API photon_status photon_engine_poll_wait(size_t* out_num_events, photon_engine* engine, photon_event* events,
                                                 size_t event_size, size_t max_events, char* text,
                                                 size_t text_capacity, photon_token_logprob* top_logprobs,
                                                 size_t top_logprobs_capacity, uint32_t timeout_ms) {
  return poll_into(__func__, out_num_events, engine, events, event_size, max_events, text, text_capacity,
                   top_logprobs, top_logprobs_capacity, int64_t(timeout_ms));
}

PHOTON_API photon_status photon_engine_start_loop(photon_engine* engine) {
  return guarded(__func__, [&]() -> Result<void> {
    PHOTON_ASSIGN_OR_RETURN(Engine * e, get(engine));
    return e->start_loop();
  });
}

PHOTON_API photon_status photon_engine_stop_loop(photon_engine* engine) {
  return guarded(__func__, [&]() -> Result<void> {
    PHOTON_ASSIGN_OR_RETURN(Engine * e, get(engine));
    e->stop_loop();
    return {};
  });
}

PHOTON_API photon_status photon_engine_get_metrics(photon_engine_metrics* out_metrics, const photon_engine* engine) {
  return guarded(__func__, [&]() -> Result<void> {
    PHOTON_CAPI_REQUIRE_NONNULL(out_metrics);
    PHOTON_ASSIGN_OR_RETURN(const Engine* e, get(engine));
    const EngineMetrics m = e->metrics();
    photon_engine_metrics c{};
    c.running = m.running;
    c.waiting = m.waiting;
    c.kv_blocks_total = m.kv_blocks_total;
    c.kv_blocks_used = m.kv_blocks_used;
    c.kv_blocks_cached = m.kv_blocks_cached;
    c.block_size = m.block_size;
    c.kv_usage = m.kv_usage;
    c.prefix_hit_rate = m.prefix_hit_rate;
    c.steps = m.steps;
    c.tokens_scheduled = m.tokens_scheduled;
    c.tokens_generated = m.tokens_generated;
    c.preemptions = m.preemptions;
    c.tokens_per_step = m.tokens_per_step;
    return write_out(out_metrics, c, "out_metrics");
  });
}

}  // extern "C"
