#include "api_error.hpp"

#include <utility>

namespace photon::server {

ApiError bad_request(std::string param, std::string message) {
  return ApiError{400, "invalid_request_error", std::move(message), std::move(param)};
}

ApiError not_found(std::string message) { return ApiError{404, "not_found_error", std::move(message), {}}; }

ApiError from_photon_error(const Error& e, std::string param) {
  switch (e.code) {
    case Errc::invalid_argument:
    case Errc::out_of_range:
    case Errc::capacity_exceeded:
    case Errc::template_error:
    case Errc::tokenizer_error:
    case Errc::invalid_state:
      return bad_request(std::move(param), e.message);
    case Errc::queue_full:
      return ApiError{503, "server_overloaded", e.message, {}};
    case Errc::cancelled:  // refused during shutdown
      return ApiError{503, "server_unavailable", e.message, {}};
    default:
      return ApiError{500, "server_error", std::string(errc_name(e.code)) + ": " + e.message, {}};
  }
}

nlohmann::json to_json(const ApiError& e) {
  nlohmann::json err = {{"message", e.message}, {"type", e.type}, {"code", e.status}};
  err["param"] = e.param.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.param);
  return {{"error", std::move(err)}};
}

}  // namespace photon::server
