// The request lines of `photon batch` (JSON Lines, one request per line):
//   {"id": <any JSON>, "tokens": [ids] | "prompt": "text" | "messages": [{"role", "content"}],
//    "max_tokens": N, "temperature": x, "top_k": k, "top_p": p, "min_p": p, "seed": s,
//    "repetition_penalty": x, "presence_penalty": x, "frequency_penalty": x,
//    "stop_token_ids": [ids], "stop": "text" | ["text"], "ignore_eos": bool, "logprobs": n}
// Only types and representable ranges are checked here (an integer field must
// be an integer that fits int32, a number finite and within float's range, a
// seed a non-negative integer); the engine checks the values at submit.
// Sampling defaults to greedy (temperature 0).
// Thread-compatibility: pure functions.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string_view>

#include "photon/engine.hpp"
#include "photon/result.hpp"

namespace photon::cli {

struct BatchLine {
  nlohmann::json id;  // the line's "id", or its line number when absent
  Request request;
};

// Parses one line. Errors: invalid_argument "requests line N: ..." naming the
// field (not a JSON object, an unknown field, "wrong type or range").
Result<BatchLine> parse_batch_line(std::string_view text, size_t line_no);

}  // namespace photon::cli
