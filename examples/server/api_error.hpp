// OpenAI-style API errors: {"error": {"message", "type", "param", "code"}}
// with the HTTP status in "code".
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "photon/result.hpp"

namespace photon::server {

struct ApiError {
  int status = 400;                           // the HTTP status
  std::string type = "invalid_request_error"; // OpenAI's error type names
  std::string message{};
  std::string param{};                        // the request field at fault; empty when none
};

// 400 invalid_request_error naming `param`.
ApiError bad_request(std::string param, std::string message);
ApiError not_found(std::string message);

// An error of photon's API as the HTTP answer: request errors (invalid
// argument, out of range, capacity exceeded, template or tokenizer errors,
// a text field without a tokenizer) are 400 naming `param`, queue_full and
// cancelled (shutdown) are 503, anything else 500.
ApiError from_photon_error(const Error& e, std::string param);

nlohmann::json to_json(const ApiError& e);

}  // namespace photon::server
