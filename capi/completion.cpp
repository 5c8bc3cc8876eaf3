// photon_completion_*: read access to the results of photon_engine_generate_*.
// Every accessor accepts NULL (documented neutral values) and never fails.
#include "convert.hpp"
#include "handles.hpp"

using namespace photon;
using namespace photon::capi;

PHOTON_API void photon_completion_destroy(photon_completion* completion) { delete completion; }

PHOTON_API size_t photon_completion_num_tokens(const photon_completion* completion) {
  return completion != nullptr ? completion->completion.tokens.size() : 0;
}

PHOTON_API const int32_t* photon_completion_tokens(const photon_completion* completion) {
  return completion != nullptr ? completion->completion.tokens.data() : nullptr;
}

PHOTON_API const float* photon_completion_logprobs(const photon_completion* completion) {
  return completion != nullptr ? completion->completion.logprobs.data() : nullptr;
}

PHOTON_API photon_str photon_completion_text(const photon_completion* completion) {
  if (completion == nullptr) return photon_str{"", 0};
  return photon_str{completion->completion.text.c_str(), completion->completion.text.size()};
}

PHOTON_API photon_finish_reason photon_completion_finish_reason(const photon_completion* completion) {
  return completion != nullptr ? to_c(completion->completion.finish) : PHOTON_FINISH_NONE;
}

PHOTON_API int32_t photon_completion_stop_string_index(const photon_completion* completion) {
  return completion != nullptr ? completion->completion.stop_string : -1;
}

PHOTON_API photon_str photon_completion_error(const photon_completion* completion) {
  if (completion == nullptr) return photon_str{"", 0};
  return photon_str{completion->completion.error.c_str(), completion->completion.error.size()};
}
