/* photon.h: the stable C ABI of libphoton. Pure C99.
 *
 * Conventions (docs/c-api.md says more, with a complete example):
 *
 * Errors. Every call that can fail returns a photon_status: PHOTON_OK (0) or
 *   a negative PHOTON_E_* code. Numbers are never reused or renumbered.
 *   photon_status_string() names a code; photon_last_error_message() gives
 *   the calling thread's message of its last photon call that returned a
 *   photon_status ("" after a success). No call aborts, exits or lets a C++
 *   exception out.
 *
 * Argument order. Out-params first, then the object, then the inputs.
 *
 * Params structs (photon_*_params) begin with `uint32_t struct_size` and are
 *   passed by pointer. Fill one with photon_X_params_init(&p, sizeof p):
 *   it writes photon's defaults for exactly the caller's size, so a program
 *   built against an older photon.h keeps working with a newer libphoton
 *   (the fields it does not know keep their defaults), and one built against
 *   a newer photon.h works with an older libphoton as long as it leaves the
 *   fields that libphoton does not know at zero (a non-zero one is rejected
 *   with PHOTON_E_INVALID_ARGUMENT rather than silently ignored). A NULL
 *   params pointer means "all defaults". Fields are only ever appended.
 *   Structs that photon writes (photon_engine_metrics, photon_event) follow
 *   the same rule in the other direction: the caller says how many bytes it
 *   has (struct_size, or an element size argument) and photon writes exactly
 *   those, zeroing what it does not know.
 *
 * Strings. Input text is UTF-8 given as (pointer, length in bytes): no NUL
 *   terminator is needed and embedded NULs are text. File system paths are
 *   NUL-terminated. Output text goes to caller-owned buffers.
 *
 * Caller-owned output buffers. A call that writes a variable amount of data
 *   takes (buffer, capacity) and an out-param that receives the size written
 *   or, with PHOTON_E_BUFFER_TOO_SMALL, the size needed (so a call with a
 *   NULL buffer and capacity 0 asks for the size).
 *
 * Ownership. Each function says who owns what: "borrowed" inputs are read
 *   during the call only (or as long as it says); handles returned through
 *   out-params are owned by the caller and freed by the matching
 *   photon_X_destroy(), which accepts NULL.
 *
 * Threading. photon starts no threads unless a params field asks for them.
 *   Each function says what it allows; in short: photon_engine_step() is
 *   called from one driver thread at a time; submit, cancel, poll and
 *   metrics are safe from any thread at any time; destroy must not race with
 *   any other call on the same handle.
 *
 * Versioning. PHOTON_VERSION_* (version.h) are the version of the header
 *   compiled against; photon_version_number() that of the library loaded.
 *   The shared library's SONAME carries PHOTON_ABI_VERSION, which changes
 *   only with an incompatible ABI change; every API or ABI change is logged in
 *   docs/CHANGELOG-API.md and deprecations are announced one minor release
 *   ahead.
 */
#ifndef PHOTON_PHOTON_H
#define PHOTON_PHOTON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "photon/export.h"
#include "photon/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- status */

/* Equal to photon::Errc (include/photon/result.hpp). Append only. */
typedef enum photon_status {
  PHOTON_OK = 0,
  PHOTON_E_INVALID_ARGUMENT = -1,     /* a NULL pointer, a bad value in a call */
  PHOTON_E_OUT_OF_RANGE = -2,         /* an index or token id outside its range */
  PHOTON_E_FILE_NOT_FOUND = -3,       /* a path that does not exist */
  PHOTON_E_IO_ERROR = -4,             /* a read or mmap failure */
  PHOTON_E_TRUNCATED_FILE = -5,       /* a file shorter than its format requires */
  PHOTON_E_HEADER_OUT_OF_BOUNDS = -6, /* a safetensors header running past the file */
  PHOTON_E_BAD_JSON = -7,             /* malformed JSON text */
  PHOTON_E_BAD_OFFSETS = -8,          /* tensor data offsets outside the data */
  PHOTON_E_UNKNOWN_DTYPE = -9,        /* a dtype photon does not know */
  PHOTON_E_MISSING_TENSOR = -10,      /* a tensor the architecture needs is absent */
  PHOTON_E_SHAPE_MISMATCH = -11,      /* a tensor's shape or dtype disagrees with the config */
  PHOTON_E_UNKNOWN_ARCHITECTURE = -12,/* config.json names an unsupported architecture */
  PHOTON_E_MISSING_CONFIG_KEY = -13,  /* config.json lacks a required key */
  PHOTON_E_INVALID_CONFIG = -14,      /* a config value of the wrong type or range */
  PHOTON_E_OUT_OF_MEMORY = -15,       /* a host or device allocation failed */
  PHOTON_E_BUFFER_TOO_SMALL = -16,    /* a caller buffer cannot hold the result */
  PHOTON_E_CAPACITY_EXCEEDED = -17,   /* a request that can never fit (KV cache, positions) */
  PHOTON_E_CANCELLED = -18,           /* the operation or request was cancelled */
  PHOTON_E_UNKNOWN_REQUEST = -19,     /* no request with that id */
  PHOTON_E_INVALID_STATE = -20,       /* a call the object's state does not allow */
  PHOTON_E_TOKENIZER_ERROR = -21,     /* malformed tokenizer files or undecodable input */
  PHOTON_E_TEMPLATE_ERROR = -22,      /* an unknown or failing chat template */
  PHOTON_E_CUDA_ERROR = -23,          /* a CUDA runtime or cuBLAS failure */
  PHOTON_E_UNSUPPORTED = -24,         /* a valid input this build cannot serve */
  PHOTON_E_INTERNAL = -25,            /* a broken invariant inside photon (a bug) */
  PHOTON_E_QUEUE_FULL = -26           /* the submit queue is at its configured limit */
} photon_status;

