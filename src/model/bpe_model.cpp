#include "model/bpe_model.hpp"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <climits>
#include <deque>
#include <queue>

#include "core/try.hpp"
#include "model/byte_level.hpp"
#include "model/utf8.hpp"

namespace photon {
namespace {

using json = nlohmann::json;

Unexpected bad(const std::string& file, const std::string& what) {
  return fail(Errc::tokenizer_error, fmt::format("{}: {}", file, what));
}

// GPT-2's pre-tokenizer regex, used by ByteLevel with use_regex=true.
constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

bool get_bool(const json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

}  // namespace

Result<void> BpeModel::parse_normalizer(const json& j, const std::string& file) {
  if (j.is_null()) return {};
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    return bad(file, "normalizer must be null or an object with a \"type\"");
  const std::string type = j["type"].get<std::string>();
  if (type == "Sequence") {
    if (!j.contains("normalizers") || !j["normalizers"].is_array())
      return bad(file, "normalizer Sequence lacks a \"normalizers\" array");
    for (const auto& n : j["normalizers"]) PHOTON_TRY(parse_normalizer(n, file));
    return {};
  }
  if (type == "NFC") normalizers_.push_back(unicode::NormalForm::nfc);
  else if (type == "NFD") normalizers_.push_back(unicode::NormalForm::nfd);
  else if (type == "NFKC") normalizers_.push_back(unicode::NormalForm::nfkc);
  else if (type == "NFKD") normalizers_.push_back(unicode::NormalForm::nfkd);
  else return bad(file, fmt::format("normalizer type \"{}\" is not supported (supported: NFC, NFD, NFKC, NFKD, Sequence)", type));
  return {};
}

Result<void> BpeModel::parse_pre_tokenizer(const json& j, const std::string& file) {
  if (j.is_null()) return {};
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    return bad(file, "pre_tokenizer must be null or an object with a \"type\"");
  const std::string type = j["type"].get<std::string>();
  if (type == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array())
      return bad(file, "pre_tokenizer Sequence lacks a \"pretokenizers\" array");
    for (const auto& p : j["pretokenizers"]) PHOTON_TRY(parse_pre_tokenizer(p, file));
    return {};
  }
  if (type == "ByteLevel") {
    PreTokenizerStep step;
    step.byte_level = true;
    step.add_prefix_space = get_bool(j, "add_prefix_space", true);
    if (get_bool(j, "use_regex", true)) {
      PHOTON_ASSIGN_OR_RETURN(auto re, RegexSplitter::compile(kGpt2Regex, false));
      step.regex = std::make_shared<const RegexSplitter>(std::move(re));
    }
    pre_tokenizer_.push_back(std::move(step));
    return {};
  }
  if (type == "Split") {
    PreTokenizerStep step;
    const auto pat = j.find("pattern");
    if (pat == j.end() || !pat->is_object()) return bad(file, "pre_tokenizer Split lacks a \"pattern\" object");
    std::string pattern;
    bool literal;
    if (pat->contains("Regex") && (*pat)["Regex"].is_string()) {
      pattern = (*pat)["Regex"].get<std::string>();
      literal = false;
    } else if (pat->contains("String") && (*pat)["String"].is_string()) {
      pattern = (*pat)["String"].get<std::string>();
      literal = true;
    } else {
      return bad(file, "pre_tokenizer Split pattern must be {\"Regex\": ...} or {\"String\": ...}");
    }
    auto re = RegexSplitter::compile(pattern, literal);
    if (!re) return bad(file, "pre_tokenizer Split: " + re.error().message);
    step.regex = std::make_shared<const RegexSplitter>(std::move(*re));
    const std::string behavior = j.value("behavior", std::string("Isolated"));
    if (behavior == "Isolated") step.behavior = SplitBehavior::isolated;
    else if (behavior == "Removed") step.behavior = SplitBehavior::removed;
    else if (behavior == "MergedWithPrevious") step.behavior = SplitBehavior::merged_with_previous;
    else if (behavior == "MergedWithNext") step.behavior = SplitBehavior::merged_with_next;
    else if (behavior == "Contiguous") step.behavior = SplitBehavior::contiguous;
    else return bad(file, fmt::format("pre_tokenizer Split behavior \"{}\" is unknown", behavior));
    step.invert = get_bool(j, "invert", false);
    pre_tokenizer_.push_back(std::move(step));
    return {};
  }
  return bad(file, fmt::format("pre_tokenizer type \"{}\" is not supported (supported: Split, ByteLevel, Sequence)", type));
}

Result<std::unique_ptr<BpeModel>> BpeModel::from_json(const TokenizerJson& tj, const std::vector<AddedToken>& added,
                                                      const std::string& file) {
  std::unique_ptr<BpeModel> m(new BpeModel());
  const json& root = tj.root;
  if (!root.is_object()) return bad(file, "the top level is not a JSON object");
  const auto model_it = root.find("model");
  if (model_it == root.end() || !model_it->is_object()) return bad(file, "no \"model\" object");
  const json& model = *model_it;
  const std::string type = model.contains("type") && model["type"].is_string() ? model["type"].get<std::string>() : "";
  if (type != "BPE")
    return bad(file, fmt::format("model.type \"{}\" is not supported (photon reads byte-level BPE tokenizer.json; "
                                 "SentencePiece models are read from tokenizer.model)", type));
  if (model.contains("dropout") && model["dropout"].is_number() && model["dropout"].get<double>() > 0.0)
    return bad(file, "model.dropout is set: BPE dropout is a training feature photon does not apply");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty())
      return bad(file, fmt::format("model.{} is not supported", key));
  }
  m->ignore_merges_ = get_bool(model, "ignore_merges", false);

  PHOTON_TRY(m->parse_normalizer(root.value("normalizer", json()), file));
  PHOTON_TRY(m->parse_pre_tokenizer(root.value("pre_tokenizer", json()), file));
  bool byte_level = false;
  for (const auto& s : m->pre_tokenizer_) byte_level |= s.byte_level;
  if (!byte_level) return bad(file, "pre_tokenizer has no ByteLevel step: only byte-level BPE is supported");
  if (root.contains("decoder") && !root["decoder"].is_null()) {
    const json& d = root["decoder"];
    const std::string dt = d.is_object() && d.contains("type") && d["type"].is_string() ? d["type"].get<std::string>() : "";
    if (dt != "ByteLevel") return bad(file, fmt::format("decoder type \"{}\" is not supported (supported: ByteLevel)", dt));
  }

  // Vocabulary.
  if (!tj.has_vocab || tj.vocab.empty()) return bad(file, "model.vocab is missing or not a non-empty object");
  int32_t max_id = -1;
  for (const auto& [text, id] : tj.vocab) {
    if (id < 0 || id > INT32_MAX / 2) return bad(file, fmt::format("model.vocab[\"{}\"] = {} is out of range", text, id));
    max_id = std::max(max_id, static_cast<int32_t>(id));
  }
  for (const auto& t : added) {
    if (t.id < 0 || t.id > INT32_MAX / 2) return bad(file, fmt::format("added token \"{}\" has id {} out of range", t.content, t.id));
    max_id = std::max(max_id, t.id);
  }
  // Per-id tables are indexed by id, so their size follows the largest id, not
  // the file: one entry with id 10^9 would ask for ~32 GB. Released
  // vocabularies are dense (ids 0..n-1, added tokens right after); at most
  // half of the id space may be unused.
  const size_t n_tokens = tj.vocab.size() + added.size();
  if (static_cast<size_t>(max_id) >= 2 * n_tokens + 1024)
    return bad(file, fmt::format("model.vocab and added_tokens use ids up to {} for {} tokens: ids must be dense "
                                 "(the largest below 2 x tokens + 1024)",
                                 max_id, n_tokens));
  const size_t n_ids = static_cast<size_t>(max_id) + 1;
  m->token_bytes_.assign(n_ids, std::string());
  m->present_.assign(n_ids, 0);
  m->text_vocab_.reserve(tj.vocab.size() + added.size());
  if (m->ignore_merges_) m->bytes_vocab_.reserve(tj.vocab.size());
  for (const auto& [text, id64] : tj.vocab) {
    const auto id = static_cast<int32_t>(id64);
    m->text_vocab_.insert(text, id);
    auto bytes = byte_level::decode(text);
    std::string b = bytes ? std::move(*bytes) : text;
    if (m->ignore_merges_ && bytes) m->bytes_vocab_.insert(b, id);
    m->token_bytes_[id] = std::move(b);
    m->present_[id] = 1;
  }
  for (int b = 0; b < 256; ++b) {
    const std::string symbol = byte_level::encode(std::string(1, static_cast<char>(b)));
    const int32_t id = m->text_vocab_.find(symbol);
    if (id < 0) return bad(file, fmt::format("model.vocab lacks the byte-level token for byte 0x{:02X} (\"{}\")", b, symbol));
    m->byte_ids_[b] = id;
  }
  // Added tokens decode like tokenizers' ByteLevel decoder: through the byte map
  // when every character is in it, else as their UTF-8 text.
  for (const auto& t : added) {
    auto bytes = byte_level::decode(t.content);
    m->token_bytes_[t.id] = bytes ? std::move(*bytes) : t.content;
    m->present_[t.id] = 1;
  }

  // Merges: rank = position in the file.
  if (!tj.has_merges) return bad(file, "model.merges is missing or not an array");
  m->merges_.reserve(tj.merges.size());
  std::string joined;
  for (size_t rank = 0; rank < tj.merges.size(); ++rank) {
    const auto& [left, right] = tj.merges[rank];
    joined.assign(left).append(right);
    const int32_t l = m->text_vocab_.find(left), r = m->text_vocab_.find(right), merged = m->text_vocab_.find(joined);
    if (l < 0 || r < 0 || merged < 0)
      return bad(file, fmt::format("model.merges[{}] (\"{}\", \"{}\") uses a token missing from model.vocab", rank, left, right));
    m->merges_.insert(l, r, MergeMap::Value{static_cast<int32_t>(rank), merged});
  }
  // Added tokens are found by token_to_id too.
  for (const auto& t : added) m->text_vocab_.insert(t.content, t.id);
  return m;
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  const int32_t id = text_vocab_.find(token);
  if (id < 0) return std::nullopt;
  return id;
}

