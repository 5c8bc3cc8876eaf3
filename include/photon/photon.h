/* photon.h: the stable C ABI of libphoton. Pure C99.
 *
 * Conventions (docs/c-api.md says more, with a complete example):
 *
 * Errors. Every call that can fail returns a photon_status: PHOTON_OK (0) or
 *   a negative PHOTON_E_* code. Numbers are never reused or renumbered.
 *   photon_status_string() names a code; photon_last_error_message() gives
 *   the calling thread's message of its last photon call that returned a
 *   photon_status ("" after a success). No call aborts, exits or lets a C++
 *   exception out.
 *
 * Argument order. Out-params first, then the object, then the inputs.
 *
 * Params structs (photon_*_params) begin with `uint32_t struct_size` and are
 *   passed by pointer. Fill one with photon_X_params_init(&p, sizeof p):
 *   it writes photon's defaults for exactly the caller's size, so a program
 *   built against an older photon.h keeps working with a newer libphoton
 *   (the fields it does not know keep their defaults), and one built against
 *   a newer photon.h works with an older libphoton as long as it leaves the
 *   fields that libphoton does not know at zero (a non-zero one is rejected
 *   with PHOTON_E_INVALID_ARGUMENT rather than silently ignored). A NULL
 *   params pointer means "all defaults". Fields are only ever appended.
 *   Structs that photon writes (photon_engine_metrics, photon_event) follow
 *   the same rule in the other direction: the caller says how many bytes it
 *   has (struct_size, or an element size argument) and photon writes exactly
 *   those, zeroing what it does not know.
 *
 * Strings. Input text is UTF-8 given as (pointer, length in bytes): no NUL
 *   terminator is needed and embedded NULs are text. File system paths are
 *   NUL-terminated. Output text goes to caller-owned buffers.
 *
 * Caller-owned output buffers. A call that writes a variable amount of data
 *   takes (buffer, capacity) and an out-param that receives the size written
 *   or, with PHOTON_E_BUFFER_TOO_SMALL, the size needed (so a call with a
 *   NULL buffer and capacity 0 asks for the size).
 *
 * Ownership. Each function says who owns what: "borrowed" inputs are read
 *   during the call only (or as long as it says); handles returned through
 *   out-params are owned by the caller and freed by the matching
 *   photon_X_destroy(), which accepts NULL.
 *
 * Threading. photon starts no threads unless a params field asks for them.
 *   Each function says what it allows; in short: photon_engine_step() is
 *   called from one driver thread at a time; submit, cancel, poll and
 *   metrics are safe from any thread at any time; destroy must not race with
 *   any other call on the same handle.
 *
 * Versioning. PHOTON_VERSION_* (version.h) are the version of the header
 *   compiled against; photon_version_number() that of the library loaded.
 *   The shared library's SONAME carries PHOTON_ABI_VERSION, which changes
 *   only with an incompatible ABI change; every API or ABI change is logged in
 *   docs/CHANGELOG-API.md and deprecations are announced one minor release
 *   ahead.
 */
#ifndef PHOTON_PHOTON_H
#define PHOTON_PHOTON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "photon/export.h"
#include "photon/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- status */

/* Equal to photon::Errc (include/photon/result.hpp). Append only. */
typedef enum photon_status {
  PHOTON_OK = 0,
  PHOTON_E_INVALID_ARGUMENT = -1,     /* a NULL pointer, a bad value in a call */
  PHOTON_E_OUT_OF_RANGE = -2,         /* an index or token id outside its range */
  PHOTON_E_FILE_NOT_FOUND = -3,       /* a path that does not exist */
  PHOTON_E_IO_ERROR = -4,             /* a read or mmap failure */
  PHOTON_E_TRUNCATED_FILE = -5,       /* a file shorter than its format requires */
  PHOTON_E_HEADER_OUT_OF_BOUNDS = -6, /* a safetensors header running past the file */
  PHOTON_E_BAD_JSON = -7,             /* malformed JSON text */
  PHOTON_E_BAD_OFFSETS = -8,          /* tensor data offsets outside the data */
  PHOTON_E_UNKNOWN_DTYPE = -9,        /* a dtype photon does not know */
  PHOTON_E_MISSING_TENSOR = -10,      /* a tensor the architecture needs is absent */
  PHOTON_E_SHAPE_MISMATCH = -11,      /* a tensor's shape or dtype disagrees with the config */
  PHOTON_E_UNKNOWN_ARCHITECTURE = -12,/* config.json names an unsupported architecture */
  PHOTON_E_MISSING_CONFIG_KEY = -13,  /* config.json lacks a required key */
  PHOTON_E_INVALID_CONFIG = -14,      /* a config value of the wrong type or range */
  PHOTON_E_OUT_OF_MEMORY = -15,       /* a host or device allocation failed */
  PHOTON_E_BUFFER_TOO_SMALL = -16,    /* a caller buffer cannot hold the result */
  PHOTON_E_CAPACITY_EXCEEDED = -17,   /* a request that can never fit (KV cache, positions) */
  PHOTON_E_CANCELLED = -18,           /* the operation or request was cancelled */
  PHOTON_E_UNKNOWN_REQUEST = -19,     /* no request with that id */
  PHOTON_E_INVALID_STATE = -20,       /* a call the object's state does not allow */
  PHOTON_E_TOKENIZER_ERROR = -21,     /* malformed tokenizer files or undecodable input */
  PHOTON_E_TEMPLATE_ERROR = -22,      /* an unknown or failing chat template */
  PHOTON_E_CUDA_ERROR = -23,          /* a CUDA runtime or cuBLAS failure */
  PHOTON_E_UNSUPPORTED = -24,         /* a valid input this build cannot serve */
  PHOTON_E_INTERNAL = -25,            /* a broken invariant inside photon (a bug) */
  PHOTON_E_QUEUE_FULL = -26           /* the submit queue is at its configured limit */
} photon_status;

/* The code's name ("ok", "invalid_argument", ...; "unknown_status" for a
 * number photon does not know). Static storage, never NULL.
 * Threading: any thread. */
PHOTON_API const char* photon_status_string(photon_status status);

/* The message of the calling thread's last photon call that returned a
 * photon_status: "" when it returned PHOTON_OK, otherwise a sentence naming
 * the function and the argument, field, file or tensor at fault.
 * Never NULL. Ownership: thread-local storage of photon, valid until the
 * calling thread's next photon call; copy it to keep it.
 * Threading: any thread; each thread sees only its own message. */
PHOTON_API const char* photon_last_error_message(void);

/* --------------------------------------------------------------- version */

/* The loaded library's version, encoded as PHOTON_VERSION_NUMBER is
 * (major * 10000 + minor * 100 + patch). Threading: any thread. */
PHOTON_API uint32_t photon_version_number(void);

/* The loaded library's version as "major.minor.patch". Static storage,
 * never NULL. Threading: any thread. */
PHOTON_API const char* photon_version_string(void);

/* The loaded library's ABI version (its SONAME's number). A program built
 * against this header works with any libphoton whose photon_abi_version()
 * equals PHOTON_ABI_VERSION and whose photon_version_number() is at least
 * PHOTON_VERSION_NUMBER. Threading: any thread. */
PHOTON_API uint32_t photon_abi_version(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PHOTON_PHOTON_H */
