/* Helpers shared by the engine C tests: open stories260K on the CPU with a
 * small KV cache, and drive the engine (step + poll) until every request has
 * finished, collecting each request's tokens and text. C99. */
#ifndef PHOTON_CAPI_ENGINE_UTIL_H
#define PHOTON_CAPI_ENGINE_UTIL_H

#include "capi_check.h"

#define UTIL_MAX_TOKENS 256
#define UTIL_MAX_TEXT 4096

/* What one request produced, gathered from its events. */
typedef struct collected {
  uint64_t id;
  int32_t tokens[UTIL_MAX_TOKENS];
  int num_tokens;
  char text[UTIL_MAX_TEXT];
  size_t text_len;
  int num_events;
  int num_finish_events; /* must end at exactly 1 */
  photon_finish_reason finish;
  int32_t stop_string_index; /* the finish event's */
  int top_logprobs_seen; /* events that carried top logprobs */
  int bad_order;         /* an event arrived after the finish event */
} collected;

static inline photon_engine* util_open_stories(int32_t kv_blocks) {
  char dir[1024];
  photon_engine* e = NULL;
  photon_engine_params p;
  photon_engine_params_init(&p, sizeof p);
  p.backend = PHOTON_BACKEND_CPU;
  p.threads = 1;
  p.kv_blocks = kv_blocks;
  CHECK_STATUS(photon_engine_open(&e, capi_stories_dir(dir, sizeof dir), &p), PHOTON_OK);
  return e;
}

static inline collected* util_find(collected* c, int n, uint64_t id) {
  int i;
  for (i = 0; i < n; ++i) {
    if (c[i].id == id) return &c[i];
  }
  return NULL;
}

/* Adds polled events to their request's record (waiting up to wait_ms for
 * some when wait_ms >= 0). Returns the number polled or -1 on an error. */
static inline int util_poll_wait(photon_engine* e, collected* c, int n, int wait_ms) {
  photon_event ev[16];
  char text[4096];
  photon_token_logprob tops[16 * 20];
  size_t got = 0, i;
  photon_status st =
      wait_ms < 0 ? photon_engine_poll(&got, e, ev, sizeof ev[0], 16, text, sizeof text, tops, 16 * 20)
                  : photon_engine_poll_wait(&got, e, ev, sizeof ev[0], 16, text, sizeof text, tops, 16 * 20,
                                            (uint32_t)wait_ms);
  if (st != PHOTON_OK) {
    CHECK_STATUS(st, PHOTON_OK);
    return -1;
  }
  for (i = 0; i < got; ++i) {
    collected* r = util_find(c, n, ev[i].request_id);
    CHECK(r != NULL);
    if (r == NULL) continue;
    if (r->num_finish_events > 0) r->bad_order = 1;
    ++r->num_events;
    if (ev[i].token_id >= 0 && r->num_tokens < UTIL_MAX_TOKENS) r->tokens[r->num_tokens++] = ev[i].token_id;
    if (ev[i].num_top_logprobs > 0) ++r->top_logprobs_seen;
    if (ev[i].text_len > 0 && r->text_len + ev[i].text_len < UTIL_MAX_TEXT) {
      memcpy(r->text + r->text_len, text + ev[i].text_offset, ev[i].text_len);
      r->text_len += ev[i].text_len;
      r->text[r->text_len] = '\0';
    }
    if (ev[i].finish_reason != PHOTON_FINISH_NONE) {
      ++r->num_finish_events;
      r->finish = ev[i].finish_reason;
      r->stop_string_index = ev[i].stop_string_index;
    }
  }
  return (int)got;
}

static inline int util_poll(photon_engine* e, collected* c, int n) { return util_poll_wait(e, c, n, -1); }

static inline int util_all_finished(const collected* c, int n) {
  int i;
  for (i = 0; i < n; ++i) {
    if (c[i].num_finish_events == 0) return 0;
  }
  return 1;
}

/* Steps and polls until every request in c[0..n) has finished (at most
 * max_steps steps). Returns 1 when all finished. */
static inline int util_run(photon_engine* e, collected* c, int n, int max_steps) {
  int steps = 0;
  while (!util_all_finished(c, n) && steps < max_steps) {
    photon_status st = photon_engine_step(NULL, e);
    if (st != PHOTON_OK) {
      CHECK_STATUS(st, PHOTON_OK);
      return 0;
    }
    ++steps;
    if (util_poll(e, c, n) < 0) return 0;
  }
  while (util_poll(e, c, n) > 0) {
  }
  return util_all_finished(c, n);
}

#endif /* PHOTON_CAPI_ENGINE_UTIL_H */
