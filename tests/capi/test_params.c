/* The struct_size rule through the real API: every *_init fills photon's
 * defaults for exactly the caller's size; an older (smaller) struct is read
 * with defaults for what it lacks; a newer (larger) one is accepted only when
 * the bytes this library does not know are zero. */
#include "capi_check.h"

#define LARGER 16 /* bytes a "newer photon.h" appended */

static void test_init_defaults(void) {
  photon_tokenize_params tp;
  photon_detokenize_params dp;
  photon_chat_message cm;
  photon_chat_params cp;
  photon_engine_params ep;
  photon_request_params rp;

  CHECK_STATUS(photon_tokenize_params_init(&tp, sizeof tp), PHOTON_OK);
  CHECK(tp.struct_size == sizeof tp && tp.add_special_tokens && tp.parse_special);
  CHECK_STATUS(photon_detokenize_params_init(&dp, sizeof dp), PHOTON_OK);
  CHECK(dp.struct_size == sizeof dp && !dp.skip_special_tokens);
  CHECK_STATUS(photon_chat_message_init(&cm, sizeof cm), PHOTON_OK);
  CHECK(cm.struct_size == sizeof cm && cm.role.data == NULL && cm.content.len == 0 && cm.reasoning_content.data == NULL);
  CHECK_STATUS(photon_chat_params_init(&cp, sizeof cp), PHOTON_OK);
  CHECK(cp.add_generation_prompt && cp.enable_thinking && cp.date_string.data == NULL);
  CHECK_STATUS(photon_engine_params_init(&ep, sizeof ep), PHOTON_OK);
  CHECK(ep.struct_size == sizeof ep);
  CHECK(ep.backend == PHOTON_BACKEND_AUTO && ep.device == 0 && ep.threads == 0);
  CHECK(ep.kv_blocks == 0 && ep.kv_bytes == 0 && ep.kv_memory_fraction == 0.0);
  CHECK(ep.block_size == 16 && ep.max_batch_tokens == 2048 && ep.max_seqs == 256);
  CHECK(ep.prefix_caching && ep.load_tokenizer);
  CHECK(ep.weights == PHOTON_WEIGHTS_AUTO && ep.int8_group_size == 128);
  CHECK(ep.step_overlap == PHOTON_STEP_OVERLAP_AUTO);
  CHECK(ep.lm_head_screen);
  CHECK_STATUS(photon_request_params_init(&rp, sizeof rp), PHOTON_OK);
  CHECK(rp.struct_size == sizeof rp);
  CHECK(rp.temperature == 1.0f && rp.top_k == 0 && rp.top_p == 1.0f && rp.min_p == 0.0f);
  CHECK(rp.repetition_penalty == 1.0f && rp.presence_penalty == 0.0f && rp.frequency_penalty == 0.0f);
  CHECK(!rp.use_seed && rp.max_tokens == 0 && !rp.ignore_eos);
  CHECK(rp.stop_token_ids == NULL && rp.num_stop_token_ids == 0 && rp.stop_strings == NULL && rp.num_stop_strings == 0);
  CHECK(rp.num_top_logprobs == 0 && rp.detokenize && rp.skip_special_tokens);
  CHECK(strcmp(photon_last_error_message(), "") == 0);
}

