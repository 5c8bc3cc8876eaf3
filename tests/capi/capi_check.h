/* A minimal test harness for photon's C API tests (C99).
 *
 *   static void test_x(void) { CHECK(a == b); CHECK_STATUS(photon_f(...), PHOTON_OK); }
 *   int main(void) { RUN(test_x); return capi_summary(); }
 *
 * CHECK records a failure and goes on; REQUIRE returns from the test
 * function. CHECK_STATUS prints the status name and the thread's last error
 * message when the status differs. capi_summary prints "N passed, M failed"
 * over the checks and returns the process exit code. Single-threaded use of
 * the counters only (threads report through their own results). */
#ifndef PHOTON_CAPI_CHECK_H
#define PHOTON_CAPI_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "photon/photon.h"

static int capi_passed = 0;
static int capi_failed = 0;
static const char* capi_current = "";

static inline int capi_record(int ok, const char* expr, const char* file, int line) {
  if (ok) {
    ++capi_passed;
  } else {
    ++capi_failed;
    fprintf(stderr, "%s:%d: [%s] check failed: %s\n", file, line, capi_current, expr);
  }
  return ok;
}

static inline int capi_record_status(photon_status got, photon_status want, const char* expr, const char* file,
                              int line) {
  if (got == want) {
    ++capi_passed;
    return 1;
  }
  ++capi_failed;
  fprintf(stderr, "%s:%d: [%s] %s returned %s (%d), expected %s: \"%s\"\n", file, line, capi_current, expr,
          photon_status_string(got), (int)got, photon_status_string(want), photon_last_error_message());
  return 0;
}

#define CHECK(cond) ((void)capi_record((cond) ? 1 : 0, #cond, __FILE__, __LINE__))
#define REQUIRE(cond)                                          \
  do {                                                         \
    if (!capi_record((cond) ? 1 : 0, #cond, __FILE__, __LINE__)) return; \
  } while (0)
#define CHECK_STATUS(expr, want) ((void)capi_record_status((expr), (want), #expr, __FILE__, __LINE__))
#define REQUIRE_STATUS(expr, want)                                             \
  do {                                                                         \
    if (!capi_record_status((expr), (want), #expr, __FILE__, __LINE__)) return; \
  } while (0)
static inline void capi_check_message_has(const char* needle, const char* file, int line) {
  const char* m = photon_last_error_message();
  if (m != NULL && strstr(m, needle) != NULL) {
    ++capi_passed;
    return;
  }
  ++capi_failed;
  fprintf(stderr, "%s:%d: [%s] last error message \"%s\" lacks \"%s\"\n", file, line, capi_current,
          m ? m : "(NULL)", needle);
}
/* The thread's last error message contains `needle`. */
#define CHECK_MESSAGE_HAS(needle) capi_check_message_has((needle), __FILE__, __LINE__)

#define RUN(fn)                    \
  do {                             \
    capi_current = #fn;            \
    fprintf(stderr, "-- %s\n", #fn); \
    fn();                          \
  } while (0)

static inline int capi_summary(void) {
  printf("%d passed, %d failed\n", capi_passed, capi_failed);
  return capi_failed == 0 && capi_passed > 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* Test data: the compiled-in paths, overridable by the environment variables
 * of the same names (as tests/support/test_data.hpp does for C++ tests). */
static inline const char* capi_env_or(const char* name, const char* fallback) {
  const char* v = getenv(name);
  return v != NULL && v[0] != '\0' ? v : fallback;
}

/* "<models dir>/stories260K" into buf[n] (PHOTON_MODELS_DIR overrides the compiled-in folder). */
static inline const char* capi_stories_dir(char* buf, size_t n) {
  snprintf(buf, n, "%s/stories260K", capi_env_or("PHOTON_MODELS_DIR", PHOTON_MODELS_DIR));
  return buf;
}
/* "<test data dir>/<rel>" into buf[n] (PHOTON_TEST_DATA_DIR overrides). */
static inline const char* capi_data_path(char* buf, size_t n, const char* rel) {
  snprintf(buf, n, "%s/%s", capi_env_or("PHOTON_TEST_DATA_DIR", PHOTON_TEST_DATA_DIR), rel);
  return buf;
}
/* "<build test data dir>/tokenizers/<name>" (unpacked tokenizer.json folders). */
static inline const char* capi_tokenizer_dir(char* buf, size_t n, const char* name) {
  snprintf(buf, n, "%s/tokenizers/%s", capi_env_or("PHOTON_TEST_DATA_BUILD_DIR", PHOTON_TEST_DATA_BUILD_DIR), name);
  return buf;
}

#endif /* PHOTON_CAPI_CHECK_H */
