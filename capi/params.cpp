// photon_*_params_init: defaults for exactly the caller's struct size.
#include "convert.hpp"
#include "error.hpp"
#include "layouts.hpp"

using namespace photon::capi;

extern "C" {

PHOTON_API photon_status photon_tokenize_params_init(photon_tokenize_params* params, size_t struct_size) {
  return guarded(__func__, [&] { return init_params(params, struct_size, default_tokenize_params()); });
}

PHOTON_API photon_status photon_detokenize_params_init(photon_detokenize_params* params, size_t struct_size) {
  return guarded(__func__, [&] { return init_params(params, struct_size, default_detokenize_params()); });
}

PHOTON_API photon_status photon_chat_message_init(photon_chat_message* message, size_t struct_size) {
  return guarded(__func__, [&] { return init_params(message, struct_size, default_chat_message()); });
}

PHOTON_API photon_status photon_chat_params_init(photon_chat_params* params, size_t struct_size) {
  return guarded(__func__, [&] { return init_params(params, struct_size, default_chat_params()); });
}

PHOTON_API photon_status photon_engine_params_init(photon_engine_params* params, size_t struct_size) {
  return guarded(__func__, [&] { return init_params(params, struct_size, default_engine_params()); });
}

PHOTON_API photon_status photon_request_params_init(photon_request_params* params, size_t struct_size) {
  return guarded(__func__, [&] { return init_params(params, struct_size, default_request_params()); });
}

}  // extern "C"
