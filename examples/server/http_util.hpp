// Small helpers for writing HTTP answers (JSON bodies, errors, SSE events).
#pragma once

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <string>

#include "api_error.hpp"

namespace photon::server {

void send_json(httplib::Response& res, int status, const nlohmann::json& body);
// The OpenAI error body with the error's HTTP status.
void send_error(httplib::Response& res, const ApiError& e);
// "data: <json>\n\n" written to a streaming sink; false when the client is gone.
bool write_sse(httplib::DataSink& sink, const std::string& payload);

}  // namespace photon::server
