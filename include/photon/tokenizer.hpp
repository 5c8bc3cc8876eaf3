// photon::Tokenizer: text <-> token ids for a Hugging Face model folder, chat
// prompt rendering, incremental detokenization and stop-string matching.
//
// Formats: tokenizer.json (byte-level BPE as Llama 3.x and Qwen3 ship it) or
// tokenizer.model (SentencePiece, Llama-2 style); tokenizer_config.json and
// generation_config.json give BOS/EOS, add_bos and the chat template.
// docs/tokenizer.md says what is supported and how invalid input is handled.
//
// Strings are UTF-8 bytes. Token ids are int32_t.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "photon/export.h"
#include "photon/result.hpp"

namespace photon {

struct EncodeOptions {
  // Adds what the tokenizer adds around a sequence (Llama 3: <|begin_of_text|>
  // from tokenizer.json's post-processor; SentencePiece: BOS/EOS per
  // tokenizer_config.json's add_bos_token / add_eos_token).
  bool add_special_tokens = true;
  // true: special tokens written in the text ("<|eot_id|>") become their ids,
  // as Hugging Face encode() does. false: the text of special tokens is
  // tokenized as ordinary text, so a caller's raw text never yields a special
  // id (non-special added tokens such as Qwen3's <think> are still matched,
  // as with transformers' split_special_tokens=True).
  bool parse_special = true;
};

struct DecodeOptions {
  bool skip_special_tokens = false;  // drop ids of special tokens (BOS, EOS, <|eot_id|>...)
};

// One message of an OpenAI-style conversation.
struct ChatMessage {
  std::string role{};     // "system", "user", "assistant", "tool"
  std::string content{};
  // Qwen3: the reasoning of an earlier assistant turn, when kept apart from
  // `content` (otherwise a <think>...</think> block inside content is used).
  std::optional<std::string> reasoning_content{};
};

struct ChatOptions {
  bool add_generation_prompt = true;  // end with the assistant header
  bool enable_thinking = true;        // Qwen3: false adds an empty <think></think> block
  // Llama 3.1/3.2: the "Today Date" of the system header. Empty: today's date
  // (local time, "%d %b %Y") for templates that call strftime_now (3.2),
  // "26 Jul 2024" for those that do not (3.1).
  std::string date_string{};
};

// The chat template families photon renders without a Jinja engine.
enum class ChatTemplateKind : int32_t {
  none = 0,      // the folder has no chat template
  llama3 = 1,    // Llama 3.0: header ids, <|eot_id|>, no system preamble
  llama3_1 = 2,  // Llama 3.1 / 3.2: adds "Cutting Knowledge Date / Today Date" system header
  qwen3 = 3,     // Qwen3 ChatML with <think> handling and enable_thinking
  unknown = 4,   // a template photon does not know: render_chat fails, pass a rendered prompt
};

// Thread-compatibility: after load, every const member may be called from any
// number of threads at once. Move-only.
class PHOTON_API Tokenizer {
 public:
  // Loads `dir`: tokenizer.json if present, else tokenizer.model (also when
  // tokenizer.json is a kind photon does not read, such as a Llama-2
  // folder's converted SentencePiece, and tokenizer.model is there); plus
  // tokenizer_config.json and generation_config.json (config.json's
  // eos_token_id when generation_config.json is absent) when present.
  // Errors: file_not_found (neither tokenizer file), bad_json, tokenizer_error
  // (malformed or unsupported content; the message names file and field).
  static Result<Tokenizer> load(const std::string& dir);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;
  ~Tokenizer();

  // Invalid UTF-8 in `text` is replaced by U+FFFD (one per maximal invalid
  // subsequence) before tokenizing.
  Result<std::vector<int32_t>> encode(std::string_view text, const EncodeOptions& options = {}) const;
  // Appends to `out` (avoids a vector per call on hot paths).
  Result<void> encode_into(std::string_view text, std::vector<int32_t>& out,
                           const EncodeOptions& options = {}) const;

  // Bytes of the tokens joined, then made valid UTF-8: U+FFFD for each maximal
  // invalid subsequence for BPE (as Hugging Face's decode), for each invalid
  // byte for SentencePiece (as the library). An id that names no token
  // (outside [0, vocab_size()) or a gap in the ids) gives out_of_range.
  Result<std::string> decode(std::span<const int32_t> ids, const DecodeOptions& options = {}) const;

  // The raw bytes one token stands for (possibly a partial UTF-8 sequence);
  // out_of_range for an unknown id. For SentencePiece "▁" is a space here.
  Result<std::string> token_to_piece(int32_t id) const;
  // The id of a token given by its vocabulary text (e.g. "<|eot_id|>"), if any.
  std::optional<int32_t> token_to_id(std::string_view token) const;

