// photon::Engine: continuous-batching LLM inference, in-process.
//
// The host submits requests from any thread, drives the engine by calling
// step() on one thread (or asks for an engine-owned loop thread), and drains
// streamed events (one per generated token, the last one carrying the finish
// reason) with poll() from any thread. Memory is explicit: the paged KV cache
// is sized once at open(); a request that could never fit is rejected at
// submit, and an accepted request is never dropped (it ends with a finish
// event: stop, length, cancelled or error).
//
// docs/engine.md describes the request lifecycle, the scheduling policy, the
// prefix cache and the thread model.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "photon/export.h"
#include "photon/result.hpp"
#include "photon/tokenizer.hpp"

namespace photon {

// Identifies a submitted request within its engine; never 0, never reused.
using RequestId = uint64_t;

// Per-request sampling (the engine's sampling contract, src/core/sampling.hpp).
struct SamplingOptions {
  float temperature = 1.0f;         // 0 => greedy (argmax, ties to the lowest id); >= 0
  int32_t top_k = 0;                // keep the k most likely tokens; 0 => off
  float top_p = 1.0f;               // nucleus mass in (0, 1]; 1 => off
  float min_p = 0.0f;               // drop tokens below min_p * p(top token), [0, 1]; 0 => off
  float repetition_penalty = 1.0f;  // > 0; 1 => off. Prompt and generated tokens (HF semantics)
  float presence_penalty = 0.0f;    // [-2, 2]; generated tokens only (OpenAI semantics)
  float frequency_penalty = 0.0f;   // [-2, 2]; generated tokens only (OpenAI semantics)
  // The random stream of this request. Equal seeds give equal tokens whatever
  // else is batched with the request. Absent: drawn per request by the engine.
  std::optional<uint64_t> seed{};
};

struct Request {
  // The prompt: exactly one of prompt_tokens, prompt and messages. The text
  // forms need the tokenizer of the model folder (Engine::tokenizer()).
  std::vector<int32_t> prompt_tokens{};  // ids in [0, vocab)
  std::string prompt{};                  // UTF-8, encoded with the tokenizer's special tokens (BOS) added
  std::vector<ChatMessage> messages{};   // rendered by the model's chat template (`chat` below), then encoded
  SamplingOptions sampling{};
  // Generated tokens at most; 0 => as many as the context allows
  // (min(max_position_embeddings, KV cache tokens) - prompt length).
  int32_t max_tokens = 0;
  // Extra tokens that end generation (reason stop), besides the model's EOS
  // ids (config.json eos_token_id) unless ignore_eos.
  std::vector<int32_t> stop_token_ids{};
  bool ignore_eos = false;
  // Report the n most likely tokens with each generated token, [0, 20].
  int32_t logprobs = 0;
  // Strings that end generation (reason stop) once the generated text contains
  // one; the streamed text stops right before it (the tokens that made it are
  // still reported). Need the tokenizer.
  std::vector<std::string> stop{};
  // Stream the generated text in Event::text (when the engine has a tokenizer).
  // The text continues the prompt's: prompt text + generated text is the
  // decoding of prompt + generated ids (SentencePiece keeps the first
  // generated word's leading space).
  bool detokenize = true;
  bool skip_special_tokens = true;  // leave special tokens (EOS, <|eot_id|>...) out of the text
  // How `messages` are rendered. Kept last: GCC 12 gives a false -Wmaybe-uninitialized
  // for a nested aggregate followed by designated members that may throw.
  ChatOptions chat{};
};

enum class FinishReason : int32_t {
  none = 0,       // not finished (a token event)
  stop = 1,       // a stop token (the event's token) or a stop string ended it
  length = 2,     // max_tokens reached
  cancelled = 3,  // cancel() (no token in this event)
  error = 4,      // the step that served it failed; Event::error says why
};

PHOTON_API const char* finish_reason_name(FinishReason r) noexcept;

struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0.0f;
};

// One streamed event. A request's events arrive in order; the last one has
// finish != none and there is exactly one such.
struct Event {
  RequestId request = 0;
  int32_t token = -1;      // the generated token; -1 for a finish without a token (cancelled, error)
  float logprob = 0.0f;    // log-probability of `token` (after temperature, before top-k/p/min-p)
  std::vector<TokenLogprob> top_logprobs{};  // Request::logprobs most likely tokens, most likely first
  FinishReason finish = FinishReason::none;
  std::string error{};       // finish == error: the failure
  // The text this event completes (UTF-8, possibly empty: a character split
  // over tokens or text that may begin a stop string is held back). The
  // pieces of a request concatenate to its detokenized output, which
  // continues the prompt's text (Request::detokenize).
  std::string text{};
  // On the finish event: the index in Request::stop of the stop string that
  // ended the request (finish stop) or cut its last text; -1 otherwise.
  int32_t stop_string = -1;
};

