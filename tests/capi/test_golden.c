/* Golden: tokens generated through the C API equal the greedy ids of
 * models/stories260K/golden/<name>.json, for prompts given as token ids and as
 * text, all eight requests batched together; the streamed text is what follows
 * the prompt in the golden decode of prompt + generated ids. */
#include "engine_util.h"
#include "golden_json.h"

static const char* const kCases[] = {"once_upon_a_time", "lily_and_ben", "unicode_byte_fallback", "bos_only"};
#define NCASES 4

typedef struct golden {
  char prompt[512];
  int32_t prompt_ids[128];
  int num_prompt_ids;
  int32_t generated[128];
  int num_generated;
  char generated_text[4096];
  char full_text[8192];
} golden;

static int load_golden(const char* name, golden* g) {
  char dir[1024], path[1200];
  char* json;
  int ok;
  snprintf(path, sizeof path, "%s/golden/%s.json", capi_stories_dir(dir, sizeof dir), name);
  json = golden_read_file(path);
  if (json == NULL) return 0;
  g->num_prompt_ids = golden_int_array(json, "prompt_ids", g->prompt_ids, 128);
  g->num_generated = golden_int_array(json, "generated_ids", g->generated, 128);
  ok = g->num_prompt_ids > 0 && g->num_generated > 0 && golden_string(json, "prompt", g->prompt, 512) >= 0 &&
       golden_string(json, "generated_text", g->generated_text, 4096) >= 0 &&
       golden_string(json, "full_text", g->full_text, 8192) >= 0;
  free(json);
  return ok;
}

static void test_golden_greedy(void) {
  static golden g[NCASES];
  collected c[2 * NCASES];
  photon_engine* e = util_open_stories(128);
  photon_request_params p;
  int i;
  REQUIRE(e != NULL);
  memset(c, 0, sizeof c);
  photon_request_params_init(&p, sizeof p);
  p.temperature = 0.0f;
  for (i = 0; i < NCASES; ++i) {
    REQUIRE(load_golden(kCases[i], &g[i]));
    p.max_tokens = g[i].num_generated;
    CHECK_STATUS(photon_engine_submit_tokens(&c[2 * i].id, e, g[i].prompt_ids, (size_t)g[i].num_prompt_ids, &p),
                 PHOTON_OK);
    CHECK_STATUS(photon_engine_submit_text(&c[2 * i + 1].id, e, g[i].prompt, strlen(g[i].prompt), NULL, &p),
                 PHOTON_OK);
  }
  REQUIRE(util_run(e, c, 2 * NCASES, 500));
  for (i = 0; i < 2 * NCASES; ++i) {
    const golden* want = &g[i / 2];
    capi_current = kCases[i / 2];
    CHECK(c[i].finish == PHOTON_FINISH_LENGTH);
    CHECK(c[i].num_finish_events == 1 && !c[i].bad_order);
    CHECK(c[i].num_tokens == want->num_generated);
    CHECK(memcmp(c[i].tokens, want->generated, (size_t)want->num_generated * sizeof(int32_t)) == 0);
    /* The streamed pieces continue the prompt's text: they are what follows the
     * prompt in the golden decode of prompt + generated ids (HF's generated_text
     * decodes the new ids alone, which drops a SentencePiece word's first space). */
    REQUIRE(strncmp(want->full_text, want->prompt, strlen(want->prompt)) == 0);
    CHECK(strcmp(c[i].text, want->full_text + strlen(want->prompt)) == 0);
    if (strcmp(c[i].text, want->full_text + strlen(want->prompt)) != 0) {
      fprintf(stderr, "    streamed: \"%s\"\n    golden:   \"%s\"\n", c[i].text, want->full_text + strlen(want->prompt));
    }
  }
  capi_current = "test_golden_greedy";
  photon_engine_destroy(e);
}

int main(void) {
  RUN(test_golden_greedy);
  return capi_summary();
}
