/* photon_engine_*: every function on stories260K (CPU), with the documented
 * status and message for NULL and invalid arguments. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, symlink */
#include <stdlib.h>
#include <unistd.h>

#include "engine_util.h"

static const int32_t once_ids[] = {1, 403, 407, 261, 378}; /* "Once upon a time" */

static void test_open_errors(void) {
  char dir[1024];
  photon_engine* e = (photon_engine*)&e;
  photon_engine_params p;
  unsigned char raw[sizeof(photon_engine_params) + 8];
  photon_engine_params* big = (photon_engine_params*)(void*)raw;

  CHECK_STATUS(photon_engine_open(NULL, "x", NULL), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("photon_engine_open: out_engine is NULL");
  CHECK_STATUS(photon_engine_open(&e, NULL, NULL), PHOTON_E_INVALID_ARGUMENT);
  CHECK(e == NULL);
  CHECK_MESSAGE_HAS("model_dir is NULL");
  CHECK_STATUS(photon_engine_open(&e, "/nonexistent/photon/model", NULL), PHOTON_E_FILE_NOT_FOUND);
  CHECK(e == NULL);

  photon_engine_params_init(&p, sizeof p);
  p.backend = (photon_backend)7;
  CHECK_STATUS(photon_engine_open(&e, capi_stories_dir(dir, sizeof dir), &p), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("params->backend = 7 is not a photon_backend value");
  photon_engine_params_init(&p, sizeof p);
  p.backend = PHOTON_BACKEND_CPU;
  p.block_size = -3;
  CHECK_STATUS(photon_engine_open(&e, dir, &p), PHOTON_E_INVALID_ARGUMENT);
  CHECK(photon_last_error_message()[0] != '\0');

  /* A newer photon.h's struct with a field set that this library lacks. */
  memset(raw, 0, sizeof raw);
  photon_engine_params_init(big, sizeof raw);
  big->backend = PHOTON_BACKEND_CPU;
  raw[sizeof(photon_engine_params) + 2] = 7;
  CHECK_STATUS(photon_engine_open(&e, dir, big), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("photon_engine_params has a non-zero byte");
  CHECK(e == NULL);

  photon_engine_params_init(&p, sizeof p);
  p.backend = PHOTON_BACKEND_CPU;
  p.weights = (photon_weights)5;
  CHECK_STATUS(photon_engine_open(&e, dir, &p), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("params->weights = 5 is not a photon_weights value");
  p.weights = PHOTON_WEIGHTS_INT8;
  p.int8_group_size = 0;
  CHECK_STATUS(photon_engine_open(&e, dir, &p), PHOTON_E_INVALID_ARGUMENT);
  CHECK(e == NULL);
  photon_engine_params_init(&p, sizeof p);
  p.backend = PHOTON_BACKEND_CPU;
  p.step_overlap = (photon_step_overlap)3;
  CHECK_STATUS(photon_engine_open(&e, dir, &p), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("params->step_overlap = 3 is not a photon_step_overlap value");
  CHECK(e == NULL);
  photon_engine_destroy(NULL); /* a no-op */
}

static void test_info_and_tokenizer(void) {
  photon_engine* e = util_open_stories(64);
  photon_engine_info info;
  int32_t eos[4];
  size_t n = 0;
  const photon_tokenizer* t = NULL;
  int32_t ids[8];
  REQUIRE(e != NULL);
  info.struct_size = sizeof info;
  CHECK_STATUS(photon_engine_get_info(&info, e), PHOTON_OK);
  CHECK(info.backend == PHOTON_BACKEND_CPU);
  CHECK(info.vocab_size == 512);
  CHECK(info.max_model_len == 512);
  CHECK(info.block_size == 16);
  CHECK(info.kv_capacity_tokens == 64 * 16);
  CHECK(info.has_tokenizer);
  CHECK_STATUS(photon_engine_get_info(NULL, e), PHOTON_E_INVALID_ARGUMENT);
  CHECK_STATUS(photon_engine_get_info(&info, NULL), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("engine is NULL");

  CHECK_STATUS(photon_engine_eos_token_ids(eos, 4, &n, e), PHOTON_OK);
  CHECK(n == 1 && eos[0] == 2);
  CHECK_STATUS(photon_engine_eos_token_ids(eos, 0, &n, e), PHOTON_E_BUFFER_TOO_SMALL);
  CHECK_STATUS(photon_engine_eos_token_ids(NULL, 0, &n, e), PHOTON_E_BUFFER_TOO_SMALL);
  CHECK(n == 1);

  CHECK_STATUS(photon_engine_get_tokenizer(&t, e), PHOTON_OK);
  REQUIRE(t != NULL);
  CHECK_STATUS(photon_tokenizer_encode(ids, 8, &n, t, "Once upon a time", 16, NULL), PHOTON_OK);
  CHECK(n == 5 && memcmp(ids, once_ids, sizeof once_ids) == 0);
  /* Destroying the engine's tokenizer is refused silently (the engine owns it). */
  photon_tokenizer_destroy((photon_tokenizer*)t);
  CHECK_STATUS(photon_tokenizer_encode(ids, 8, &n, t, "Once", 4, NULL), PHOTON_OK);
  CHECK_STATUS(photon_engine_get_tokenizer(NULL, e), PHOTON_E_INVALID_ARGUMENT);
  photon_engine_destroy(e);
}

static void test_submit_errors(void) {
  photon_engine* e = util_open_stories(64);
  photon_request_params p;
  uint64_t id = 77;
  photon_str stops[2];
  photon_chat_message m;
  REQUIRE(e != NULL);
  photon_request_params_init(&p, sizeof p);

  CHECK_STATUS(photon_engine_submit_tokens(NULL, e, once_ids, 5, NULL), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("photon_engine_submit_tokens: out_request_id is NULL");
  CHECK_STATUS(photon_engine_submit_tokens(&id, NULL, once_ids, 5, NULL), PHOTON_E_INVALID_ARGUMENT);
  CHECK(id == 0);
  CHECK_STATUS(photon_engine_submit_tokens(&id, e, NULL, 5, NULL), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("prompt_ids is NULL but num_prompt_ids is 5");
  CHECK_STATUS(photon_engine_submit_tokens(&id, e, once_ids, 0, NULL), PHOTON_E_INVALID_ARGUMENT);
  {
    const int32_t bad[] = {1, 9999};
    CHECK_STATUS(photon_engine_submit_tokens(&id, e, bad, 2, NULL), PHOTON_E_OUT_OF_RANGE);
  }
  p.temperature = -1.0f;
  CHECK_STATUS(photon_engine_submit_tokens(&id, e, once_ids, 5, &p), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("temperature");
  photon_request_params_init(&p, sizeof p);
  p.num_stop_token_ids = 2;
  CHECK_STATUS(photon_engine_submit_tokens(&id, e, once_ids, 5, &p), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("params->stop_token_ids is NULL but num_stop_token_ids is 2");
  photon_request_params_init(&p, sizeof p);
  stops[0].data = "x";
  stops[0].len = 1;
  stops[1].data = "";
  stops[1].len = 0;
  p.stop_strings = stops;
  p.num_stop_strings = 2;
  CHECK_STATUS(photon_engine_submit_tokens(&id, e, once_ids, 5, &p), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("params->stop_strings[1] is empty");
  photon_request_params_init(&p, sizeof p);
  p.max_tokens = 100000;
  CHECK_STATUS(photon_engine_submit_tokens(&id, e, once_ids, 5, &p), PHOTON_E_CAPACITY_EXCEEDED);

  CHECK_STATUS(photon_engine_submit_text(&id, e, NULL, 3, NULL, NULL), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("prompt is NULL but its length is 3");
  photon_chat_message_init(&m, sizeof m);
  m.role.data = "user";
  m.role.len = 4;
  m.content.data = "Hi";
  m.content.len = 2;
  CHECK_STATUS(photon_engine_submit_chat(&id, e, &m, 1, NULL, NULL), PHOTON_E_TEMPLATE_ERROR);
  CHECK_STATUS(photon_engine_submit_chat(&id, e, &m, 0, NULL, NULL), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("num_messages is 0");

  CHECK_STATUS(photon_engine_cancel(e, 123456), PHOTON_E_UNKNOWN_REQUEST);
  CHECK_STATUS(photon_engine_cancel(NULL, 1), PHOTON_E_INVALID_ARGUMENT);
  photon_engine_destroy(e);
}

static void test_generate_length_logprobs_metrics(void) {
  photon_engine* e = util_open_stories(64);
  photon_request_params p;
  collected c[2];
  photon_step_stats stats;
  photon_engine_metrics m;
  bool work = false;
  REQUIRE(e != NULL);
  memset(c, 0, sizeof c);
  photon_request_params_init(&p, sizeof p);
  p.temperature = 0.0f;
  p.max_tokens = 7;
  p.num_top_logprobs = 3;
  CHECK_STATUS(photon_engine_submit_tokens(&c[0].id, e, once_ids, 5, &p), PHOTON_OK);
  CHECK(c[0].id != 0);
  p.num_top_logprobs = 0;
  p.max_tokens = 3;
  CHECK_STATUS(photon_engine_submit_text(&c[1].id, e, "Once upon a time", 16, NULL, &p), PHOTON_OK);
  CHECK(c[1].id != c[0].id);
  CHECK_STATUS(photon_engine_has_work(&work, e), PHOTON_OK);
  CHECK(work);

  stats.struct_size = sizeof stats;
  CHECK_STATUS(photon_engine_step(&stats, e), PHOTON_OK);
  CHECK(stats.seqs == 2 && stats.tokens == 10 && stats.sampled == 2);
  stats.struct_size = 1;
  CHECK_STATUS(photon_engine_step(&stats, e), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("out_stats->struct_size = 1");
  REQUIRE(util_run(e, c, 2, 50));

  CHECK(c[0].num_tokens == 7 && c[0].finish == PHOTON_FINISH_LENGTH && c[0].num_finish_events == 1);
  CHECK(c[0].top_logprobs_seen == 7);
  CHECK(c[1].num_tokens == 3 && c[1].finish == PHOTON_FINISH_LENGTH);
  /* Same prompt, greedy: the same first tokens and text. */
  CHECK(memcmp(c[0].tokens, c[1].tokens, 3 * sizeof(int32_t)) == 0);
  CHECK(strncmp(c[0].text, c[1].text, c[1].text_len) == 0 && c[1].text_len > 0);
  CHECK(!c[0].bad_order && !c[1].bad_order);

  CHECK_STATUS(photon_engine_has_work(&work, e), PHOTON_OK);
  CHECK(!work);
  CHECK_STATUS(photon_engine_has_work(NULL, e), PHOTON_E_INVALID_ARGUMENT);
  m.struct_size = sizeof m;
  CHECK_STATUS(photon_engine_get_metrics(&m, e), PHOTON_OK);
  CHECK(m.running == 0 && m.waiting == 0 && m.kv_blocks_total == 64 && m.block_size == 16);
  CHECK(m.tokens_generated == 10);
  CHECK(m.steps >= 7);
  CHECK_STATUS(photon_engine_get_metrics(NULL, e), PHOTON_E_INVALID_ARGUMENT);
  photon_engine_destroy(e);
}

static void test_stop_conditions(void) {
  photon_engine* e = util_open_stories(64);
  photon_request_params p;
  collected c[3];
  int32_t stop_id;
  photon_str stop;
  REQUIRE(e != NULL);
  memset(c, 0, sizeof c);
  photon_request_params_init(&p, sizeof p);
  p.temperature = 0.0f;
  p.max_tokens = 20;
  /* Reference run: 20 greedy tokens. */
  CHECK_STATUS(photon_engine_submit_tokens(&c[0].id, e, once_ids, 5, &p), PHOTON_OK);
  REQUIRE(util_run(e, c, 1, 100));
  REQUIRE(c[0].num_tokens == 20);

  /* A stop token: the 4th greedy token ends the request (it is the last token). */
  stop_id = c[0].tokens[3];
  p.stop_token_ids = &stop_id;
  p.num_stop_token_ids = 1;
  CHECK_STATUS(photon_engine_submit_tokens(&c[1].id, e, once_ids, 5, &p), PHOTON_OK);
  /* A stop string from the reference text: text stops right before it. */
  p.stop_token_ids = NULL;
  p.num_stop_token_ids = 0;
  stop.data = " girl";
  stop.len = 5;
  REQUIRE(strstr(c[0].text, " girl") != NULL);
  p.stop_strings = &stop;
  p.num_stop_strings = 1;
  CHECK_STATUS(photon_engine_submit_tokens(&c[2].id, e, once_ids, 5, &p), PHOTON_OK);
  REQUIRE(util_run(e, c + 1, 2, 100));

  CHECK(c[0].stop_string_index == -1);
  CHECK(c[1].finish == PHOTON_FINISH_STOP);
  CHECK(c[1].num_tokens <= 4 && c[1].tokens[c[1].num_tokens - 1] == stop_id);
  CHECK(c[1].stop_string_index == -1); /* a stop token, not a string */
  CHECK(c[2].finish == PHOTON_FINISH_STOP);
  CHECK(c[2].stop_string_index == 0);
  CHECK(c[2].num_finish_events == 1 && !c[2].bad_order);
  CHECK(strstr(c[2].text, "girl") == NULL);
  CHECK(c[2].text_len == (size_t)(strstr(c[0].text, " girl") - c[0].text));
  CHECK(strncmp(c[2].text, c[0].text, c[2].text_len) == 0);
  photon_engine_destroy(e);
}

static void test_cancel(void) {
  photon_engine* e = util_open_stories(64);
  photon_request_params p;
  collected c[1];
  REQUIRE(e != NULL);
  memset(c, 0, sizeof c);
  photon_request_params_init(&p, sizeof p);
  p.max_tokens = 200;
  CHECK_STATUS(photon_engine_submit_tokens(&c[0].id, e, once_ids, 5, &p), PHOTON_OK);
  CHECK_STATUS(photon_engine_step(NULL, e), PHOTON_OK);
  CHECK_STATUS(photon_engine_cancel(e, c[0].id), PHOTON_OK);
  REQUIRE(util_run(e, c, 1, 10));
  CHECK(c[0].finish == PHOTON_FINISH_CANCELLED);
  CHECK(c[0].num_tokens < 200);
  /* Cancelling a finished request is not an error. */
  CHECK_STATUS(photon_engine_cancel(e, c[0].id), PHOTON_OK);
  photon_engine_destroy(e);
}

static void test_poll_buffers(void) {
  photon_engine* e = util_open_stories(64);
  photon_request_params p;
  uint64_t id = 0;
  photon_event ev[4];
  char text[64];
  photon_token_logprob tops[8];
  size_t n = 99;
  REQUIRE(e != NULL);
  photon_request_params_init(&p, sizeof p);
  p.temperature = 0.0f;
  p.max_tokens = 2;
  p.num_top_logprobs = 5;

  CHECK_STATUS(photon_engine_poll(&n, e, ev, sizeof ev[0], 4, text, sizeof text, tops, 8), PHOTON_OK);
  CHECK(n == 0); /* nothing pending */
  CHECK_STATUS(photon_engine_submit_tokens(&id, e, once_ids, 5, &p), PHOTON_OK);
  CHECK_STATUS(photon_engine_step(NULL, e), PHOTON_OK);

  /* The top-5 logprobs do not fit in 2 entries: BUFFER_TOO_SMALL, with the
   * sizes in events[0], and the event stays pending. */
  memset(ev, 0, sizeof ev);
  CHECK_STATUS(photon_engine_poll(&n, e, ev, sizeof ev[0], 4, text, sizeof text, tops, 2), PHOTON_E_BUFFER_TOO_SMALL);
  CHECK(n == 0);
  CHECK(ev[0].request_id == id && ev[0].num_top_logprobs == 5);
  CHECK_MESSAGE_HAS("5 top_logprobs entries");
  /* Its text ("," after "Once upon a time") does not fit in no buffer either. */
  memset(ev, 0, sizeof ev);
  CHECK_STATUS(photon_engine_poll(&n, e, ev, sizeof ev[0], 4, NULL, 0, tops, 8), PHOTON_E_BUFFER_TOO_SMALL);
  CHECK(n == 0 && ev[0].text_len == 1);

  /* An older photon_event (up to finish_reason and its padding) gets exactly its bytes. */
  {
    size_t old = offsetof(photon_event, text_offset);
    unsigned char raw[2 * sizeof(photon_event)];
    photon_event first;
    memset(raw, 0xCD, sizeof raw);
    CHECK_STATUS(photon_engine_poll(&n, e, (photon_event*)(void*)raw, old, 2, text, sizeof text, tops, 8), PHOTON_OK);
    REQUIRE(n == 1);
    memcpy(&first, raw, old);
    CHECK(first.request_id == id && first.token_id == 432 && first.finish_reason == PHOTON_FINISH_NONE);
    CHECK(raw[old] == 0xCD);
    /* Top logprobs are sorted, most likely first, and the chosen greedy token leads. */
    CHECK(tops[0].token_id == 432 && tops[0].logprob >= tops[1].logprob && tops[1].logprob >= tops[4].logprob);
  }
  /* Bad arguments. */
  CHECK_STATUS(photon_engine_poll(NULL, e, ev, sizeof ev[0], 4, text, 64, tops, 8), PHOTON_E_INVALID_ARGUMENT);
  CHECK_STATUS(photon_engine_poll(&n, NULL, ev, sizeof ev[0], 4, text, 64, tops, 8), PHOTON_E_INVALID_ARGUMENT);
  CHECK_STATUS(photon_engine_poll(&n, e, NULL, sizeof ev[0], 4, text, 64, tops, 8), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("events is NULL");
  CHECK_STATUS(photon_engine_poll(&n, e, ev, sizeof ev[0], 0, text, 64, tops, 8), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("max_events is 0");
  CHECK_STATUS(photon_engine_poll(&n, e, ev, 5, 4, text, 64, tops, 8), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("event_size = 5 is not a size of photon_event");
  CHECK_STATUS(photon_engine_poll(&n, e, ev, sizeof ev[0], 4, NULL, 64, tops, 8), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("text is NULL but text_capacity is 64");
  CHECK_STATUS(photon_engine_poll(&n, e, ev, sizeof ev[0], 4, text, 64, NULL, 8), PHOTON_E_INVALID_ARGUMENT);
  photon_engine_destroy(e);
}

static void test_older_request_params(void) {
  /* A photon_request_params that ends before num_top_logprobs: detokenize
   * and skip_special_tokens take their defaults (text on), whatever lies
   * beyond the caller's bytes. */
  photon_engine* e = util_open_stories(64);
  unsigned char raw[sizeof(photon_request_params)];
  photon_request_params* p = (photon_request_params*)(void*)raw;
  collected c[1];
  REQUIRE(e != NULL);
  memset(c, 0, sizeof c);
  memset(raw, 0, sizeof raw); /* detokenize = false beyond the size */
  photon_request_params_init(p, offsetof(photon_request_params, num_top_logprobs));
  p->temperature = 0.0f;
  p->max_tokens = 4;
  CHECK_STATUS(photon_engine_submit_tokens(&c[0].id, e, once_ids, 5, p), PHOTON_OK);
  REQUIRE(util_run(e, c, 1, 20));
  CHECK(c[0].num_tokens == 4 && c[0].text_len > 0);
  photon_engine_destroy(e);
}

static void test_loop(void) {
  photon_engine* e = util_open_stories(64);
  photon_request_params p;
  collected c[1];
  int spins = 0;
  REQUIRE(e != NULL);
  memset(c, 0, sizeof c);
  photon_request_params_init(&p, sizeof p);
  p.max_tokens = 5;
  CHECK_STATUS(photon_engine_start_loop(e), PHOTON_OK);
  CHECK_STATUS(photon_engine_start_loop(e), PHOTON_E_INVALID_STATE);
  CHECK_STATUS(photon_engine_submit_tokens(&c[0].id, e, once_ids, 5, &p), PHOTON_OK);
  /* The loop steps; this thread sleeps in poll_wait until events come. */
  while (!util_all_finished(c, 1) && spins < 1000) {
    if (util_poll_wait(e, c, 1, 100) < 0) break;
    ++spins;
  }
  CHECK(c[0].num_tokens == 5 && c[0].finish == PHOTON_FINISH_LENGTH);
  CHECK(spins < 1000);
  CHECK_STATUS(photon_engine_stop_loop(e), PHOTON_OK);
  CHECK_STATUS(photon_engine_stop_loop(e), PHOTON_OK);
  CHECK_STATUS(photon_engine_start_loop(NULL), PHOTON_E_INVALID_ARGUMENT);
  {
    /* Nothing pending and nothing running: poll_wait returns 0 events after its timeout. */
    photon_event ev[2];
    size_t n = 7;
    CHECK_STATUS(photon_engine_poll_wait(&n, e, ev, sizeof ev[0], 2, NULL, 0, NULL, 0, 20), PHOTON_OK);
    CHECK(n == 0);
    CHECK_STATUS(photon_engine_poll_wait(&n, e, ev, sizeof ev[0], 0, NULL, 0, NULL, 0, 20), PHOTON_E_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("photon_engine_poll_wait: max_events is 0");
  }
  photon_engine_destroy(e);
}

static void test_int8_weights(void) {
  /* int8 linear layers on the CPU (and the LM head too): the engine opens and
   * generates; the first greedy token of "Once upon a time" (a 3.5-logit
   * margin) is unchanged. */
  const photon_weights kinds[2] = {PHOTON_WEIGHTS_INT8, PHOTON_WEIGHTS_INT8_LM_HEAD};
  int k;
  for (k = 0; k < 2; ++k) {
    char dir[1024];
    photon_engine* e = NULL;
    photon_engine_params p;
    photon_request_params rp;
    collected c[1];
    photon_engine_params_init(&p, sizeof p);
    p.backend = PHOTON_BACKEND_CPU;
    p.kv_blocks = 16;
    p.weights = kinds[k];
    p.int8_group_size = 32;
    REQUIRE_STATUS(photon_engine_open(&e, capi_stories_dir(dir, sizeof dir), &p), PHOTON_OK);
    memset(c, 0, sizeof c);
    photon_request_params_init(&rp, sizeof rp);
    rp.temperature = 0.0f;
    rp.max_tokens = 4;
    CHECK_STATUS(photon_engine_submit_tokens(&c[0].id, e, once_ids, 5, &rp), PHOTON_OK);
    REQUIRE(util_run(e, c, 1, 20));
    CHECK(c[0].num_tokens == 4 && c[0].tokens[0] == 432);
    photon_engine_destroy(e);
  }
}

static void test_without_tokenizer(void) {
  char dir[1024];
  photon_engine* e = NULL;
  photon_engine_params p;
  photon_engine_info info;
  const photon_tokenizer* t = NULL;
  uint64_t id = 0;
  photon_request_params rp;
  photon_str stop;
  collected c[1];
  static const int32_t prompt[] = {802, 2, 239, 451, 327}; /* llama3-tiny reference case1 */
  photon_engine_params_init(&p, sizeof p);
  p.backend = PHOTON_BACKEND_CPU;
  p.kv_blocks = 16;
  REQUIRE_STATUS(photon_engine_open(&e, capi_data_path(dir, sizeof dir, "golden/llama3-tiny"), &p), PHOTON_OK);
  info.struct_size = sizeof info;
  CHECK_STATUS(photon_engine_get_info(&info, e), PHOTON_OK);
  CHECK(!info.has_tokenizer && info.vocab_size == 1024);
  CHECK_STATUS(photon_engine_get_tokenizer(&t, e), PHOTON_E_INVALID_STATE);
  CHECK(t == NULL);
  CHECK_MESSAGE_HAS("the engine has no tokenizer");
  CHECK_STATUS(photon_engine_submit_text(&id, e, "hi", 2, NULL, NULL), PHOTON_E_INVALID_STATE);
  photon_request_params_init(&rp, sizeof rp);
  stop.data = "x";
  stop.len = 1;
  rp.stop_strings = &stop;
  rp.num_stop_strings = 1;
  CHECK_STATUS(photon_engine_submit_tokens(&id, e, prompt, 5, &rp), PHOTON_E_INVALID_STATE);
  /* Token requests work, with empty text. */
  memset(c, 0, sizeof c);
  photon_request_params_init(&rp, sizeof rp);
  rp.temperature = 0.0f;
  rp.max_tokens = 4;
  rp.ignore_eos = true;
  CHECK_STATUS(photon_engine_submit_tokens(&c[0].id, e, prompt, 5, &rp), PHOTON_OK);
  REQUIRE(util_run(e, c, 1, 20));
  CHECK(c[0].num_tokens == 4 && c[0].tokens[0] == 592 && c[0].text_len == 0);
  photon_engine_destroy(e);
}

/* A copy of stories260K (symlinks) whose tokenizer_config.json carries a
 * ChatML template with Qwen3's markers, so chats render and run on it. */
static int make_chat_model(char* dir, size_t n) {
  static const char* const files[] = {"config.json", "model.safetensors", "tokenizer.model"};
  char src[1024], path[1200], target[1200];
  FILE* f;
  size_t i;
  snprintf(dir, n, "%s", "/tmp/photon-capi-chat-XXXXXX");
  if (mkdtemp(dir) == NULL) return 0;
  capi_stories_dir(src, sizeof src);
  for (i = 0; i < sizeof files / sizeof files[0]; ++i) {
    snprintf(target, sizeof target, "%s/%s", src, files[i]);
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    if (symlink(target, path) != 0) return 0;
  }
  snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
  f = fopen(path, "w");
  if (f == NULL) return 0;
  fputs("{\"add_bos_token\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"unk_token\": \"<unk>\",\n"
        " \"chat_template\": \"{%- for m in messages %}<|im_start|>{{ m.role }}\\n{{ m.content }}<|im_end|>\\n"
        "{%- endfor %}{%- if add_generation_prompt %}<|im_start|>assistant\\n{%- if enable_thinking is defined and "
        "enable_thinking is false %}<think>\\n\\n</think>\\n\\n{%- endif %}{%- endif %}\"}\n", f);
  fclose(f);
  return 1;
}

static void remove_chat_model(const char* dir) {
  static const char* const files[] = {"config.json", "model.safetensors", "tokenizer.model", "tokenizer_config.json"};
  char path[1200];
  size_t i;
  for (i = 0; i < sizeof files / sizeof files[0]; ++i) {
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    remove(path);
  }
  remove(dir);
}

static void test_submit_chat(void) {
  char dir[256];
  char rendered[512];
  int32_t ids[128];
  size_t size = 0, n = 0;
  photon_engine* e = NULL;
  photon_engine_params ep;
  const photon_tokenizer* t = NULL;
  photon_tokenize_params tp;
  photon_chat_message m[2];
  photon_chat_params cp;
  photon_request_params p;
  collected c[2];
  REQUIRE(make_chat_model(dir, sizeof dir));
  photon_engine_params_init(&ep, sizeof ep);
  ep.backend = PHOTON_BACKEND_CPU;
  ep.kv_blocks = 64;
  CHECK_STATUS(photon_engine_open(&e, dir, &ep), PHOTON_OK);
  if (e == NULL) {
    remove_chat_model(dir);
    return;
  }
  photon_chat_message_init(&m[0], sizeof m[0]);
  m[0].role.data = "system";
  m[0].role.len = 6;
  m[0].content.data = "You tell stories.";
  m[0].content.len = 17;
  photon_chat_message_init(&m[1], sizeof m[1]);
  m[1].role.data = "user";
  m[1].role.len = 4;
  m[1].content.data = "Once upon a time";
  m[1].content.len = 16;
  photon_chat_params_init(&cp, sizeof cp);
  cp.enable_thinking = false;

  /* The chat as the tokenizer renders it, encoded without added special tokens... */
  CHECK_STATUS(photon_engine_get_tokenizer(&t, e), PHOTON_OK);
  CHECK_STATUS(photon_tokenizer_render_chat(rendered, sizeof rendered, &size, t, m, 2, &cp), PHOTON_OK);
  CHECK(strcmp(rendered, "<|im_start|>system\nYou tell stories.<|im_end|>\n<|im_start|>user\nOnce upon a time"
                         "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n") == 0);
  photon_tokenize_params_init(&tp, sizeof tp);
  tp.add_special_tokens = false;
  CHECK_STATUS(photon_tokenizer_encode(ids, 128, &n, t, rendered, size - 1, &tp), PHOTON_OK);

  /* ...generates what submit_chat generates. */
  memset(c, 0, sizeof c);
  photon_request_params_init(&p, sizeof p);
  p.temperature = 0.0f;
  p.max_tokens = 12;
  CHECK_STATUS(photon_engine_submit_chat(&c[0].id, e, m, 2, &cp, &p), PHOTON_OK);
  CHECK_STATUS(photon_engine_submit_tokens(&c[1].id, e, ids, n, &p), PHOTON_OK);
  REQUIRE(util_run(e, c, 2, 100));
  CHECK(c[0].num_tokens == 12 && c[1].num_tokens == 12);
  CHECK(memcmp(c[0].tokens, c[1].tokens, 12 * sizeof(int32_t)) == 0);
  CHECK(c[0].text_len > 0 && strcmp(c[0].text, c[1].text) == 0);
  photon_engine_destroy(e);
  remove_chat_model(dir);
}

/* photon_engine_generate_*: the blocking forms give what submit + poll give,
 * leave other requests' events to poll, work with the loop running, and
 * reject bad arguments with *out_completion NULL. */
static void test_blocking_generate(void) {
  photon_engine* e = util_open_stories(64);
  photon_request_params p;
  collected c[2];
  photon_completion* done = (photon_completion*)&done;
  photon_str text, err, stop;
  REQUIRE(e != NULL);
  memset(c, 0, sizeof c);
  photon_request_params_init(&p, sizeof p);
  p.temperature = 0.0f;
  p.max_tokens = 20;
  /* Reference through submit + poll. */
  CHECK_STATUS(photon_engine_submit_tokens(&c[0].id, e, once_ids, 5, &p), PHOTON_OK);
  REQUIRE(util_run(e, c, 1, 100));

  /* Another request in flight keeps reporting through poll. */
  CHECK_STATUS(photon_engine_submit_tokens(&c[1].id, e, once_ids, 5, &p), PHOTON_OK);
  CHECK_STATUS(photon_engine_generate_tokens(&done, e, once_ids, 5, &p), PHOTON_OK);
  REQUIRE(done != NULL);
  CHECK(photon_completion_num_tokens(done) == 20);
  CHECK(memcmp(photon_completion_tokens(done), c[0].tokens, 20 * sizeof(int32_t)) == 0);
  CHECK(photon_completion_logprobs(done) != NULL && photon_completion_logprobs(done)[0] <= 0.0f);
  text = photon_completion_text(done);
  CHECK(text.len == c[0].text_len && memcmp(text.data, c[0].text, text.len) == 0 && text.data[text.len] == '\0');
  CHECK(photon_completion_finish_reason(done) == PHOTON_FINISH_LENGTH);
  CHECK(photon_completion_stop_string_index(done) == -1);
  err = photon_completion_error(done);
  CHECK(err.len == 0 && err.data != NULL && err.data[0] == '\0');
  photon_completion_destroy(done);
  REQUIRE(util_run(e, c + 1, 1, 100));
  CHECK(c[1].num_tokens == 20 && memcmp(c[1].tokens, c[0].tokens, 20 * sizeof(int32_t)) == 0);

  /* A text prompt with a stop string, the engine's loop stepping. */
  stop.data = " girl";
  stop.len = 5;
  REQUIRE(strstr(c[0].text, " girl") != NULL);
  p.stop_strings = &stop;
  p.num_stop_strings = 1;
  CHECK_STATUS(photon_engine_start_loop(e), PHOTON_OK);
  CHECK_STATUS(photon_engine_generate_text(&done, e, "Once upon a time", 16, NULL, &p), PHOTON_OK);
  CHECK_STATUS(photon_engine_stop_loop(e), PHOTON_OK);
  REQUIRE(done != NULL);
  CHECK(photon_completion_finish_reason(done) == PHOTON_FINISH_STOP);
  CHECK(photon_completion_stop_string_index(done) == 0);
  text = photon_completion_text(done);
  CHECK(text.len == (size_t)(strstr(c[0].text, " girl") - c[0].text));
  CHECK(strncmp(text.data, c[0].text, text.len) == 0);
  photon_completion_destroy(done);

  /* Errors leave *out_completion NULL; a NULL completion reads as empty. */
  done = (photon_completion*)&done;
  CHECK_STATUS(photon_engine_generate_tokens(&done, e, once_ids, 0, &p), PHOTON_E_INVALID_ARGUMENT);
  CHECK(done == NULL);
  CHECK_MESSAGE_HAS("photon_engine_generate_tokens: num_prompt_ids is 0");
  CHECK_STATUS(photon_engine_generate_tokens(NULL, e, once_ids, 5, &p), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("out_completion is NULL");
  CHECK_STATUS(photon_engine_generate_text(&done, NULL, "x", 1, NULL, &p), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("engine is NULL");
  CHECK_STATUS(photon_engine_generate_chat(&done, e, NULL, 0, NULL, &p), PHOTON_E_INVALID_ARGUMENT);
  CHECK(done == NULL);
  CHECK(photon_completion_num_tokens(NULL) == 0 && photon_completion_tokens(NULL) == NULL);
  CHECK(photon_completion_logprobs(NULL) == NULL);
  CHECK(photon_completion_finish_reason(NULL) == PHOTON_FINISH_NONE);
  CHECK(photon_completion_stop_string_index(NULL) == -1);
  CHECK(photon_completion_text(NULL).len == 0 && photon_completion_error(NULL).len == 0);
  photon_completion_destroy(NULL);
  photon_engine_destroy(e);
}

/* PHOTON_STEP_OVERLAP_ON (forced on the CPU): the events of each step come one
 * photon_engine_step later, the text and tokens, stop string included, are those
 * of the engine without it. */
static void test_step_overlap(void) {
  char dir[1024];
  photon_engine* e[2] = {NULL, NULL};
  photon_engine_params ep;
  photon_request_params p;
  collected c[2];
  photon_str stop;
  int i;
  memset(c, 0, sizeof c);
  for (i = 0; i < 2; ++i) {
    photon_engine_params_init(&ep, sizeof ep);
    ep.backend = PHOTON_BACKEND_CPU;
    ep.threads = 1;
    ep.kv_blocks = 64;
    ep.step_overlap = i == 0 ? PHOTON_STEP_OVERLAP_OFF : PHOTON_STEP_OVERLAP_ON;
    CHECK_STATUS(photon_engine_open(&e[i], capi_stories_dir(dir, sizeof dir), &ep), PHOTON_OK);
    REQUIRE(e[i] != NULL);
  }
  photon_request_params_init(&p, sizeof p);
  p.temperature = 0.0f;
  p.max_tokens = 24;
  stop.data = " girl";
  stop.len = 5;
  p.stop_strings = &stop;
  p.num_stop_strings = 1;
  for (i = 0; i < 2; ++i) {
    CHECK_STATUS(photon_engine_submit_tokens(&c[i].id, e[i], once_ids, 5, &p), PHOTON_OK);
    REQUIRE(util_run(e[i], c + i, 1, 100));
  }
  CHECK(c[0].finish == PHOTON_FINISH_STOP && c[1].finish == PHOTON_FINISH_STOP);
  CHECK(c[0].num_tokens > 0 && c[1].num_tokens == c[0].num_tokens);
  CHECK(memcmp(c[0].tokens, c[1].tokens, (size_t)c[0].num_tokens * sizeof(int32_t)) == 0);
  CHECK(c[1].text_len == c[0].text_len && memcmp(c[0].text, c[1].text, c[0].text_len) == 0);
  CHECK(c[0].bad_order == 0 && c[1].bad_order == 0 && c[1].num_finish_events == 1);
  photon_engine_destroy(e[0]);
  photon_engine_destroy(e[1]);
}

int main(void) {
  RUN(test_open_errors);
  RUN(test_info_and_tokenizer);
  RUN(test_submit_errors);
  RUN(test_submit_chat);
  RUN(test_generate_length_logprobs_metrics);
  RUN(test_stop_conditions);
  RUN(test_blocking_generate);
  RUN(test_cancel);
  RUN(test_poll_buffers);
  RUN(test_older_request_params);
  RUN(test_loop);
  RUN(test_int8_weights);
  RUN(test_without_tokenizer);
  RUN(test_step_overlap);
  return capi_summary();
}