/* The code's name ("ok", "invalid_argument", ...; "unknown_status" for a
 * number photon does not know). Static storage, never NULL.
 * Threading: any thread. */
PHOTON_API const char* photon_status_string(photon_status status);

/* The message of the calling thread's last photon call that returned a
 * photon_status: "" when it returned PHOTON_OK, otherwise a sentence naming
 * the function and the argument, field, file or tensor at fault.
 * Never NULL. Ownership: thread-local storage of photon, valid until the
 * calling thread's next photon call; copy it to keep it.
 * Threading: any thread; each thread sees only its own message. */
PHOTON_API const char* photon_last_error_message(void);

/* --------------------------------------------------------------- version */

/* The loaded library's version, encoded as PHOTON_VERSION_NUMBER is
 * (major * 10000 + minor * 100 + patch). Threading: any thread. */
PHOTON_API uint32_t photon_version_number(void);

/* The loaded library's version as "major.minor.patch". Static storage,
 * never NULL. Threading: any thread. */
PHOTON_API const char* photon_version_string(void);

/* The loaded library's ABI version (its SONAME's number). A program built
 * against this header works with any libphoton whose photon_abi_version()
 * equals PHOTON_ABI_VERSION and whose photon_version_number() is at least
 * PHOTON_VERSION_NUMBER. Threading: any thread. */
PHOTON_API uint32_t photon_abi_version(void);

/* ------------------------------------------------------------- handles */

/* A loaded model with its paged KV cache, scheduler and request queues. */
typedef struct photon_engine photon_engine;
/* Text <-> token ids for one model folder, and its chat template. */
typedef struct photon_tokenizer photon_tokenizer;

/* A borrowed UTF-8 string: `len` bytes at `data` (no NUL needed; data may be
 * NULL when len is 0). Used inside arrays and structs; its layout is fixed. */
typedef struct photon_str {
  const char* data;
  size_t len;
} photon_str;

/* ----------------------------------------------------------- tokenizer */

/* Options of photon_tokenizer_encode and photon_engine_submit_text. */
typedef struct photon_tokenize_params {
  uint32_t struct_size;
  /* Add what the tokenizer adds around a sequence (BOS for Llama / the
   * SentencePiece models' add_bos_token). Default true. */
  bool add_special_tokens;
  /* Special-token text in the input ("<|eot_id|>") becomes its id, as
   * Hugging Face encode() does. false: such text is tokenized as plain text,
   * so untrusted text can never produce a special id. Default true. */
  bool parse_special;
} photon_tokenize_params;

/* Options of photon_tokenizer_decode. */
typedef struct photon_detokenize_params {
  uint32_t struct_size;
  bool skip_special_tokens; /* drop BOS, EOS, <|eot_id|>...; default false */
} photon_detokenize_params;

/* One message of an OpenAI-style conversation. Arrays of messages are read
 * with a stride of messages[0].struct_size (every element must carry the
 * same struct_size): fill each with photon_chat_message_init. */
typedef struct photon_chat_message {
  uint32_t struct_size;
  photon_str role;    /* "system", "user", "assistant", "tool" */
  photon_str content;
  /* Qwen3: the reasoning of an earlier assistant turn kept apart from
   * content. data == NULL: none (a <think> block inside content is used). */
  photon_str reasoning_content;
} photon_chat_message;

