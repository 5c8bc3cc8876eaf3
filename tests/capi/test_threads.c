/* Many threads submitting and cancelling through the C API while the main
 * thread steps and another thread polls (run under ThreadSanitizer by
 * scripts/test.sh). Every request must end with exactly one finish event,
 * after all of its tokens: LENGTH with exactly max_tokens tokens, or
 * CANCELLED with fewer. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <pthread.h>
#include <time.h>

#include "engine_util.h"

#define SUBMITTERS 4
#define PER_THREAD 8
#define TOTAL (SUBMITTERS * PER_THREAD)

static const int32_t prompt[] = {1, 317, 269, 368, 302, 382, 276, 329}; /* "Lily and Ben were ..." */

typedef struct submitter {
  photon_engine* engine;
  int index;
  uint64_t ids[PER_THREAD];
  int32_t max_tokens[PER_THREAD];
  int cancelled[PER_THREAD];
  int failures;
} submitter;

static pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
static int g_submitters_done = 0;
static int g_polling_done = 0;

static void* submit_and_cancel(void* arg) {
  submitter* s = (submitter*)arg;
  photon_request_params p;
  int i;
  photon_request_params_init(&p, sizeof p);
  p.ignore_eos = true;
  p.use_seed = true;
  for (i = 0; i < PER_THREAD; ++i) {
    p.seed = (uint64_t)(s->index * 100 + i);
    p.max_tokens = 3 + (s->index + i) % 6;
    s->max_tokens[i] = p.max_tokens;
    if (photon_engine_submit_tokens(&s->ids[i], s->engine, prompt, sizeof prompt / sizeof prompt[0], &p) !=
        PHOTON_OK) {
      ++s->failures;
      continue;
    }
    /* Cancel every third request: some before their first step, some while running. */
    s->cancelled[i] = i % 3 == 1;
    if (s->cancelled[i] && photon_engine_cancel(s->engine, s->ids[i]) != PHOTON_OK) ++s->failures;
  }
  pthread_mutex_lock(&g_mutex);
  ++g_submitters_done;
  pthread_mutex_unlock(&g_mutex);
  return NULL;
}

typedef struct poller {
  photon_engine* engine;
  collected records[TOTAL];
  int num_records;
  int unknown_ids;
} poller;

static void* poll_events(void* arg) {
  poller* p = (poller*)arg;
  photon_event ev[8];
  char text[2048];
  for (;;) {
    size_t n = 0, i;
    int done;
    pthread_mutex_lock(&g_mutex);
    done = g_polling_done;
    pthread_mutex_unlock(&g_mutex);
    if (photon_engine_poll(&n, p->engine, ev, sizeof ev[0], 8, text, sizeof text, NULL, 0) != PHOTON_OK) break;
    for (i = 0; i < n; ++i) {
      collected* r = util_find(p->records, p->num_records, ev[i].request_id);
      if (r == NULL) {
        if (p->num_records == TOTAL) {
          ++p->unknown_ids;
          continue;
        }
        r = &p->records[p->num_records++];
        r->id = ev[i].request_id;
      }
      if (r->num_finish_events > 0) r->bad_order = 1;
      ++r->num_events;
      if (ev[i].token_id >= 0) ++r->num_tokens;
      if (ev[i].finish_reason != PHOTON_FINISH_NONE) {
        ++r->num_finish_events;
        r->finish = ev[i].finish_reason;
      }
    }
    if (done && n == 0) break;
    if (n == 0) {
      struct timespec pause = {0, 50000};
      nanosleep(&pause, NULL);
    }
  }
  return NULL;
}

static void test_submit_cancel_step_poll(void) {
  photon_engine* e = util_open_stories(128);
  submitter subs[SUBMITTERS];
  pthread_t sub_threads[SUBMITTERS];
  pthread_t poll_thread;
  static poller pol;
  int i, j, steps = 0;
  REQUIRE(e != NULL);
  memset(subs, 0, sizeof subs);
  memset(&pol, 0, sizeof pol);
  pol.engine = e;
  REQUIRE(pthread_create(&poll_thread, NULL, poll_events, &pol) == 0);
  for (i = 0; i < SUBMITTERS; ++i) {
    subs[i].engine = e;
    subs[i].index = i;
    REQUIRE(pthread_create(&sub_threads[i], NULL, submit_and_cancel, &subs[i]) == 0);
  }
  /* The driver: step until every submitter is done and no work is left;
   * at most 10000 steps that ran tokens (a generous bound: the requests need
   * under 300), sleeping 50 us after an empty one. */
  for (;;) {
    int submitters_done;
    bool work = true;
    photon_step_stats stats;
    stats.struct_size = sizeof stats;
    CHECK_STATUS(photon_engine_step(&stats, e), PHOTON_OK);
    if (stats.tokens > 0) {
      ++steps;
    } else {
      struct timespec pause = {0, 50000};
      nanosleep(&pause, NULL);
    }
    pthread_mutex_lock(&g_mutex);
    submitters_done = g_submitters_done;
    pthread_mutex_unlock(&g_mutex);
    CHECK_STATUS(photon_engine_has_work(&work, e), PHOTON_OK);
    if ((submitters_done == SUBMITTERS && !work) || steps > 10000) break;
  }
  for (i = 0; i < SUBMITTERS; ++i) pthread_join(sub_threads[i], NULL);
  pthread_mutex_lock(&g_mutex);
  g_polling_done = 1;
  pthread_mutex_unlock(&g_mutex);
  pthread_join(poll_thread, NULL);

  CHECK(steps <= 10000);
  CHECK(pol.unknown_ids == 0);
  CHECK(pol.num_records == TOTAL);
  for (i = 0; i < SUBMITTERS; ++i) {
    CHECK(subs[i].failures == 0);
    for (j = 0; j < PER_THREAD; ++j) {
      const collected* r = util_find(pol.records, pol.num_records, subs[i].ids[j]);
      CHECK(r != NULL);
      if (r == NULL) continue;
      CHECK(r->num_finish_events == 1 && !r->bad_order);
      if (subs[i].cancelled[j]) {
        CHECK(r->finish == PHOTON_FINISH_CANCELLED || r->finish == PHOTON_FINISH_LENGTH);
        CHECK(r->num_tokens <= subs[i].max_tokens[j]);
      } else {
        CHECK(r->finish == PHOTON_FINISH_LENGTH);
        CHECK(r->num_tokens == subs[i].max_tokens[j]);
      }
    }
  }
  photon_engine_destroy(e);
}

int main(void) {
  RUN(test_submit_cancel_step_poll);
  return capi_summary();
}
