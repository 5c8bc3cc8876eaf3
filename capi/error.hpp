// The C ABI's error channel: photon_status codes plus the calling thread's
// last error message, and `guarded`, which every extern "C" shim runs its
// body in so that no exception crosses the C boundary.
//
// Thread-safety: the message is thread_local; nothing here is shared.
#pragma once

#include <exception>
#include <new>
#include <string_view>

#include "photon/photon.h"
#include "photon/result.hpp"

namespace photon::capi {

inline photon_status to_status(Errc code) noexcept { return static_cast<photon_status>(code); }

// Records "<function>: <message><detail>" as this thread's last error and
// returns its code. If the message cannot be stored (no memory), the code is
// still returned and the message is left empty.
photon_status set_error(std::string_view function, Errc code, std::string_view message,
                        std::string_view detail = {}) noexcept;
inline photon_status set_error(std::string_view function, const Error& e) noexcept {
  return set_error(function, e.code, e.message);
}
// A success: this thread's last error message becomes "".
photon_status clear_error() noexcept;

// Runs `body` (returning Result<void>) and turns its outcome, or any
// exception it throws, into a photon_status plus this thread's message.
// bad_alloc becomes PHOTON_E_OUT_OF_MEMORY; any other exception PHOTON_E_INTERNAL.
template <class F>
photon_status guarded(std::string_view function, F&& body) noexcept {
  try {
    Result<void> r = body();
    if (!r) return set_error(function, r.error());
    return clear_error();
  } catch (const std::bad_alloc&) {
    return set_error(function, Errc::out_of_memory, "out of host memory");
  } catch (const std::exception& e) {
    return set_error(function, Errc::internal, "unexpected exception: ", e.what());
  } catch (...) {
    return set_error(function, Errc::internal, "unexpected non-standard exception");
  }
}

// Inside a guarded body: fails with PHOTON_E_INVALID_ARGUMENT naming the
// argument when `arg` is NULL.
#define PHOTON_CAPI_REQUIRE_NONNULL(arg)                                           \
  do {                                                                            \
    if ((arg) == nullptr)                                                         \
      return ::photon::fail(::photon::Errc::invalid_argument, #arg " is NULL");   \
  } while (0)

}  // namespace photon::capi