/* Options of photon_tokenizer_render_chat and photon_engine_submit_chat. */
typedef struct photon_chat_params {
  uint32_t struct_size;
  bool add_generation_prompt; /* end with the assistant header; default true */
  bool enable_thinking;       /* Qwen3: false adds an empty <think></think> block; default true */
  /* Llama 3.1 / 3.2: the system header's "Today Date". data == NULL: the
   * template's default (today's local date for 3.2, "26 Jul 2024" for 3.1). */
  photon_str date_string;
} photon_chat_params;

/* The chat template families photon renders. */
typedef enum photon_chat_template {
  PHOTON_CHAT_TEMPLATE_NONE = 0,     /* the folder has no chat template */
  PHOTON_CHAT_TEMPLATE_LLAMA3 = 1,   /* Llama 3.0 */
  PHOTON_CHAT_TEMPLATE_LLAMA3_1 = 2, /* Llama 3.1 / 3.2 */
  PHOTON_CHAT_TEMPLATE_QWEN3 = 3,    /* Qwen3 ChatML */
  PHOTON_CHAT_TEMPLATE_UNKNOWN = 4   /* a template photon cannot render */
} photon_chat_template;

/* Facts about a tokenizer, written by photon_tokenizer_get_info. */
typedef struct photon_tokenizer_info {
  uint32_t struct_size;               /* set by the caller: sizeof(photon_tokenizer_info) */
  int32_t vocab_size;                 /* max token id + 1 */
  int32_t bos_token_id;               /* -1: none */
  int32_t eos_token_id;               /* -1: none (all end ids: photon_tokenizer_eos_token_ids) */
  int32_t pad_token_id;               /* -1: none */
  bool is_sentencepiece;              /* tokenizer.model (else tokenizer.json byte-level BPE) */
  photon_chat_template chat_template;
} photon_tokenizer_info;

/* Each writes photon's defaults for exactly `struct_size` bytes (pass
 * sizeof *params) and sets params->struct_size.
 * Errors: PHOTON_E_INVALID_ARGUMENT (params NULL, or a struct_size that no
 * photon.h declared). Threading: any thread. */
PHOTON_API photon_status photon_tokenize_params_init(photon_tokenize_params* params, size_t struct_size);
PHOTON_API photon_status photon_detokenize_params_init(photon_detokenize_params* params, size_t struct_size);
PHOTON_API photon_status photon_chat_message_init(photon_chat_message* message, size_t struct_size);
PHOTON_API photon_status photon_chat_params_init(photon_chat_params* params, size_t struct_size);

/* Loads the tokenizer of a Hugging Face folder `dir` (NUL-terminated):
 * tokenizer.json, else tokenizer.model; tokenizer_config.json and
 * generation_config.json when present. The folder needs no weights.
 * Ownership: *out_tokenizer is the caller's; free with
 * photon_tokenizer_destroy. `dir` is borrowed during the call.
 * Errors: INVALID_ARGUMENT (a NULL pointer), FILE_NOT_FOUND (no tokenizer
 * file), BAD_JSON, TOKENIZER_ERROR (the message names file and field);
 * *out_tokenizer is NULL on error. Threading: any thread. */
PHOTON_API photon_status photon_tokenizer_open(photon_tokenizer** out_tokenizer, const char* dir);

/* Frees a tokenizer from photon_tokenizer_open. NULL is a no-op. Must not
 * race with other calls on it; never pass the engine's tokenizer
 * (photon_engine_get_tokenizer), which the engine owns. */
PHOTON_API void photon_tokenizer_destroy(photon_tokenizer* tokenizer);

/* Threading for every photon_tokenizer_* call below: any number of threads
 * at once on one tokenizer. */

/* Writes the tokenizer's facts into *out_info, whose struct_size the caller
 * sets first. Errors: INVALID_ARGUMENT (NULL, an unknown struct_size). */
PHOTON_API photon_status photon_tokenizer_get_info(photon_tokenizer_info* out_info,
                                                   const photon_tokenizer* tokenizer);

/* The ids that end generation (eos_token plus generation_config.json's
 * eos_token_id), sorted. Writes up to `capacity` ids to out_ids and the
 * number of ids to *out_count (the number needed with BUFFER_TOO_SMALL). */
PHOTON_API photon_status photon_tokenizer_eos_token_ids(int32_t* out_ids, size_t capacity, size_t* out_count,
                                                        const photon_tokenizer* tokenizer);

/* Encodes `text_len` bytes of UTF-8 at `text` (invalid UTF-8 becomes
 * U+FFFD). params NULL: defaults. Writes the ids to out_ids (capacity ids)
 * and their number to *out_count; with BUFFER_TOO_SMALL *out_count is the
 * number needed and out_ids is untouched (out_ids may be NULL when capacity
 * is 0). Errors: INVALID_ARGUMENT, BUFFER_TOO_SMALL, TOKENIZER_ERROR. */
