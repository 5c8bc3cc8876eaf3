/* photon.h basics: status names, version queries, the thread-local last
 * error message. */
#include <pthread.h>

#include "capi_check.h"

static void test_status_strings(void) {
  CHECK(strcmp(photon_status_string(PHOTON_OK), "ok") == 0);
  CHECK(strcmp(photon_status_string(PHOTON_E_INVALID_ARGUMENT), "invalid_argument") == 0);
  CHECK(strcmp(photon_status_string(PHOTON_E_BUFFER_TOO_SMALL), "buffer_too_small") == 0);
  CHECK(strcmp(photon_status_string(PHOTON_E_QUEUE_FULL), "queue_full") == 0);
  /* Numbers photon does not know still get a static, non-NULL name. */
  CHECK(strcmp(photon_status_string((photon_status)-9999), "unknown_status") == 0);
  CHECK(strcmp(photon_status_string((photon_status)7), "unknown_status") == 0);
  {
    int code;
    for (code = 0; code >= (int)PHOTON_E_QUEUE_FULL; --code) {
      const char* name = photon_status_string((photon_status)code);
      CHECK(name != NULL && name[0] != '\0' && strcmp(name, "unknown_status") != 0);
    }
  }
}

static void test_version(void) {
  char expect[32];
  CHECK(photon_version_number() == (uint32_t)PHOTON_VERSION_NUMBER);
  CHECK(strcmp(photon_version_string(), PHOTON_VERSION_STRING) == 0);
  CHECK(photon_abi_version() == (uint32_t)PHOTON_ABI_VERSION);
  snprintf(expect, sizeof expect, "%d.%d.%d", PHOTON_VERSION_MAJOR, PHOTON_VERSION_MINOR, PHOTON_VERSION_PATCH);
  CHECK(strcmp(photon_version_string(), expect) == 0);
  CHECK(PHOTON_VERSION_NUMBER == PHOTON_VERSION_MAJOR * 10000 + PHOTON_VERSION_MINOR * 100 + PHOTON_VERSION_PATCH);
}

static void test_last_error_starts_empty(void) {
  const char* m = photon_last_error_message();
  CHECK(m != NULL);
  CHECK(m != NULL && m[0] == '\0');
}

/* Each thread has its own last error message. */
static void* fail_in_thread(void* arg) {
  photon_status st = photon_request_params_init(NULL, 8);
  int ok = st == PHOTON_E_INVALID_ARGUMENT &&
           strcmp(photon_last_error_message(), "photon_request_params_init: params is NULL") == 0;
  (void)arg;
  return ok ? arg : NULL;
}

static void test_last_error_is_thread_local(void) {
  pthread_t th;
  void* result = NULL;
  photon_tokenize_params p;
  int token = 1;
  CHECK_STATUS(photon_tokenize_params_init(NULL, sizeof p), PHOTON_E_INVALID_ARGUMENT);
  CHECK(strcmp(photon_last_error_message(), "photon_tokenize_params_init: params is NULL") == 0);
  REQUIRE(pthread_create(&th, NULL, fail_in_thread, &token) == 0);
  REQUIRE(pthread_join(th, &result) == 0);
  CHECK(result == &token);
  /* The other thread's failure left this thread's message alone. */
  CHECK(strcmp(photon_last_error_message(), "photon_tokenize_params_init: params is NULL") == 0);
  /* A success clears it. */
  CHECK_STATUS(photon_tokenize_params_init(&p, sizeof p), PHOTON_OK);
  CHECK(strcmp(photon_last_error_message(), "") == 0);
}

int main(void) {
  RUN(test_status_strings);
  RUN(test_version);
  RUN(test_last_error_starts_empty);
  RUN(test_last_error_is_thread_local);
  return capi_summary();
}
