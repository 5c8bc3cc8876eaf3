// A compiled PCRE2 pattern (UTF + UCP mode, JIT when available) that splits
// text the way tokenizers' Split pre-tokenizer does.
//
// Ownership: owns the compiled code. Thread-safety: split() is const and
// safe to call concurrently (each call uses its own match data).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "photon/result.hpp"

namespace photon {

enum class SplitBehavior {
  isolated,               // matches and the text between them become separate pieces
  removed,                // matches are dropped, the text between them kept
  merged_with_previous,   // each match is appended to the piece before it
  merged_with_next,       // each match is prepended to the piece after it
  contiguous,             // consecutive matches are merged into one piece
};

class RegexSplitter {
 public:
  // `pattern` is a regex, or a literal string when `literal` is true.
  static Result<RegexSplitter> compile(std::string_view pattern, bool literal);

  RegexSplitter(RegexSplitter&&) noexcept;
  RegexSplitter& operator=(RegexSplitter&&) noexcept;
  ~RegexSplitter();

  // Appends the pieces of `text` (valid UTF-8) to `out` as views into `text`;
  // empty pieces are never produced. `invert`: the pattern describes the
  // pieces to keep rather than the delimiters.
  Result<void> split(std::string_view text, SplitBehavior behavior, bool invert,
                     std::vector<std::string_view>& out) const;

  const std::string& pattern() const noexcept { return pattern_; }
  bool jit() const noexcept { return jit_; }

 private:
  RegexSplitter() = default;
  struct Code;
  std::unique_ptr<Code> code_;
  std::string pattern_;
  bool jit_ = false;
};

}  // namespace photon