PHOTON_API photon_status photon_tokenizer_encode(int32_t* out_ids, size_t capacity, size_t* out_count,
                                                 const photon_tokenizer* tokenizer, const char* text,
                                                 size_t text_len, const photon_tokenize_params* params);

/* Decodes `num_ids` ids into UTF-8 text (invalid byte sequences become
 * U+FFFD, as Hugging Face decodes). Writes the text plus a terminating NUL
 * to out_text (capacity bytes) and the size in bytes including the NUL to
 * *out_size (the size needed with BUFFER_TOO_SMALL; out_text untouched).
 * Errors: INVALID_ARGUMENT, BUFFER_TOO_SMALL, OUT_OF_RANGE (an id outside
 * the vocabulary). */
PHOTON_API photon_status photon_tokenizer_decode(char* out_text, size_t capacity, size_t* out_size,
                                                 const photon_tokenizer* tokenizer, const int32_t* ids,
                                                 size_t num_ids, const photon_detokenize_params* params);

/* The raw bytes one token stands for (possibly part of a UTF-8 character;
 * SentencePiece's "\xe2\x96\x81" is a space here), NUL-terminated, sized as
 * photon_tokenizer_decode. Errors: INVALID_ARGUMENT, BUFFER_TOO_SMALL,
 * OUT_OF_RANGE. */
PHOTON_API photon_status photon_tokenizer_token_to_piece(char* out_piece, size_t capacity, size_t* out_size,
                                                         const photon_tokenizer* tokenizer, int32_t token_id);

/* Renders a conversation as the model's chat template does
 * (transformers' apply_chat_template(..., tokenize=False)); encode the
 * result with add_special_tokens = false. Output as photon_tokenizer_decode.
 * `messages` (num_messages elements, all with the same struct_size) and
 * their strings are borrowed during the call. params NULL: defaults.
 * Errors: INVALID_ARGUMENT, BUFFER_TOO_SMALL, TEMPLATE_ERROR (no or an
 * unknown template, or messages the template rejects; the message says
 * which). */
PHOTON_API photon_status photon_tokenizer_render_chat(char* out_text, size_t capacity, size_t* out_size,
                                                      const photon_tokenizer* tokenizer,
                                                      const photon_chat_message* messages, size_t num_messages,
                                                      const photon_chat_params* params);

/* --------------------------------------------------------------- engine */

typedef enum photon_backend {
  PHOTON_BACKEND_AUTO = 0, /* CUDA when built with it, a GPU is found and it serves the model's head_dim, else CPU */
  PHOTON_BACKEND_CPU = 1,
  PHOTON_BACKEND_CUDA = 2
} photon_backend;

/* How the linear layers' weights (q/k/v, o, gate/up, down) are kept. */
typedef enum photon_weights {
  PHOTON_WEIGHTS_AUTO = 0, /* the checkpoint's dtype, as the backend stores it */
  PHOTON_WEIGHTS_INT8 = 1, /* symmetric int8, one f32 scale per int8_group_size inputs (CPU and CUDA backends) */
  PHOTON_WEIGHTS_INT8_LM_HEAD = 2 /* INT8, and the LM head too (faster decode steps of up to 16 sequences) */
} photon_weights;

/* Overlapped engine steps (the C side of EngineOptions::step_overlap): step N + 1 is
 * launched before step N's tokens are read, so that the host's part of a step runs while the GPU
 * works; a step's tokens then reach the events one photon_engine_step call later. */
typedef enum photon_step_overlap {
  PHOTON_STEP_OVERLAP_AUTO = 0, /* where the backend runs steps asynchronously (CUDA) */
  PHOTON_STEP_OVERLAP_ON = 1,   /* every step (on the CPU it only delays the events: for tests) */
  PHOTON_STEP_OVERLAP_OFF = 2
} photon_step_overlap;

/* Options of photon_engine_open. The KV cache is sized by at most one of
 * kv_blocks, kv_bytes and kv_memory_fraction; none: 90% of free GPU memory
 * (CUDA) or min(1 GiB, 25% of available RAM) (CPU), never more than
 * max_seqs full-length sequences need. */
