/* photon_tokenizer_*: open/destroy, info, encode/decode with caller-owned
 * buffers (BUFFER_TOO_SMALL writes the size needed), token pieces, chat
 * rendering, and the documented status + message for bad arguments. */
#include "capi_check.h"

static photon_tokenizer* open_stories(void) {
  char dir[1024];
  photon_tokenizer* t = NULL;
  photon_status st = photon_tokenizer_open(&t, capi_stories_dir(dir, sizeof dir));
  CHECK_STATUS(st, PHOTON_OK);
  return t;
}

static void test_open_errors(void) {
  photon_tokenizer* t = (photon_tokenizer*)&t; /* must be reset to NULL on error */
  CHECK_STATUS(photon_tokenizer_open(&t, "/nonexistent/photon/folder"), PHOTON_E_FILE_NOT_FOUND);
  CHECK(t == NULL);
  CHECK(photon_last_error_message()[0] != '\0');
  CHECK_MESSAGE_HAS("photon_tokenizer_open: ");
  CHECK_STATUS(photon_tokenizer_open(NULL, "x"), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("out_tokenizer is NULL");
  CHECK_STATUS(photon_tokenizer_open(&t, NULL), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("dir is NULL");
  photon_tokenizer_destroy(NULL); /* a no-op */
}

static void test_info(void) {
  photon_tokenizer* t = open_stories();
  photon_tokenizer_info info;
  int32_t eos[4];
  size_t n = 99;
  REQUIRE(t != NULL);
  memset(&info, 0xFF, sizeof info);
  info.struct_size = sizeof info;
  CHECK_STATUS(photon_tokenizer_get_info(&info, t), PHOTON_OK);
  CHECK(strcmp(photon_last_error_message(), "") == 0);
  CHECK(info.struct_size == sizeof info);
  CHECK(info.vocab_size == 512);
  CHECK(info.bos_token_id == 1);
  CHECK(info.eos_token_id == 2);
  CHECK(info.is_sentencepiece);
  CHECK(info.chat_template == PHOTON_CHAT_TEMPLATE_NONE);

  /* An older, smaller photon_tokenizer_info gets exactly its bytes. */
  {
    unsigned char raw[sizeof(photon_tokenizer_info) + 8];
    photon_tokenizer_info* small = (photon_tokenizer_info*)(void*)raw;
    memset(raw, 0xAB, sizeof raw);
    small->struct_size = (uint32_t)offsetof(photon_tokenizer_info, eos_token_id);
    CHECK_STATUS(photon_tokenizer_get_info(small, t), PHOTON_OK);
    CHECK(small->vocab_size == 512 && small->bos_token_id == 1);
    CHECK(raw[offsetof(photon_tokenizer_info, eos_token_id)] == 0xAB);
  }
  info.struct_size = 3;
  CHECK_STATUS(photon_tokenizer_get_info(&info, t), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("out_info->struct_size = 3 is not a size of photon_tokenizer_info");
  CHECK_STATUS(photon_tokenizer_get_info(NULL, t), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("out_info is NULL");
  info.struct_size = sizeof info;
  CHECK_STATUS(photon_tokenizer_get_info(&info, NULL), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("tokenizer is NULL");

  CHECK_STATUS(photon_tokenizer_eos_token_ids(eos, 4, &n, t), PHOTON_OK);
  CHECK(n == 1 && eos[0] == 2);
  n = 0;
  CHECK_STATUS(photon_tokenizer_eos_token_ids(NULL, 0, &n, t), PHOTON_E_BUFFER_TOO_SMALL);
  CHECK(n == 1);
  photon_tokenizer_destroy(t);
}

static void test_encode_decode(void) {
  static const int32_t golden[] = {1, 403, 407, 261, 378}; /* models/stories260K/golden/once_upon_a_time.json */
  const char* text = "Once upon a time";
  photon_tokenizer* t = open_stories();
  int32_t ids[16];
  size_t n = 0, size = 0;
  char out[64];
  photon_tokenize_params tp;
  REQUIRE(t != NULL);

  CHECK_STATUS(photon_tokenizer_encode(ids, 16, &n, t, text, strlen(text), NULL), PHOTON_OK);
  CHECK(n == 5 && memcmp(ids, golden, sizeof golden) == 0);

  /* Too small: the count needed, the buffer untouched. */
  ids[0] = -7;
  n = 0;
  CHECK_STATUS(photon_tokenizer_encode(ids, 3, &n, t, text, strlen(text), NULL), PHOTON_E_BUFFER_TOO_SMALL);
  CHECK(n == 5);
  CHECK(ids[0] == -7);
  CHECK_MESSAGE_HAS("5 ids do not fit in an array of 3");
  CHECK_STATUS(photon_tokenizer_encode(NULL, 0, &n, t, text, strlen(text), NULL), PHOTON_E_BUFFER_TOO_SMALL);
  CHECK(n == 5);

  /* Without the BOS. */
  CHECK_STATUS(photon_tokenize_params_init(&tp, sizeof tp), PHOTON_OK);
  CHECK(tp.add_special_tokens && tp.parse_special);
  tp.add_special_tokens = false;
  CHECK_STATUS(photon_tokenizer_encode(ids, 16, &n, t, text, strlen(text), &tp), PHOTON_OK);
  CHECK(n == 4 && ids[0] == 403);

  /* The text is (pointer, length): only the first 4 bytes ("Once"). */
  CHECK_STATUS(photon_tokenizer_encode(ids, 16, &n, t, text, 4, &tp), PHOTON_OK);
  CHECK(n >= 1 && n < 4);

  CHECK_STATUS(photon_tokenizer_decode(out, sizeof out, &size, t, golden, 5, NULL), PHOTON_OK);
  CHECK(strcmp(out, text) == 0);
  CHECK(size == strlen(text) + 1);
  size = 0;
  out[0] = 'x';
  CHECK_STATUS(photon_tokenizer_decode(out, 5, &size, t, golden, 5, NULL), PHOTON_E_BUFFER_TOO_SMALL);
  CHECK(size == strlen(text) + 1);
  CHECK(out[0] == 'x');
  CHECK_MESSAGE_HAS("needs 17 bytes");
  CHECK_STATUS(photon_tokenizer_decode(NULL, 0, &size, t, golden, 5, NULL), PHOTON_E_BUFFER_TOO_SMALL);
  CHECK(size == 17);
  /* An empty sequence decodes to "". */
  CHECK_STATUS(photon_tokenizer_decode(out, sizeof out, &size, t, NULL, 0, NULL), PHOTON_OK);
  CHECK(size == 1 && out[0] == '\0');

  /* Bad arguments. */
  CHECK_STATUS(photon_tokenizer_encode(ids, 16, NULL, t, text, 4, NULL), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("out_count is NULL");
  CHECK_STATUS(photon_tokenizer_encode(ids, 16, &n, t, NULL, 4, NULL), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("text is NULL but its length is 4");
  CHECK_STATUS(photon_tokenizer_encode(NULL, 16, &n, t, text, 4, NULL), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("NULL but its capacity is 16");
  CHECK_STATUS(photon_tokenizer_decode(out, sizeof out, &size, t, NULL, 3, NULL), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("ids is NULL but num_ids is 3");
  {
    const int32_t bad[] = {1, 100000};
    CHECK_STATUS(photon_tokenizer_decode(out, sizeof out, &size, t, bad, 2, NULL), PHOTON_E_OUT_OF_RANGE);
  }
  photon_tokenizer_destroy(t);
}

static void test_pieces(void) {
  photon_tokenizer* t = open_stories();
  char piece[32];
  size_t size = 0;
  REQUIRE(t != NULL);
  CHECK_STATUS(photon_tokenizer_token_to_piece(piece, sizeof piece, &size, t, 403), PHOTON_OK);
  CHECK(strcmp(piece, "Once") == 0 || strcmp(piece, " Once") == 0);
  CHECK(size == strlen(piece) + 1);
  CHECK_STATUS(photon_tokenizer_token_to_piece(piece, sizeof piece, &size, t, 512), PHOTON_E_OUT_OF_RANGE);
  CHECK_STATUS(photon_tokenizer_token_to_piece(piece, sizeof piece, &size, t, -1), PHOTON_E_OUT_OF_RANGE);
  photon_tokenizer_destroy(t);
}

static photon_chat_message message(const char* role, const char* content) {
  photon_chat_message m;
  photon_chat_message_init(&m, sizeof m);
  m.role.data = role;
  m.role.len = strlen(role);
  m.content.data = content;
  m.content.len = strlen(content);
  return m;
}

static void test_render_chat(void) {
  /* tests/data/tokenizers/qwen3/golden/hf_reference.json, chat cases 3 and 4. */
  static const char* want_thinking_off =
      "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
      "<|im_start|>assistant\n<think>\n\n</think>\n\n";
  static const char* want_llama =
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
      "Today Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\n";
  char dir[1024];
  char out[1024];
  size_t size = 0;
  photon_tokenizer* q = NULL;
  photon_tokenizer* l = NULL;
  photon_tokenizer* s = open_stories();
  photon_chat_message msgs[2];
  photon_chat_params cp;
  photon_tokenizer_info info;

  msgs[0] = message("system", "You are a helpful assistant.");
  msgs[1] = message("user", "What is 2+2?");
  CHECK_STATUS(photon_chat_params_init(&cp, sizeof cp), PHOTON_OK);
  CHECK(cp.add_generation_prompt && cp.enable_thinking && cp.date_string.data == NULL);
  cp.enable_thinking = false;

  REQUIRE_STATUS(photon_tokenizer_open(&q, capi_tokenizer_dir(dir, sizeof dir, "qwen3")), PHOTON_OK);
  info.struct_size = sizeof info;
  CHECK_STATUS(photon_tokenizer_get_info(&info, q), PHOTON_OK);
  CHECK(info.chat_template == PHOTON_CHAT_TEMPLATE_QWEN3 && !info.is_sentencepiece);
  CHECK_STATUS(photon_tokenizer_render_chat(out, sizeof out, &size, q, msgs, 2, &cp), PHOTON_OK);
  CHECK(strcmp(out, want_thinking_off) == 0);
  CHECK(size == strlen(want_thinking_off) + 1);
  CHECK_STATUS(photon_tokenizer_render_chat(out, 10, &size, q, msgs, 2, &cp), PHOTON_E_BUFFER_TOO_SMALL);
  CHECK(size == strlen(want_thinking_off) + 1);

  REQUIRE_STATUS(photon_tokenizer_open(&l, capi_tokenizer_dir(dir, sizeof dir, "llama3")), PHOTON_OK);
  msgs[0] = message("user", "Hello!");
  cp.date_string.data = "26 Jul 2024";
  cp.date_string.len = strlen(cp.date_string.data);
  CHECK_STATUS(photon_tokenizer_render_chat(out, sizeof out, &size, l, msgs, 1, &cp), PHOTON_OK);
  CHECK(strcmp(out, want_llama) == 0);

  /* Messages are read with the stride of messages[0].struct_size. */
  msgs[1].struct_size = msgs[0].struct_size - 8;
  CHECK_STATUS(photon_tokenizer_render_chat(out, sizeof out, &size, l, msgs, 2, &cp), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("messages[1].struct_size");
  msgs[0].role.data = NULL;
  CHECK_STATUS(photon_tokenizer_render_chat(out, sizeof out, &size, l, msgs, 1, &cp), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("messages[0].role.data is NULL");
  CHECK_STATUS(photon_tokenizer_render_chat(out, sizeof out, &size, l, NULL, 1, &cp), PHOTON_E_INVALID_ARGUMENT);
  CHECK_MESSAGE_HAS("messages is NULL but num_messages is 1");

  /* stories260K has no chat template. */
  msgs[0] = message("user", "Hello!");
  CHECK_STATUS(photon_tokenizer_render_chat(out, sizeof out, &size, s, msgs, 1, NULL), PHOTON_E_TEMPLATE_ERROR);
  CHECK(photon_last_error_message()[0] != '\0');

  photon_tokenizer_destroy(q);
  photon_tokenizer_destroy(l);
  photon_tokenizer_destroy(s);
}

int main(void) {
  RUN(test_open_errors);
  RUN(test_info);
  RUN(test_encode_decode);
  RUN(test_pieces);
  RUN(test_render_chat);
  return capi_summary();
}
