#include "scheduler/request_params.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace photon {

namespace {

Unexpected bad(const std::string& field, const std::string& why) {
  return fail(Errc::invalid_argument, "request." + field + " " + why);
}

Result<void> check_sampling(const SamplingOptions& s) {
  if (!std::isfinite(s.temperature) || s.temperature < 0.0f)
    return bad("sampling.temperature", "must be >= 0, got " + std::to_string(s.temperature));
  if (s.top_k < 0) return bad("sampling.top_k", "must be >= 0 (0 = off), got " + std::to_string(s.top_k));
  if (!(s.top_p > 0.0f && s.top_p <= 1.0f))
    return bad("sampling.top_p", "must be in (0, 1], got " + std::to_string(s.top_p));
  if (!(s.min_p >= 0.0f && s.min_p <= 1.0f))
    return bad("sampling.min_p", "must be in [0, 1], got " + std::to_string(s.min_p));
  if (!(std::isfinite(s.repetition_penalty) && s.repetition_penalty > 0.0f))
    return bad("sampling.repetition_penalty", "must be > 0 (1 = off), got " + std::to_string(s.repetition_penalty));
  if (!(s.presence_penalty >= -2.0f && s.presence_penalty <= 2.0f))
    return bad("sampling.presence_penalty", "must be in [-2, 2], got " + std::to_string(s.presence_penalty));
  if (!(s.frequency_penalty >= -2.0f && s.frequency_penalty <= 2.0f))
    return bad("sampling.frequency_penalty", "must be in [-2, 2], got " + std::to_string(s.frequency_penalty));
  return {};
}

}  // namespace

Result<SequenceParams> resolve_request(const Request& request, std::span<const int32_t> prompt,
                                       const RequestLimits& limits, uint64_t default_seed) {
  if (prompt.empty()) return bad("prompt_tokens", "is empty");
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || prompt[i] >= limits.vocab_size)
      return fail(Errc::out_of_range, "request prompt token " + std::to_string(i) + " = " +
                                          std::to_string(prompt[i]) + " is outside the vocabulary [0, " +
                                          std::to_string(limits.vocab_size) + ")");
  }
  for (size_t i = 0; i < request.stop_token_ids.size(); ++i) {
    const int32_t t = request.stop_token_ids[i];
    if (t < 0 || t >= limits.vocab_size)
      return fail(Errc::out_of_range, "request.stop_token_ids[" + std::to_string(i) + "] = " + std::to_string(t) +
                                          " is outside the vocabulary [0, " + std::to_string(limits.vocab_size) + ")");
  }
  if (request.max_tokens < 0) return bad("max_tokens", "must be >= 0 (0 = up to the context limit)");
  if (request.logprobs < 0 || request.logprobs > limits.max_logprobs)
    return bad("logprobs", "must be in [0, " + std::to_string(limits.max_logprobs) + "], got " +
                               std::to_string(request.logprobs));
  auto sampling_ok = check_sampling(request.sampling);
  if (!sampling_ok) return Unexpected{std::move(sampling_ok).error()};

  const int64_t prompt_len = int64_t(prompt.size());
  const int64_t context_limit = std::min<int64_t>(limits.max_model_len, limits.kv_capacity_tokens);
  const int64_t max_tokens = request.max_tokens > 0 ? request.max_tokens : context_limit - prompt_len;
  if (prompt_len + std::max<int64_t>(max_tokens, 1) > limits.max_model_len)
    return fail(Errc::capacity_exceeded, "request needs " + std::to_string(prompt_len) + " prompt + " +
                                             std::to_string(std::max<int64_t>(max_tokens, 1)) +
                                             " generated tokens, beyond max_position_embeddings " +
                                             std::to_string(limits.max_model_len));
  if (prompt_len + std::max<int64_t>(max_tokens, 1) > limits.kv_capacity_tokens)
    return fail(Errc::capacity_exceeded, "request needs " + std::to_string(prompt_len) + " prompt + " +
                                             std::to_string(std::max<int64_t>(max_tokens, 1)) +
                                             " generated tokens, beyond the whole KV cache (" +
                                             std::to_string(limits.kv_capacity_tokens) + " tokens)");

  SequenceParams p;
  const SamplingOptions& s = request.sampling;
  p.sampling.temperature = s.temperature;
  p.sampling.top_k = s.top_k;
  p.sampling.top_p = s.top_p;
  p.sampling.min_p = s.min_p;
  p.sampling.repetition_penalty = s.repetition_penalty;
  p.sampling.presence_penalty = s.presence_penalty;
  p.sampling.frequency_penalty = s.frequency_penalty;
  p.sampling.seed = s.seed.value_or(default_seed);
  p.sampling.num_logprobs = request.logprobs;
  p.max_tokens = int32_t(max_tokens);
  p.stop_token_ids = request.stop_token_ids;
  if (!request.ignore_eos) p.stop_token_ids.insert(p.stop_token_ids.end(), limits.eos_token_ids.begin(), limits.eos_token_ids.end());
  std::sort(p.stop_token_ids.begin(), p.stop_token_ids.end());
  p.stop_token_ids.erase(std::unique(p.stop_token_ids.begin(), p.stop_token_ids.end()), p.stop_token_ids.end());
  return p;
}

}  // namespace photon
