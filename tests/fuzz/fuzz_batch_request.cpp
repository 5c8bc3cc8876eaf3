// Fuzz target: one line of a `photon batch` requests file (the CLI's JSON
// request parser, examples/cli/batch_request.hpp). Properties: a rejected line
// has a message naming the line; an accepted one keeps its JSON id.
#include <cstdint>
#include <string>

#include "batch_request.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto line = photon::cli::parse_batch_line(photon::fuzz::as_text(data, size), 7);
  if (!line) {
    FUZZ_CHECK(line.error().message.rfind("requests line 7: ", 0) == 0);
    return 0;
  }
  FUZZ_CHECK(!line->id.is_discarded());
  (void)line->id.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return 0;
}