typedef struct photon_engine_params {
  uint32_t struct_size;
  photon_backend backend;    /* default PHOTON_BACKEND_AUTO */
  int32_t device;            /* CUDA device ordinal; default 0 */
  int32_t threads;           /* CPU backend compute threads, the stepping one included; 0 (default): all cores */
  int32_t kv_blocks;         /* KV cache blocks; 0 (default): not given */
  int32_t block_size;        /* tokens per KV block; default 16 */
  uint64_t kv_bytes;         /* KV cache bytes (all layers, K and V); 0 (default): not given */
  double kv_memory_fraction; /* (0, 1]: share of free backend memory after the weights; 0 (default): not given */
  int32_t max_batch_tokens;  /* tokens per step (prefill chunks and decodes); default 2048 */
  int32_t max_seqs;          /* sequences running at once; default 256 */
  bool prefix_caching;       /* share the KV blocks of equal prompt prefixes; default true */
  /* Load the folder's tokenizer, for text requests and text in events.
   * Default true; a folder without tokenizer files then still opens (text
   * calls fail with PHOTON_E_INVALID_STATE), but a malformed one fails. */
  bool load_tokenizer;
  photon_weights weights;    /* default PHOTON_WEIGHTS_AUTO; INT8 on a backend without int8 matmuls: UNSUPPORTED */
  int32_t int8_group_size;   /* > 0: inputs per int8 scale; default 128 */
  photon_step_overlap step_overlap; /* default PHOTON_STEP_OVERLAP_AUTO */
  /* EngineOptions::lm_head_screen: where the backend uses one (CUDA), an int8 copy of a bf16 LM
   * head streamed by single-sequence decode steps, which then rescore the few ids its error
   * bound cannot rule out with the bf16 head: the same tokens, logprobs within the bound, the
   * copy's memory (Llama-3.2-1B: 270 MB). Default true. */
  bool lm_head_screen;
} photon_engine_params;

/* Facts about an open engine, written by photon_engine_get_info. */
typedef struct photon_engine_info {
  uint32_t struct_size;       /* set by the caller: sizeof(photon_engine_info) */
  photon_backend backend;     /* the backend in use (CPU or CUDA) */
  int32_t vocab_size;
  int32_t max_model_len;      /* context limit in tokens */
  int32_t block_size;         /* tokens per KV block */
  int64_t kv_capacity_tokens; /* tokens the KV cache holds */
  bool has_tokenizer;
} photon_engine_info;

/* Per-request generation options. Arrays and strings in it are borrowed
 * during the submit call only. */
typedef struct photon_request_params {
  uint32_t struct_size;
  float temperature;        /* >= 0; 0 => greedy (argmax, ties to the lowest id); default 1 */
  int32_t top_k;            /* keep the k most likely tokens; 0 (default) => off */
  float top_p;              /* nucleus mass in (0, 1]; default 1 (off) */
  float min_p;              /* [0, 1]: drop tokens below min_p * p(top token); default 0 (off) */
  float repetition_penalty; /* > 0; default 1 (off); prompt and generated tokens (HF semantics) */
  float presence_penalty;   /* [-2, 2]; default 0; generated tokens (OpenAI semantics) */
  float frequency_penalty;  /* [-2, 2]; default 0; generated tokens (OpenAI semantics) */
  bool use_seed;            /* true: `seed` fixes the random stream; false (default): photon draws one */
  uint64_t seed;            /* equal seeds give equal tokens whatever else is batched */
  int32_t max_tokens;       /* generated tokens at most; 0 (default): as many as the context allows */
  bool ignore_eos;          /* do not stop on the model's EOS ids; default false */
  const int32_t* stop_token_ids; /* extra ids that end generation (finish STOP); may be NULL */
  size_t num_stop_token_ids;
  /* Strings that end generation once the generated text contains one
   * (finish STOP, in the step that generated it): the events' text stops
   * right before it, while the tokens that made it are still reported.
   * Needs the engine's tokenizer. May be NULL. */
  const photon_str* stop_strings;
  size_t num_stop_strings;
  int32_t num_top_logprobs;  /* report the n most likely tokens with each token, [0, 20]; default 0 */
  bool detokenize;           /* text pieces in events (when the engine has a tokenizer); default true */
  bool skip_special_tokens;  /* leave special tokens (EOS...) out of the text; default true */
} photon_request_params;

typedef enum photon_finish_reason {
  PHOTON_FINISH_NONE = 0,      /* not finished: a token event */
  PHOTON_FINISH_STOP = 1,      /* a stop token (the event's token) or a stop string ended it */
  PHOTON_FINISH_LENGTH = 2,    /* max_tokens or the context limit reached */
  PHOTON_FINISH_CANCELLED = 3, /* photon_engine_cancel; no token */
  PHOTON_FINISH_ERROR = 4      /* the step serving it failed; the event's error text says why */
} photon_finish_reason;

/* A token and its log-probability. Its layout is fixed. */
typedef struct photon_token_logprob {
  int32_t token_id;
  float logprob;
} photon_token_logprob;

