/* 200 open/destroy cycles of an engine (with requests left unfinished) and
 * of a tokenizer. Run under valgrind by ctest when valgrind is installed
 * ("capi: test_lifecycle.c (valgrind)"), which fails on any leak. */
#include "engine_util.h"

#define CYCLES 200

static void test_cycles(void) {
  char dir[1024];
  int i, failures = 0;
  photon_request_params p;
  photon_request_params_init(&p, sizeof p);
  p.max_tokens = 8;
  capi_stories_dir(dir, sizeof dir);
  for (i = 0; i < CYCLES; ++i) {
    photon_engine_params ep;
    photon_engine* e = NULL;
    photon_tokenizer* t = NULL;
    uint64_t id = 0;
    photon_engine_params_init(&ep, sizeof ep);
    ep.backend = PHOTON_BACKEND_CPU;
    ep.threads = 1;
    ep.kv_blocks = 8;
    if (photon_engine_open(&e, dir, &ep) != PHOTON_OK) {
      ++failures;
      continue;
    }
    /* Every few cycles: leave a request running, one queued and events pending. */
    if (i % 4 == 0) {
      if (photon_engine_submit_text(&id, e, "Once upon a time", 16, NULL, &p) != PHOTON_OK) ++failures;
      if (photon_engine_step(NULL, e) != PHOTON_OK) ++failures;
      if (photon_engine_submit_text(&id, e, "Lily", 4, NULL, &p) != PHOTON_OK) ++failures;
    }
    photon_engine_destroy(e);
    if (photon_tokenizer_open(&t, dir) != PHOTON_OK) ++failures;
    photon_tokenizer_destroy(t);
  }
  CHECK(failures == 0);
  /* A failed open leaves nothing behind either. */
  for (i = 0; i < 10; ++i) {
    photon_engine* e = NULL;
    CHECK_STATUS(photon_engine_open(&e, "/nonexistent/photon/model", NULL), PHOTON_E_FILE_NOT_FOUND);
  }
}

int main(void) {
  RUN(test_cycles);
  return capi_summary();
}
