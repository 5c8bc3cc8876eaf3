/* photon from plain C: open a model folder, submit several text prompts,
 * drive the engine (step) and collect the streamed events (poll) into
 * caller-owned buffers, then print each request's token ids and text.
 *
 *   make PKG_CONFIG_PATH=<prefix>/lib/pkgconfig
 *   ./photon-c-example models/stories260K [cpu|cuda|auto]
 *
 * Output, one block per request in submission order:
 *   request 0 tokens: 432 383 286 ...
 *   request 0 finish: length
 *   request 0 text: , there was a little girl named Lily. ...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <photon/photon.h>

#define NUM_PROMPTS 3
#define MAX_NEW_TOKENS 64

static const char* const kPrompts[NUM_PROMPTS] = {
    "Once upon a time",
    "Lily and Ben were best friends. One day, they",
    "Tom saw a cat named Zo\xc3\xab \xf0\x9f\x90\xb1 in the garden.",
};

/* What one request has produced so far. */
struct output {
  uint64_t id;
  int32_t tokens[MAX_NEW_TOKENS];
  int num_tokens;
  char text[4096];
  size_t text_len;
  photon_finish_reason finish;
};

static int fail(const char* what, photon_status st) {
  fprintf(stderr, "%s failed: %s: %s\n", what, photon_status_string(st), photon_last_error_message());
  return 1;
}

static const char* finish_name(photon_finish_reason r) {
  switch (r) {
    case PHOTON_FINISH_STOP: return "stop";
    case PHOTON_FINISH_LENGTH: return "length";
    case PHOTON_FINISH_CANCELLED: return "cancelled";
    case PHOTON_FINISH_ERROR: return "error";
    default: return "none";
  }
}

int main(int argc, char** argv) {
  const char* model_dir = argc > 1 ? argv[1] : "models/stories260K";
  const char* backend = argc > 2 ? argv[2] : "cpu";
  photon_engine* engine = NULL;
  photon_engine_params engine_params;
  photon_request_params request;
  struct output out[NUM_PROMPTS];
  photon_event events[32];
  char text[8192];
  int finished = 0, i;
  photon_status st;

  printf("libphoton %s (header %s)\n", photon_version_string(), PHOTON_VERSION_STRING);

  /* Params structs: init fills the defaults for this header's size. */
  photon_engine_params_init(&engine_params, sizeof engine_params);
  engine_params.backend = strcmp(backend, "cuda") == 0   ? PHOTON_BACKEND_CUDA
                           : strcmp(backend, "auto") == 0 ? PHOTON_BACKEND_AUTO
                                                          : PHOTON_BACKEND_CPU;
  engine_params.kv_blocks = 64;
  st = photon_engine_open(&engine, model_dir, &engine_params);
  if (st != PHOTON_OK) return fail("photon_engine_open", st);

  photon_request_params_init(&request, sizeof request);
  request.temperature = 0.0f; /* greedy */
  request.max_tokens = MAX_NEW_TOKENS;
  memset(out, 0, sizeof out);
  for (i = 0; i < NUM_PROMPTS; ++i) {
    st = photon_engine_submit_text(&out[i].id, engine, kPrompts[i], strlen(kPrompts[i]), NULL, &request);
    if (st != PHOTON_OK) {
      photon_engine_destroy(engine);
      return fail("photon_engine_submit_text", st);
    }
  }

  /* This thread is the driver: one step, then drain the events. */
  while (finished < NUM_PROMPTS) {
    size_t n = 0, k;
    st = photon_engine_step(NULL, engine);
    if (st != PHOTON_OK) break;
    st = photon_engine_poll(&n, engine, events, sizeof events[0], 32, text, sizeof text, NULL, 0);
    if (st != PHOTON_OK) break;
    for (k = 0; k < n; ++k) {
      const photon_event* ev = &events[k];
      struct output* o = NULL;
      for (i = 0; i < NUM_PROMPTS; ++i) {
        if (out[i].id == ev->request_id) o = &out[i];
      }
      if (o == NULL) continue;
      if (ev->token_id >= 0 && o->num_tokens < MAX_NEW_TOKENS) o->tokens[o->num_tokens++] = ev->token_id;
      if (ev->text_len > 0 && o->text_len + ev->text_len < sizeof o->text) {
        memcpy(o->text + o->text_len, text + ev->text_offset, ev->text_len);
        o->text_len += ev->text_len;
      }
      if (ev->finish_reason != PHOTON_FINISH_NONE) {
        o->finish = ev->finish_reason;
        ++finished;
      }
    }
  }
  if (st != PHOTON_OK) {
    photon_engine_destroy(engine);
    return fail("photon_engine_step/poll", st);
  }

  for (i = 0; i < NUM_PROMPTS; ++i) {
    int k;
    printf("request %d tokens:", i);
    for (k = 0; k < out[i].num_tokens; ++k) printf(" %d", (int)out[i].tokens[k]);
    printf("\nrequest %d finish: %s\n", i, finish_name(out[i].finish));
    printf("request %d text: %.*s\n", i, (int)out[i].text_len, out[i].text);
  }

  /* The blocking form: one call returns the finished request (the first prompt again). */
  {
    photon_completion* done = NULL;
    size_t n;
    int same;
    st = photon_engine_generate_text(&done, engine, kPrompts[0], strlen(kPrompts[0]), NULL, &request);
    if (st != PHOTON_OK) {
      photon_engine_destroy(engine);
      return fail("photon_engine_generate_text", st);
    }
    n = photon_completion_num_tokens(done);
    same = n == (size_t)out[0].num_tokens &&
           memcmp(photon_completion_tokens(done), out[0].tokens, n * sizeof(int32_t)) == 0;
    printf("generate: %zu tokens (%s), same as request 0: %s\n", n,
           finish_name(photon_completion_finish_reason(done)), same ? "yes" : "no");
    photon_completion_destroy(done);
  }
  photon_engine_destroy(engine);
  return 0;
}