/* One streamed event of a request, written by photon_engine_poll. A
 * request's events arrive in order; its last has finish_reason != NONE and
 * there is exactly one such. Offsets index the caller's poll buffers. */
typedef struct photon_event {
  uint64_t request_id;
  int32_t token_id;                   /* the generated token; -1: none (cancelled, error) */
  float logprob;                      /* log-probability of token_id (after temperature, before filtering) */
  photon_finish_reason finish_reason;
  /* The UTF-8 text this event completes, in the text buffer (not
   * NUL-terminated); often empty while a character split over tokens or a
   * possible stop string is held back. A request's pieces concatenate to
   * the text its generated tokens add to the prompt's (the decoding of
   * prompt + generated tokens minus the decoding of the prompt). */
  size_t text_offset;
  size_t text_len;
  size_t top_logprobs_offset;         /* the most likely tokens, most likely first, */
  size_t num_top_logprobs;            /*   in the top_logprobs buffer */
  size_t error_offset;                /* FINISH_ERROR: the failure, in the text buffer */
  size_t error_len;
  /* On the finish event: the index in the request's stop_strings of the
   * string that ended it (FINISH_STOP) or cut its last text; -1 otherwise. */
  int32_t stop_string_index;
} photon_event;

/* Counts of one photon_engine_step. */
typedef struct photon_step_stats {
  uint32_t struct_size; /* set by the caller: sizeof(photon_step_stats) */
  int32_t seqs;         /* sequences in the step's batch */
  int32_t tokens;       /* tokens run through the model */
  int32_t sampled;      /* tokens generated */
  int32_t preempted;    /* sequences preempted by the step's schedule */
  int32_t finished;     /* requests that ended (any reason) */
} photon_step_stats;

/* A snapshot of an engine's state and counters. */
typedef struct photon_engine_metrics {
  uint32_t struct_size;      /* set by the caller: sizeof(photon_engine_metrics) */
  int32_t running;           /* sequences holding KV blocks */
  int32_t waiting;           /* queued, preempted ones included */
  int32_t kv_blocks_total;
  int32_t kv_blocks_used;    /* held by sequences */
  int32_t kv_blocks_cached;  /* free but keeping a cached prefix */
  int32_t block_size;
  double kv_usage;           /* used / total */
  double prefix_hit_rate;    /* prompt tokens served from the prefix cache / prompt tokens admitted */
  uint64_t steps;            /* non-empty steps so far */
  uint64_t tokens_scheduled; /* tokens run through the model so far */
  uint64_t tokens_generated;
  uint64_t preemptions;
  double tokens_per_step;    /* tokens_scheduled / steps */
} photon_engine_metrics;

/* Defaults for exactly `struct_size` bytes, as photon_tokenize_params_init.
 * Threading: any thread. */
PHOTON_API photon_status photon_engine_params_init(photon_engine_params* params, size_t struct_size);
PHOTON_API photon_status photon_request_params_init(photon_request_params* params, size_t struct_size);

/* Opens the Hugging Face model folder `model_dir` (NUL-terminated;
 * config.json + *.safetensors, tokenizer files optional): loads the weights
 * onto the backend, sizes the KV cache and loads the tokenizer. params NULL:
 * defaults. Ownership: *out_engine is the caller's; free with
 * photon_engine_destroy. Borrowed: model_dir and params, during the call.
 * Errors: INVALID_ARGUMENT (a NULL pointer, a field out of range, two KV
 * sizes), FILE_NOT_FOUND, BAD_JSON, MISSING_TENSOR, SHAPE_MISMATCH,
 * UNKNOWN_ARCHITECTURE, INVALID_CONFIG, TOKENIZER_ERROR, UNSUPPORTED (CUDA
 * in a CPU-only build), OUT_OF_MEMORY (weights or a KV cache that holds no
 * full-length sequence); *out_engine is NULL on error.
 * Threading: any thread; starts no thread. */
PHOTON_API photon_status photon_engine_open(photon_engine** out_engine, const char* model_dir,
                                            const photon_engine_params* params);

/* Stops the engine's loop thread if one runs and frees the engine, its
 * unfinished requests and undelivered events. NULL is a no-op. No other
 * call on this engine may run or follow. */
PHOTON_API void photon_engine_destroy(photon_engine* engine);

/* Writes the engine's facts into *out_info (struct_size set by the caller).
 * Errors: INVALID_ARGUMENT. Threading: any thread. */
PHOTON_API photon_status photon_engine_get_info(photon_engine_info* out_info, const photon_engine* engine);

