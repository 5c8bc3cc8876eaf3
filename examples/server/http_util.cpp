#include "http_util.hpp"

#include "response_json.hpp"

namespace photon::server {

void send_json(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) { send_json(res, e.status, to_json(e)); }

bool write_sse(httplib::DataSink& sink, const std::string& payload) {
  const std::string event = "data: " + payload + "\n\n";
  return sink.write(event.data(), event.size());
}

}  // namespace photon::server
