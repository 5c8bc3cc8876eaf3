#include "photon/result.hpp"

namespace photon {

std::string_view errc_name(Errc code) noexcept {
  switch (code) {
    case Errc::ok: return "ok";
    case Errc::invalid_argument: return "invalid_argument";
    case Errc::out_of_range: return "out_of_range";
    case Errc::file_not_found: return "file_not_found";
    case Errc::io_error: return "io_error";
    case Errc::truncated_file: return "truncated_file";
    case Errc::header_out_of_bounds: return "header_out_of_bounds";
    case Errc::bad_json: return "bad_json";
    case Errc::bad_offsets: return "bad_offsets";
    case Errc::unknown_dtype: return "unknown_dtype";
    case Errc::missing_tensor: return "missing_tensor";
    case Errc::shape_mismatch: return "shape_mismatch";
    case Errc::unknown_architecture: return "unknown_architecture";
    case Errc::missing_config_key: return "missing_config_key";
    case Errc::invalid_config: return "invalid_config";
    case Errc::out_of_memory: return "out_of_memory";
    case Errc::buffer_too_small: return "buffer_too_small";
    case Errc::capacity_exceeded: return "capacity_exceeded";
    case Errc::cancelled: return "cancelled";
    case Errc::unknown_request: return "unknown_request";
    case Errc::invalid_state: return "invalid_state";
    case Errc::tokenizer_error: return "tokenizer_error";
    case Errc::template_error: return "template_error";
    case Errc::cuda_error: return "cuda_error";
    case Errc::unsupported: return "unsupported";
    case Errc::internal: return "internal";
    case Errc::queue_full: return "queue_full";
  }
  return "unknown_status";
}

}  // namespace photon