void BpeModel::append_token_bytes(int32_t id, DecodeState& state, std::string& out) const {
  out.append(token_bytes_[id]);
  state.at_start = false;
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.size() == 1) {
    out.push_back(byte_ids_[static_cast<unsigned char>(word[0])]);
    return;
  }
  if (ignore_merges_) {
    const int32_t id = bytes_vocab_.find(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  if (word.size() > BpeWordCache::kMaxWordBytes) {
    merge_word(word, out);
    return;
  }
  const uint64_t h = hash_bytes(word);
  if (cache_.find(word, h, out)) return;
  const size_t before = out.size();
  merge_word(word, out);
  cache_.insert(word, h, out.data() + before, out.size() - before);
}

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& out, size_t heap_threshold) const {
  if (word.size() > std::min(heap_threshold, kScanMax)) merge_heap(word, out);
  else merge_scan(word, out);
}

// Short pieces: repeatedly merge the lowest-ranked adjacent pair (leftmost on
// ties) over small arrays; O(n^2) but n is a word.
void BpeModel::merge_scan(std::string_view word, std::vector<int32_t>& out) const {
  int32_t ids[kScanMax], rank[kScanMax], merged[kScanMax];  // rank[i], merged[i]: pair (i, i+1)
  size_t n = word.size();  // <= kScanMax (encode_word)
  for (size_t i = 0; i < n; ++i) ids[i] = byte_ids_[static_cast<unsigned char>(word[i])];
  auto pair_at = [&](size_t i) {
    const MergeMap::Value* v = merges_.find(ids[i], ids[i + 1]);
    rank[i] = v ? v->rank : INT32_MAX;
    merged[i] = v ? v->id : -1;
  };
  for (size_t i = 0; i + 1 < n; ++i) pair_at(i);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i)
      if (rank[i] < rank[best]) best = i;
    if (rank[best] == INT32_MAX) break;
    ids[best] = merged[best];
    // Remove symbol best+1 and pair (best+1, best+2).
    for (size_t i = best + 1; i + 1 < n; ++i) ids[i] = ids[i + 1];
    for (size_t i = best + 1; i + 2 < n; ++i) {
      rank[i] = rank[i + 1];
      merged[i] = merged[i + 1];
    }
    --n;
    if (best > 0) pair_at(best - 1);
    if (best + 1 < n) pair_at(best);
  }
  out.insert(out.end(), ids, ids + n);
}