  // Number of token ids (model vocabulary plus added tokens): max id + 1.
  int32_t vocab_size() const noexcept;
  bool is_special(int32_t id) const noexcept;

  // -1 when the tokenizer has none.
  int32_t bos_token_id() const noexcept;
  int32_t eos_token_id() const noexcept;  // tokenizer_config.json's eos_token
  int32_t pad_token_id() const noexcept;
  // Every id that ends generation: eos_token plus generation_config.json's
  // eos_token_id (int or list), sorted, unique.
  std::span<const int32_t> eos_token_ids() const noexcept;
  bool is_eos(int32_t id) const noexcept;

  // "bpe" (tokenizer.json) or "sentencepiece" (tokenizer.model).
  std::string_view kind() const noexcept;

  ChatTemplateKind chat_template_kind() const noexcept;
  // The template text from tokenizer_config.json (or chat_template.jinja);
  // empty when there is none.
  const std::string& chat_template() const noexcept;
  // The exact text transformers' apply_chat_template(messages, tokenize=False,
  // add_generation_prompt=..., **kwargs) produces. template_error for an
  // unknown or missing template (the message says which) and for messages the
  // template rejects. Encode the result with add_special_tokens=false.
  Result<std::string> render_chat(std::span<const ChatMessage> messages,
                                  const ChatOptions& options = {}) const;

  struct Impl;  // src/model/tokenizer_impl.hpp

 private:
  friend class DetokenizerStream;
  friend const Impl& tokenizer_impl(const Tokenizer& t) noexcept;  // src/ and tests only
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Turns generated ids into text one id at a time: each feed returns only
// complete UTF-8 (a character split over several tokens is held back until
// it is complete), and the concatenation of every feed plus finish() equals
// tokenizer.decode(all ids) exactly.
// Borrows the tokenizer's internals: the tokenizer must outlive the stream
// (moving the Tokenizer object is fine). Thread-compatible: one thread at a
// time per stream. Move-only.
class PHOTON_API DetokenizerStream {
 public:
  explicit DetokenizerStream(const Tokenizer& tokenizer, const DecodeOptions& options = {});
  DetokenizerStream(DetokenizerStream&&) noexcept;
  DetokenizerStream& operator=(DetokenizerStream&&) noexcept;
  ~DetokenizerStream();

  // Makes the stream continue the text of `context` (typically the prompt)
  // instead of starting a new text: the ids advance the decode state and
  // produce no output, and an incomplete character at their end is completed
  // by the next feeds. Afterwards the feeds of ids g concatenate to
  // decode(context + g) minus decode(context) (for a context that ends on a
  // whole character), which for SentencePiece keeps the first generated
  // word's leading space, as a reader of prompt + continuation expects.
  // Ids the tokenizer does not have (a model's padded vocabulary) add
  // nothing, as they add no text to decode(). Replaces any earlier state.
  void continue_after(std::span<const int32_t> context);
  // The new text this id completes (often empty). The view is valid until the
  // next call on this stream. out_of_range for an unknown id (the stream is
  // unchanged).
  Result<std::string_view> feed(int32_t id);
  // The held-back bytes of an incomplete character at the end, as U+FFFD
  // (empty when none); resets the stream for a new sequence.
  std::string_view finish();
  // Drops all state (held bytes, start-of-text tracking).
  void reset();
  // Bytes held back now (0..3).
  size_t pending_bytes() const noexcept;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Finds stop strings in streamed text. Text that could still be the start of
// a stop string is held back until it is known not to be, so no part of a
// stop string ever reaches the caller, whatever the chunking.
// Thread-compatible; copyable.
class PHOTON_API StopStringMatcher {
 public:
  // invalid_argument for an empty stop string. No stop strings: every feed
  // passes its text through.
  static Result<StopStringMatcher> create(std::vector<std::string> stop_strings);

  struct Output {
    std::string_view text;  // safe to emit now; valid until the next call
    bool stopped = false;   // a stop string was found; `text` ends right before it
  };
  // After a stop, further feeds return {"", true}.
  Output feed(std::string_view chunk);
  // At the end of generation without a stop: the held-back text.
  std::string_view finish();
  bool stopped() const noexcept { return stopped_index_ >= 0; }
  // Index into the stop strings of the one found, -1 before a stop.
  int32_t stopped_index() const noexcept { return stopped_index_; }
  // The longest suffix ever held back: the longest stop string minus one byte.
  size_t max_hold_back() const noexcept { return max_len_ ? max_len_ - 1 : 0; }
  void reset();

 private:
  explicit StopStringMatcher(std::vector<std::string> stops);
  std::vector<std::string> stops_;
  size_t max_len_ = 0;
  std::string pending_;  // held-back text (a proper prefix of some stop string) + new chunk
  std::string out_;
  int32_t stopped_index_ = -1;
};

}  // namespace photon
