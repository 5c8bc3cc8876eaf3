#include "error.hpp"

#include <string>

namespace photon::capi {
namespace {
// The calling thread's last error message (photon_last_error_message()).
std::string& thread_message() noexcept {
  thread_local std::string message;
  return message;
}
}  // namespace

photon_status set_error(std::string_view function, Errc code, std::string_view message,
                        std::string_view detail) noexcept {
  std::string& m = thread_message();
  try {
    m.assign(function);
    m.append(": ");
    m.append(message);
    m.append(detail);
  } catch (...) {
    m.clear();
  }
  return to_status(code);
}

photon_status clear_error() noexcept {
  thread_message().clear();
  return PHOTON_OK;
}

}  // namespace photon::capi

extern "C" PHOTON_API const char* photon_last_error_message(void) {
  return photon::capi::thread_message().c_str();
}