/* The model's EOS ids (config.json), as photon_tokenizer_eos_token_ids.
 * Threading: any thread. */
PHOTON_API photon_status photon_engine_eos_token_ids(int32_t* out_ids, size_t capacity, size_t* out_count,
                                                     const photon_engine* engine);

/* The engine's tokenizer. Ownership: borrowed from the engine, valid until
 * photon_engine_destroy; never pass it to photon_tokenizer_destroy.
 * Errors: INVALID_ARGUMENT, INVALID_STATE (the engine has no tokenizer).
 * Threading: any thread. */
PHOTON_API photon_status photon_engine_get_tokenizer(const photon_tokenizer** out_tokenizer,
                                                     const photon_engine* engine);

/* Threading for the submit calls and photon_engine_cancel: any thread, at
 * any time, concurrently with each other, with step and with poll.
 * Each submit writes the new request's id (never 0, never reused) to
 * *out_request_id; the request runs from the next step on and reports
 * through photon_engine_poll. request params NULL: defaults.
 * Errors: INVALID_ARGUMENT or OUT_OF_RANGE (a malformed request; the
 * message names the field), CAPACITY_EXCEEDED (prompt + max_tokens beyond
 * the KV cache or the context limit), INVALID_STATE (text needs a tokenizer
 * and the engine has none). */

/* Submits a prompt of token ids (borrowed during the call). */
PHOTON_API photon_status photon_engine_submit_tokens(uint64_t* out_request_id, photon_engine* engine,
                                                     const int32_t* prompt_ids, size_t num_prompt_ids,
                                                     const photon_request_params* params);

/* Submits a text prompt (UTF-8, borrowed during the call), encoded with
 * tokenize_params (NULL: defaults, i.e. BOS added and special-token text
 * parsed, so an already-rendered chat prompt works as it is).
 * Errors: also TOKENIZER_ERROR. */
PHOTON_API photon_status photon_engine_submit_text(uint64_t* out_request_id, photon_engine* engine,
                                                   const char* prompt, size_t prompt_len,
                                                   const photon_tokenize_params* tokenize_params,
                                                   const photon_request_params* params);

/* Submits a conversation, rendered by the chat template with the generation
 * prompt (chat_params NULL: defaults) and encoded without added special
 * tokens. Messages are borrowed during the call. Errors: also
 * TEMPLATE_ERROR, TOKENIZER_ERROR. */
PHOTON_API photon_status photon_engine_submit_chat(uint64_t* out_request_id, photon_engine* engine,
                                                   const photon_chat_message* messages, size_t num_messages,
                                                   const photon_chat_params* chat_params,
                                                   const photon_request_params* params);

/* ---------------------------------------------------- blocking generation */

/* A finished request of photon_engine_generate_*: its tokens, logprobs, text
 * and finish. Owned by the caller (photon_completion_destroy); immutable, so
 * any thread may read it. */
typedef struct photon_completion photon_completion;

/* The blocking forms of the three submit calls: run one request to its end
 * and write it to *out_completion (NULL on an error status). The calling
 * thread steps the engine, which advances every request in flight (theirs
 * still report through photon_engine_poll), or, while the engine's loop
 * runs, waits for it. The request's own events do not reach
 * photon_engine_poll. Errors: those of the matching submit call. A failed
 * step is not an error status: the completion then has FINISH_ERROR and
 * photon_completion_error says why. Threading: any thread. */
PHOTON_API photon_status photon_engine_generate_tokens(photon_completion** out_completion, photon_engine* engine,
                                                       const int32_t* prompt_ids, size_t num_prompt_ids,
                                                       const photon_request_params* params);
PHOTON_API photon_status photon_engine_generate_text(photon_completion** out_completion, photon_engine* engine,
                                                     const char* prompt, size_t prompt_len,
                                                     const photon_tokenize_params* tokenize_params,
                                                     const photon_request_params* params);
PHOTON_API photon_status photon_engine_generate_chat(photon_completion** out_completion, photon_engine* engine,
                                                     const photon_chat_message* messages, size_t num_messages,
                                                     const photon_chat_params* chat_params,
                                                     const photon_request_params* params);

/* Frees a completion (NULL is fine). */
PHOTON_API void photon_completion_destroy(photon_completion* completion);
/* The generated tokens (a stop token included) and their logprobs, each
 * photon_completion_num_tokens long; valid until destroy. NULL completion:
 * 0 and NULL. */
PHOTON_API size_t photon_completion_num_tokens(const photon_completion* completion);
PHOTON_API const int32_t* photon_completion_tokens(const photon_completion* completion);
PHOTON_API const float* photon_completion_logprobs(const photon_completion* completion);
/* The generated text (UTF-8, also NUL-terminated), continuing the prompt's
 * as event text does; empty without a tokenizer or with detokenize off. */