// Long pieces: tokenizers' algorithm, a min-heap of candidate merges ordered by
// (rank, position) over a doubly linked list of symbols; stale entries are
// skipped when popped.
void BpeModel::merge_heap(std::string_view word, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id;
    int32_t prev, next;
    bool alive;
  };
  struct Cand {
    int32_t rank, pos, merged;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  const auto n = static_cast<int32_t>(word.size());
  std::vector<Symbol> sym(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) sym[i] = {byte_ids_[static_cast<unsigned char>(word[i])], i - 1, i + 1 < n ? i + 1 : -1, true};
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto push = [&](int32_t pos) {
    const int32_t nx = sym[pos].next;
    if (nx < 0) return;
    if (const MergeMap::Value* v = merges_.find(sym[pos].id, sym[nx].id)) heap.push({v->rank, pos, v->id});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    Symbol& s = sym[c.pos];
    if (!s.alive || s.next < 0) continue;
    const MergeMap::Value* v = merges_.find(s.id, sym[s.next].id);
    if (!v || v->id != c.merged) continue;  // stale: a neighbour changed
    const int32_t right = s.next;
    s.id = c.merged;
    sym[right].alive = false;
    s.next = sym[right].next;
    if (s.next >= 0) sym[s.next].prev = c.pos;
    if (s.prev >= 0) push(s.prev);
    push(c.pos);
  }
  for (int32_t i = 0; i >= 0 && i < n; i = sym[i].next) out.push_back(sym[i].id);
}

Result<void> BpeModel::encode(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return {};
  std::string normalized, scratch;
  std::string_view t = text;
  for (const auto form : normalizers_) {
    PHOTON_TRY(unicode::normalize(form, t, scratch));
    normalized.swap(scratch);
    t = normalized;
  }
  // Pieces are views into `t` or into `owned` (ByteLevel add_prefix_space).
  std::vector<std::string_view> pieces{t}, next;
  std::deque<std::string> owned;  // stable addresses
  for (const auto& step : pre_tokenizer_) {
    next.clear();
    for (std::string_view p : pieces) {
      if (step.byte_level && step.add_prefix_space && !p.empty() && p[0] != ' ') {
        std::string& prefixed = owned.emplace_back(p.size() + 1, ' ');
        p.copy(prefixed.data() + 1, p.size());
        p = prefixed;
      }
      if (step.regex) PHOTON_TRY(step.regex->split(p, step.behavior, step.invert, next));
      else if (!p.empty()) next.push_back(p);
    }
    pieces.swap(next);
  }
  for (std::string_view p : pieces) encode_word(p, out);
  return {};
}

}  // namespace photon