// A finished request as generate() returns it.
struct Completion {
  RequestId request = 0;
  std::vector<int32_t> tokens{};     // generated tokens (a stop token included)
  std::vector<float> logprobs{};     // [tokens.size()]
  std::vector<std::vector<TokenLogprob>> top_logprobs{};  // [tokens.size()] when Request::logprobs > 0
  FinishReason finish = FinishReason::none;
  std::string error{};
  std::string text{};                // the generated text (when detokenized), continuing the prompt's
  int32_t stop_string = -1;          // Event::stop_string of the finish event
};

struct EngineOptions {
  std::string model_dir{};           // a Hugging Face folder: config.json + *.safetensors
  std::string backend = "auto";    // "cpu", "cuda", or "auto" (CUDA when built with it, a GPU is found and
                                   // its attention serves the model's head_dim; the CPU otherwise)
  int32_t device = 0;              // CUDA device ordinal
  int32_t threads = 0;             // CPU backend compute threads, the calling one included; 0 => all cores.
                                   // With weights "int8", also the threads that quantize while loading
  // KV cache size: at most one of the three. None => 90% of free GPU memory
  // (CUDA) or min(1 GiB, 25% of available RAM) (CPU); either way never more
  // than max_seqs full-length sequences need.
  int32_t kv_blocks = 0;           // blocks of block_size tokens
  uint64_t kv_bytes = 0;           // bytes of KV cache (all layers, K and V)
  double kv_memory_fraction = 0.0; // (0, 1]: share of the backend's free memory after loading weights
  int32_t block_size = 16;         // tokens per KV block
  int32_t max_batch_tokens = 2048; // tokens per step (prefill chunks and decodes)
  int32_t max_seqs = 256;          // sequences running at once
  bool prefix_caching = true;      // share KV blocks of equal prompt prefixes
  bool load_tokenizer = true;      // load model_dir's tokenizer.json / tokenizer.model when present
  // Weights of the linear layers (q/k/v, o, gate/up, down): "auto" keeps the
  // checkpoint's dtype as the backend stores it; "int8" quantizes them at
  // load to symmetric int8 with one f32 scale per int8_group_size input
  // features (~1/2 of bf16's memory; the embedding and LM head stay as they
  // are); "int8-lm-head" quantizes the LM head too (its own copy when tied to
  // the embedding; faster decode steps of up to 16 sequences, slower larger
  // ones on CUDA, where it is dequantized per step). Both need a backend that
  // runs int8 matmuls (cpu and cuda), else open() fails with unsupported.
  std::string weights = "auto";
  int32_t int8_group_size = 128;   // > 0; a shorter last group when it does not divide the layer's inputs
  // Overlapped steps: step N + 1 is scheduled and launched before step N's tokens are read, its
  // decode rows taking those tokens on the device, so the host's turn (scheduling, detokenizing,
  // events) runs while the GPU works; each step's tokens then reach the events one step() call
  // later. "auto": where the backend runs steps asynchronously (CUDA); "on" (also on the CPU,
  // where it only delays the events: for tests); "off".
  std::string step_overlap = "auto";
  // The LM head screen (docs/lm-head-screen.md): where the backend uses one (CUDA), a bf16 LM head
  // also gets an int8 copy (Llama-3.2-1B: 270 MB), and single-sequence decode steps whose draws
  // are greedy or plain temperature stream the copy, then rescore with the bf16 head the few ids
  // its error bound cannot rule out: the same tokens as the bf16 head, logprobs within that bound
  // (under 2e-3 in the tests). false: no copy, every step streams the bf16 head.
  bool lm_head_screen = true;
};

struct StepStats {
  int32_t seqs = 0;       // sequences in the step's batch
  int32_t tokens = 0;     // tokens run through the model
  int32_t sampled = 0;    // tokens generated
  int32_t preempted = 0;  // sequences preempted by this step's schedule
  int32_t finished = 0;   // requests that ended (any reason)
};

