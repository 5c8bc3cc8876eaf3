// photon_status_string and the runtime version queries.
#include "error.hpp"
#include "photon/version.h"

namespace {
using photon::Errc;
// photon_status and photon::Errc are one numbering (rule 3 of the C ABI).
static_assert(PHOTON_OK == static_cast<int>(Errc::ok));
static_assert(PHOTON_E_INVALID_ARGUMENT == static_cast<int>(Errc::invalid_argument));
static_assert(PHOTON_E_OUT_OF_RANGE == static_cast<int>(Errc::out_of_range));
static_assert(PHOTON_E_FILE_NOT_FOUND == static_cast<int>(Errc::file_not_found));
static_assert(PHOTON_E_IO_ERROR == static_cast<int>(Errc::io_error));
static_assert(PHOTON_E_TRUNCATED_FILE == static_cast<int>(Errc::truncated_file));
static_assert(PHOTON_E_HEADER_OUT_OF_BOUNDS == static_cast<int>(Errc::header_out_of_bounds));
static_assert(PHOTON_E_BAD_JSON == static_cast<int>(Errc::bad_json));
static_assert(PHOTON_E_BAD_OFFSETS == static_cast<int>(Errc::bad_offsets));
static_assert(PHOTON_E_UNKNOWN_DTYPE == static_cast<int>(Errc::unknown_dtype));
static_assert(PHOTON_E_MISSING_TENSOR == static_cast<int>(Errc::missing_tensor));
static_assert(PHOTON_E_SHAPE_MISMATCH == static_cast<int>(Errc::shape_mismatch));
static_assert(PHOTON_E_UNKNOWN_ARCHITECTURE == static_cast<int>(Errc::unknown_architecture));
static_assert(PHOTON_E_MISSING_CONFIG_KEY == static_cast<int>(Errc::missing_config_key));
static_assert(PHOTON_E_INVALID_CONFIG == static_cast<int>(Errc::invalid_config));
static_assert(PHOTON_E_OUT_OF_MEMORY == static_cast<int>(Errc::out_of_memory));
static_assert(PHOTON_E_BUFFER_TOO_SMALL == static_cast<int>(Errc::buffer_too_small));
static_assert(PHOTON_E_CAPACITY_EXCEEDED == static_cast<int>(Errc::capacity_exceeded));
static_assert(PHOTON_E_CANCELLED == static_cast<int>(Errc::cancelled));
static_assert(PHOTON_E_UNKNOWN_REQUEST == static_cast<int>(Errc::unknown_request));
static_assert(PHOTON_E_INVALID_STATE == static_cast<int>(Errc::invalid_state));
static_assert(PHOTON_E_TOKENIZER_ERROR == static_cast<int>(Errc::tokenizer_error));
static_assert(PHOTON_E_TEMPLATE_ERROR == static_cast<int>(Errc::template_error));
static_assert(PHOTON_E_CUDA_ERROR == static_cast<int>(Errc::cuda_error));
static_assert(PHOTON_E_UNSUPPORTED == static_cast<int>(Errc::unsupported));
static_assert(PHOTON_E_INTERNAL == static_cast<int>(Errc::internal));
static_assert(PHOTON_E_QUEUE_FULL == static_cast<int>(Errc::queue_full));
static_assert(sizeof(photon_status) == sizeof(int32_t), "photon_status must stay int-sized");
}  // namespace

extern "C" {

PHOTON_API const char* photon_status_string(photon_status status) {
  // errc_name returns views of string literals, so .data() is NUL-terminated.
  return photon::errc_name(static_cast<Errc>(status)).data();
}

PHOTON_API uint32_t photon_version_number(void) { return PHOTON_VERSION_NUMBER; }

PHOTON_API const char* photon_version_string(void) { return PHOTON_VERSION_STRING; }

PHOTON_API uint32_t photon_abi_version(void) { return PHOTON_ABI_VERSION; }

}  // extern "C"