PHOTON_API photon_str photon_completion_text(const photon_completion* completion);
PHOTON_API photon_finish_reason photon_completion_finish_reason(const photon_completion* completion);
/* As photon_event's stop_string_index; -1 for a NULL completion. */
PHOTON_API int32_t photon_completion_stop_string_index(const photon_completion* completion);
/* FINISH_ERROR: the failure (also NUL-terminated); otherwise empty. */
PHOTON_API photon_str photon_completion_error(const photon_completion* completion);

/* Ends a request at the next step; its last event then has finish_reason
 * CANCELLED (or the reason it had already finished with). Errors:
 * INVALID_ARGUMENT, UNKNOWN_REQUEST (an id this engine never issued). */
PHOTON_API photon_status photon_engine_cancel(photon_engine* engine, uint64_t request_id);

/* Runs one scheduler iteration on the calling thread: takes new requests
 * and cancellations, schedules, runs the model, samples and queues events.
 * Writes the step's counts to *out_stats when it is not NULL (struct_size
 * set by the caller); all zero when there was nothing to do.
 * Errors: INVALID_ARGUMENT; a model or backend failure (e.g. CUDA_ERROR,
 * OUT_OF_MEMORY): the requests of that batch end with FINISH_ERROR events
 * and the engine stays usable.
 * Threading: the host's driver thread; concurrent calls run one at a time.
 * Not needed while the engine's loop runs (photon_engine_start_loop). */
PHOTON_API photon_status photon_engine_step(photon_step_stats* out_stats, photon_engine* engine);

/* Writes whether submitted requests are unfinished. A request is finished
 * once its last event is queued, so poll until it returns no event to
 * collect everything. Threading: any thread. */
PHOTON_API photon_status photon_engine_has_work(bool* out_has_work, const photon_engine* engine);

/* Moves pending events into caller-owned buffers, oldest first:
 *   events:       max_events elements of event_size bytes each (pass
 *                 sizeof(photon_event); photon writes exactly that much per
 *                 event, so an older or newer photon.h works);
 *   text:         text_capacity bytes for the events' text and error pieces;
 *   top_logprobs: top_logprobs_capacity entries.
 * Writes the number of events delivered to *out_num_events (0 when none are
 * pending). Delivers whole events only: those that do not fit stay pending
 * for the next call. Errors: INVALID_ARGUMENT (NULL, max_events 0, an
 * unknown event_size), BUFFER_TOO_SMALL: not even the oldest event fits; it
 * is written to events[0] with its sizes (text_len + error_len bytes,
 * num_top_logprobs entries needed) but stays pending.
 * Ownership: all buffers are the caller's; photon keeps no pointer to them.
 * Threading: any thread; concurrent polls are served one at a time, and
 * every event goes to exactly one of them. */
PHOTON_API photon_status photon_engine_poll(size_t* out_num_events, photon_engine* engine, photon_event* events,
                                            size_t event_size, size_t max_events, char* text, size_t text_capacity,
                                            photon_token_logprob* top_logprobs, size_t top_logprobs_capacity);

/* As photon_engine_poll, but when no event is pending waits up to
 * timeout_ms milliseconds for a step on another thread (e.g. the engine's
 * loop, photon_engine_start_loop) to publish some; *out_num_events is 0
 * after the timeout. Lets a thread that routes events sleep instead of
 * spinning. Threading: any thread; while it waits, other polls of this
 * engine wait behind it (so that events never change order). */
PHOTON_API photon_status photon_engine_poll_wait(size_t* out_num_events, photon_engine* engine, photon_event* events,
                                                 size_t event_size, size_t max_events, char* text,
                                                 size_t text_capacity, photon_token_logprob* top_logprobs,
                                                 size_t top_logprobs_capacity, uint32_t timeout_ms);

/* Starts a thread owned by the engine that steps while there is work, so
 * the host only submits and polls. Errors: INVALID_STATE (already running).
 * Threading: any thread. */
PHOTON_API photon_status photon_engine_start_loop(photon_engine* engine);

/* Stops the loop thread after its current step; a no-op when none runs.
 * Threading: any thread but the loop's. */
PHOTON_API photon_status photon_engine_stop_loop(photon_engine* engine);

/* Writes a snapshot of the engine's counters into *out_metrics (struct_size
 * set by the caller). Errors: INVALID_ARGUMENT. Threading: any thread. */
PHOTON_API photon_status photon_engine_get_metrics(photon_engine_metrics* out_metrics, const photon_engine* engine);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PHOTON_PHOTON_H */