struct EngineMetrics {
  int32_t running = 0;            // sequences holding KV blocks
  int32_t waiting = 0;            // queued, preempted ones included
  int32_t kv_blocks_total = 0;
  int32_t kv_blocks_used = 0;     // held by sequences
  int32_t kv_blocks_cached = 0;   // free but keeping a cached prefix
  int32_t block_size = 0;
  double kv_usage = 0.0;          // used / total
  double prefix_hit_rate = 0.0;   // prompt tokens served from the prefix cache / prompt tokens admitted
  uint64_t steps = 0;             // non-empty steps so far
  uint64_t tokens_scheduled = 0;  // tokens run through the model so far
  uint64_t tokens_generated = 0;
  uint64_t preemptions = 0;
  double tokens_per_step = 0.0;   // tokens_scheduled / steps
};

// Thread-safety: submit, cancel, poll, metrics, has_work and generate may be
// called from any thread at once. step() may be called from any thread but
// runs one at a time (concurrent calls wait for each other); with the
// engine-owned loop running the host does not need to call it. Move-only;
// moving or destroying an Engine while another thread uses it is undefined.
class PHOTON_API Engine {
 public:
  // Loads the model, picks the backend and sizes the KV cache.
  // Errors: the model loader's (file_not_found, bad_json, missing_tensor...),
  // invalid_argument (an option out of range, two KV sizes given),
  // unsupported (backend "cuda" in a build without CUDA, weights "int8" on a
  // backend without int8 matmuls), cuda_error (no
  // usable GPU for "cuda"), out_of_memory (the KV budget buys no block, or
  // more than the free memory).
  static Result<Engine> open(const EngineOptions& options);

  Engine(Engine&&) noexcept;
  Engine& operator=(Engine&&) noexcept;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  ~Engine();  // stops the loop thread if running; unfinished requests are dropped with the engine

  // Queues a request; it runs from the next step on. Text prompts are encoded
  // on the calling thread. Errors: invalid_argument or out_of_range (a
  // malformed request, the field named), capacity_exceeded (prompt +
  // max_tokens beyond the KV cache or max_position_embeddings),
  // invalid_state (a text field without a tokenizer), the tokenizer's errors
  // (template_error...).
  Result<RequestId> submit(Request request);
  // Ends a request at the next step with a cancelled event (nothing happens if
  // it already finished). Errors: unknown_request (an id never issued).
  Result<void> cancel(RequestId id);

  // One scheduler iteration on the calling thread: take new requests and
  // cancellations, schedule, run the model, sample, emit events. Returns the
  // step's counts (all zero when there was nothing to do). On a model or
  // backend failure the requests of that batch end with an error event and
  // the error is returned; the engine stays usable. With overlapped steps
  // (EngineOptions::step_overlap) the call launches the next step before it
  // finishes the one the previous call left running, so the events it
  // emits are that step's (StepStats: seqs and tokens count the step it
  // launched; sampled and finished, what it emitted).
  Result<StepStats> step();
  // Whether submitted requests are still unfinished.
  bool has_work() const;

  // Moves every pending event into `out` (appending) and returns how many.
  // Events of requests run by generate() are not returned here.
  size_t poll(std::vector<Event>& out);
  std::vector<Event> poll();
  // As poll(out), but when no event is pending waits up to `timeout` for a
  // step (on any thread, e.g. the loop thread) to publish some; 0 after the
  // timeout. Lets a thread that routes events sleep instead of spinning.
  size_t poll(std::vector<Event>& out, std::chrono::milliseconds timeout);

  // Submits the requests and waits for all of them: steps the engine itself,
  // or waits for the loop thread when it runs. Completions in request order.
  Result<std::vector<Completion>> generate(std::span<const Request> requests);
  Result<Completion> generate(const Request& request);

  // Starts / stops an engine-owned thread that steps while there is work.
  // Errors: invalid_state (start while running). stop_loop waits for the
  // current step and is a no-op when no loop runs.
  Result<void> start_loop();
  void stop_loop();

  EngineMetrics metrics() const;

  // Model facts: vocabulary size, context limit, EOS ids (config.json's and
  // the tokenizer's), KV capacity.
  int32_t vocab_size() const noexcept;
  int32_t max_model_len() const noexcept;
  std::span<const int32_t> eos_token_ids() const noexcept;
  int64_t kv_capacity_tokens() const noexcept;
  // The backend in use ("cpu" or "cuda").
  std::string backend_name() const;
  // The model folder's tokenizer; nullptr when it has none (or load_tokenizer
  // was false). Owned by the engine; const members are thread-safe.
  const Tokenizer* tokenizer() const noexcept;

  class Impl;

 private:
  friend class EngineImplAccess;  // builds an Engine around an Impl (inside libphoton)
  explicit Engine(std::unique_ptr<Impl> impl) noexcept;
  std::unique_ptr<Impl> impl_{};
};

}  // namespace photon
