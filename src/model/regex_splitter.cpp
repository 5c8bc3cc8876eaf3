#include "model/regex_splitter.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <fmt/core.h>

namespace photon {

struct RegexSplitter::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

RegexSplitter::RegexSplitter(RegexSplitter&&) noexcept = default;
RegexSplitter& RegexSplitter::operator=(RegexSplitter&&) noexcept = default;
RegexSplitter::~RegexSplitter() = default;

Result<RegexSplitter> RegexSplitter::compile(std::string_view pattern, bool literal) {
  RegexSplitter r;
  r.pattern_ = std::string(pattern);
  r.code_ = std::make_unique<Code>();
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  uint32_t options = PCRE2_UTF | PCRE2_UCP;
  if (literal) options |= PCRE2_LITERAL;
  r.code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &err,
                                &err_offset, nullptr);
  if (!r.code_->code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    return fail(Errc::tokenizer_error, fmt::format("regex '{}' does not compile at offset {}: {}", pattern,
                                                   static_cast<size_t>(err_offset), reinterpret_cast<char*>(msg)));
  }
  r.jit_ = pcre2_jit_compile(r.code_->code, PCRE2_JIT_COMPLETE) == 0;
  return r;
}

Result<void> RegexSplitter::split(std::string_view text, SplitBehavior behavior, bool invert,
                                  std::vector<std::string_view>& out) const {
  if (text.empty()) return {};
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_->code, nullptr);
  if (!md) return fail(Errc::out_of_memory, "pcre2 match data");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const size_t n = text.size();

  // (begin, end, is_match) runs covering the text, in order.
  struct Span {
    size_t b, e;
    bool match;
  };
  // The common case (tokenizers' pre-tokenizer regexes) writes pieces directly.
  const bool direct = behavior == SplitBehavior::isolated && !invert;
  std::vector<Span> spans;
  auto emit = [&](Span s, std::vector<Span>& dst) {
    if (s.e <= s.b) return;
    if (direct) out.push_back(text.substr(s.b, s.e - s.b));
    else dst.push_back(s);
  };
  size_t pos = 0, last = 0;
  Result<void> status;
  while (pos <= n) {
    const int rc = jit_ ? pcre2_jit_match(code_->code, subject, n, pos, PCRE2_NO_UTF_CHECK, md, nullptr)
                        : pcre2_match(code_->code, subject, n, pos, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      status = fail(Errc::tokenizer_error,
                    fmt::format("regex '{}' failed to match: {}", pattern_, reinterpret_cast<char*>(msg)));
      break;
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t b = ov[0], e = ov[1];
    if (e == b) {  // empty match: not a piece; step one character forward
      if (b >= n) break;
      pos = b + 1;
      while (pos < n && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
      continue;
    }
    emit({last, b, false}, spans);
    emit({b, e, true}, spans);
    last = pos = e;
  }
  pcre2_match_data_free(md);
  if (!status) return status;
  emit({last, n, false}, spans);
  if (direct) return {};
  if (invert)
    for (auto& s : spans) s.match = !s.match;

  auto view = [&](size_t b, size_t e) { return text.substr(b, e - b); };
  switch (behavior) {
    case SplitBehavior::isolated:
      for (const auto& s : spans) out.push_back(view(s.b, s.e));
      break;
    case SplitBehavior::removed:
      for (const auto& s : spans)
        if (!s.match) out.push_back(view(s.b, s.e));
      break;
    case SplitBehavior::merged_with_previous: {
      size_t start = 0;
      bool open = false;
      for (const auto& s : spans) {
        if (s.match) {
          out.push_back(view(open ? start : s.b, s.e));
          open = false;
        } else {
          if (open) out.push_back(view(start, s.b));
          start = s.b;
          open = true;
        }
      }
      if (open) out.push_back(view(start, n));
      break;
    }
    case SplitBehavior::merged_with_next: {
      size_t start = 0;
      bool open = false;  // a match waiting for the piece after it
      for (const auto& s : spans) {
        if (s.match) {
          if (open) out.push_back(view(start, s.b));
          start = s.b;
          open = true;
        } else {
          out.push_back(view(open ? start : s.b, s.e));
          open = false;
        }
      }
      if (open) out.push_back(view(start, n));
      break;
    }
    case SplitBehavior::contiguous: {
      size_t i = 0;
      while (i < spans.size()) {
        size_t j = i + 1;
        if (spans[i].match)
          while (j < spans.size() && spans[j].match) ++j;
        out.push_back(view(spans[i].b, spans[j - 1].e));
        i = j;
      }
      break;
    }
  }
  return {};
}

}  // namespace photon