static void test_init_errors(void) {
  photon_request_params rp;
  CHECK_STATUS(photon_tokenize_params_init(NULL, sizeof(photon_tokenize_params)), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("photon_tokenize_params_init: params is NULL");
  CHECK_STATUS(photon_detokenize_params_init(NULL, 8), PHOTON_E_INVALID_ARGUMENT);
  CHECK_STATUS(photon_chat_message_init(NULL, 8), PHOTON_E_INVALID_ARGUMENT);
  CHECK_STATUS(photon_chat_params_init(NULL, 8), PHOTON_E_INVALID_ARGUMENT);
  CHECK_STATUS(photon_engine_params_init(NULL, 8), PHOTON_E_INVALID_ARGUMENT);
  CHECK_STATUS(photon_request_params_init(NULL, 8), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("photon_request_params_init: params is NULL");
  /* Sizes no photon.h declared: 0, half a field. */
  CHECK_STATUS(photon_request_params_init(&rp, 0), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("struct_size = 0 is not a size of photon_request_params");
  CHECK_STATUS(photon_request_params_init(&rp, offsetof(photon_request_params, seed) + 4), PHOTON_E_INVALID_ARGUMENT);
}

static void test_init_sizes(void) {
  unsigned char raw[sizeof(photon_request_params) + LARGER];
  photon_request_params* p = (photon_request_params*)(void*)raw;
  size_t i;
  /* Older: only the bytes the caller has are written. */
  memset(raw, 0xAB, sizeof raw);
  CHECK_STATUS(photon_request_params_init(p, offsetof(photon_request_params, max_tokens)), PHOTON_OK);
  CHECK(p->struct_size == offsetof(photon_request_params, max_tokens));
  CHECK(p->temperature == 1.0f && p->top_p == 1.0f);
  CHECK(raw[offsetof(photon_request_params, max_tokens)] == 0xAB);
  CHECK(raw[sizeof raw - 1] == 0xAB);
  /* Newer: the unknown tail is zeroed. */
  memset(raw, 0xAB, sizeof raw);
  CHECK_STATUS(photon_request_params_init(p, sizeof raw), PHOTON_OK);
  CHECK(p->struct_size == sizeof raw && p->temperature == 1.0f);
  for (i = sizeof(photon_request_params); i < sizeof raw; ++i) CHECK(raw[i] == 0);
}

/* "<|eot_id|>" is one id when special text is parsed (the default), several otherwise. */
static size_t eot_ids(photon_tokenizer* t, const photon_tokenize_params* p) {
  int32_t ids[32];
  size_t n = 0;
  CHECK_STATUS(photon_tokenizer_encode(ids, 32, &n, t, "<|eot_id|>", 10, p), PHOTON_OK);
  return n;
}

static void test_read_sizes(void) {
  char dir[1024];
  photon_tokenizer* t = NULL;
  unsigned char raw[sizeof(photon_tokenize_params) + LARGER];
  photon_tokenize_params* p = (photon_tokenize_params*)(void*)raw;
  REQUIRE_STATUS(photon_tokenizer_open(&t, capi_tokenizer_dir(dir, sizeof dir, "llama3")), PHOTON_OK);

  /* Current size, parse_special off: several ids. */
  photon_tokenize_params_init(p, sizeof(photon_tokenize_params));
  p->add_special_tokens = false;
  p->parse_special = false;
  CHECK(eot_ids(t, p) > 1);

  /* An older struct that ends before parse_special: photon uses its default
   * (true) and ignores the (false) byte beyond the caller's size. */
  p->struct_size = (uint32_t)offsetof(photon_tokenize_params, parse_special);
  CHECK(eot_ids(t, p) == 1);

  /* A newer, larger struct: fine while the tail is zero... */
  memset(raw, 0, sizeof raw);
  photon_tokenize_params_init(p, sizeof raw);
  p->add_special_tokens = false;
  p->parse_special = false;
  CHECK(eot_ids(t, p) > 1);
  /* ...rejected when a field this library does not know is set. */
  raw[sizeof(photon_tokenize_params) + 3] = 1;
  {
    int32_t ids[32];
    size_t n = 0;
    CHECK_STATUS(photon_tokenizer_encode(ids, 32, &n, t, "<|eot_id|>", 10, p), PHOTON_E_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("photon_tokenize_params has a non-zero byte at offset");
    /* A size that no photon.h declared. */
    p->struct_size = 2;
    CHECK_STATUS(photon_tokenizer_encode(ids, 32, &n, t, "<|eot_id|>", 10, p), PHOTON_E_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("tokenize_params->struct_size = 2");
  }
  photon_tokenizer_destroy(t);
}

int main(void) {
  RUN(test_init_defaults);
  RUN(test_init_errors);
  RUN(test_init_sizes);
  RUN(test_read_sizes);
  return capi_summary();
}
