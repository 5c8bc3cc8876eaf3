// photon::Tokenizer: loading a folder and the model-independent parts of
// encoding and decoding (added tokens, post-processor ids, UTF-8 repair).
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>

#include "core/try.hpp"
#include "model/bpe_model.hpp"
#include "model/chat_template.hpp"
#include "model/sp_model.hpp"
#include "model/tokenizer_config.hpp"
#include "model/tokenizer_impl.hpp"
#include "model/tokenizer_json.hpp"
#include "model/utf8.hpp"
#include "photon/tokenizer.hpp"

namespace photon {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

Unexpected bad(const std::string& file, const std::string& what) {
  return fail(Errc::tokenizer_error, fmt::format("{}: {}", file, what));
}

Result<std::vector<AddedToken>> parse_added_tokens(const json& root, const std::string& file) {
  std::vector<AddedToken> out;
  const auto it = root.find("added_tokens");
  if (it == root.end() || it->is_null()) return out;
  if (!it->is_array()) return bad(file, "\"added_tokens\" is not an array");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& t = (*it)[i];
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") ||
        !t["content"].is_string())
      return bad(file, fmt::format("added_tokens[{}] needs an integer \"id\" and a string \"content\"", i));
    AddedToken a;
    a.id = static_cast<int32_t>(std::clamp<int64_t>(t["id"].get<int64_t>(), -1, INT32_MAX));
    a.content = t["content"].get<std::string>();
    if (a.content.empty()) return bad(file, fmt::format("added_tokens[{}] has empty content", i));
    auto flag = [&](const char* key) { return t.contains(key) && t[key].is_boolean() && t[key].get<bool>(); };
    a.special = flag("special");
    a.lstrip = flag("lstrip");
    a.rstrip = flag("rstrip");
    a.single_word = flag("single_word");
    a.normalized = flag("normalized");
    out.push_back(std::move(a));
  }
  return out;
}

// tokenizers' post_processor: the ids TemplateProcessing puts around a single
// sequence. ByteLevel processors only adjust offsets; others are rejected.
Result<void> parse_post_processor(const json& p, const std::string& file, std::vector<int32_t>& prefix,
                                  std::vector<int32_t>& suffix, bool& found) {
  if (p.is_null()) return {};
  const std::string type = p.is_object() && p.contains("type") && p["type"].is_string() ? p["type"].get<std::string>() : "";
  if (type == "Sequence") {
    if (!p.contains("processors") || !p["processors"].is_array())
      return bad(file, "post_processor Sequence lacks a \"processors\" array");
    for (const auto& q : p["processors"]) PHOTON_TRY(parse_post_processor(q, file, prefix, suffix, found));
    return {};
  }
  if (type == "ByteLevel") return {};
  if (type != "TemplateProcessing")
    return bad(file, fmt::format("post_processor type \"{}\" is not supported (supported: TemplateProcessing, "
                                 "ByteLevel, Sequence)", type));
  if (!p.contains("single") || !p["single"].is_array()) return bad(file, "post_processor TemplateProcessing lacks \"single\"");
  const json specials = p.value("special_tokens", json::object());
  bool seen_sequence = false;
  for (const auto& item : p["single"]) {
    if (item.contains("Sequence")) {
      seen_sequence = true;
      continue;
    }
    if (!item.contains("SpecialToken") || !item["SpecialToken"].contains("id"))
      return bad(file, "post_processor TemplateProcessing \"single\" has an item that is neither Sequence nor SpecialToken");
    const std::string name = item["SpecialToken"]["id"].get<std::string>();
    if (!specials.contains(name) || !specials[name].contains("ids") || !specials[name]["ids"].is_array())
      return bad(file, fmt::format("post_processor special token \"{}\" is not in \"special_tokens\"", name));
    for (const auto& id : specials[name]["ids"]) {
      if (!id.is_number_integer()) return bad(file, fmt::format("post_processor special token \"{}\" has a non-integer id", name));
      (seen_sequence ? suffix : prefix).push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
  }
  found = true;
  return {};
}

// tokenizer.json -> the BPE model, its added tokens and post-processor ids.
Result<std::unique_ptr<BpeModel>> load_bpe(const std::string& path, std::vector<AddedToken>& added,
                                           std::vector<int32_t>& prefix, std::vector<int32_t>& suffix,
                                           bool& has_template) {
  PHOTON_ASSIGN_OR_RETURN(TokenizerJson tj, read_tokenizer_json(path));
  if (!tj.root.is_object()) return bad(path, "the top level is not a JSON object");
  PHOTON_ASSIGN_OR_RETURN(added, parse_added_tokens(tj.root, path));
  PHOTON_ASSIGN_OR_RETURN(auto bpe, BpeModel::from_json(tj, added, path));
  PHOTON_TRY(parse_post_processor(tj.root.value("post_processor", json()), path, prefix, suffix, has_template));
  return bpe;
}

int32_t id_of(const TokenizerModel& model, const std::optional<std::string>& token) {
  if (!token) return -1;
  return model.token_to_id(*token).value_or(-1);
}

}  // namespace

const Tokenizer::Impl& tokenizer_impl(const Tokenizer& t) noexcept { return *t.impl_; }

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Result<Tokenizer> Tokenizer::load(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return fail(Errc::file_not_found, fmt::format("{}: not a directory", dir));
  const std::string json_path = dir + "/tokenizer.json";
  const std::string sp_path = dir + "/tokenizer.model";
  auto impl = std::make_unique<Impl>();
  impl->dir = dir;
  PHOTON_ASSIGN_OR_RETURN(TokenizerSettings settings, read_tokenizer_settings(dir));

  std::vector<AddedToken> added;
  bool has_template = false;
  const bool has_json = fs::exists(json_path, ec), has_sp = fs::exists(sp_path, ec);
  if (!has_json && !has_sp) return fail(Errc::file_not_found, fmt::format("{}: no tokenizer.json or tokenizer.model", dir));
  if (has_json) {
    auto bpe = load_bpe(json_path, added, impl->prefix_ids, impl->suffix_ids, has_template);
    if (bpe) {
      impl->model = std::move(*bpe);
    } else if (!(has_sp && bpe.error().code == Errc::tokenizer_error)) {
      return Unexpected{std::move(bpe).error()};
    }
    // else: a tokenizer.json photon does not read (a Llama-2 folder's
    // Metaspace/byte-fallback BPE) beside the SentencePiece original it was
    // converted from: use the original.
  }
  if (!impl->model) {
    added.clear();
    impl->prefix_ids.clear();
    impl->suffix_ids.clear();
    has_template = false;
    PHOTON_ASSIGN_OR_RETURN(auto sp, SentencePieceModel::load(sp_path));
    added = sp->special_tokens();
    impl->bos_id = sp->bos_id();
    impl->eos_id = sp->eos_id();
    impl->pad_id = sp->pad_id();
    impl->model = std::move(sp);
  }
  const TokenizerModel& model = *impl->model;
  for (const auto& t : added)
    if (!model.has_id(t.id)) return bad(json_path, fmt::format("added token \"{}\" has invalid id {}", t.content, t.id));
  for (int32_t id : impl->prefix_ids)
    if (!model.has_id(id)) return bad(json_path, fmt::format("post_processor adds unknown id {}", id));
  for (int32_t id : impl->suffix_ids)
    if (!model.has_id(id)) return bad(json_path, fmt::format("post_processor adds unknown id {}", id));

  impl->special.assign(static_cast<size_t>(model.size()), 0);
  for (const auto& t : added)
    if (t.special) impl->special[t.id] = 1;
  impl->added = AddedTokenMatcher(added);

  // Special ids: tokenizer_config.json names win over the model's defaults.
  const std::string cfg = dir + "/tokenizer_config.json";
  auto resolve = [&](const std::optional<std::string>& name, const char* field, int32_t& id) -> Result<void> {
    if (!name) return {};
    id = id_of(model, name);
    if (id < 0) return bad(cfg, fmt::format("{} \"{}\" is not a token of the tokenizer", field, *name));
    return {};
  };
  PHOTON_TRY(resolve(settings.bos_token, "bos_token", impl->bos_id));
  PHOTON_TRY(resolve(settings.eos_token, "eos_token", impl->eos_id));
  PHOTON_TRY(resolve(settings.pad_token, "pad_token", impl->pad_id));
  if (impl->pad_id < 0 && settings.config_pad_id && model.has_id(*settings.config_pad_id))
    impl->pad_id = *settings.config_pad_id;

  // Ids added around a sequence: tokenizer.json's TemplateProcessing, else
  // tokenizer_config.json's add_bos_token / add_eos_token (LlamaTokenizer
  // defaults for SentencePiece: BOS yes, EOS no).
  if (!has_template) {
    const bool is_sp = model.kind() == "sentencepiece";
    if (settings.add_bos_token.value_or(is_sp) && impl->bos_id >= 0) impl->prefix_ids = {impl->bos_id};
    if (settings.add_eos_token.value_or(false) && impl->eos_id >= 0) impl->suffix_ids = {impl->eos_id};
  }

  if (impl->eos_id >= 0) impl->eos_ids.push_back(impl->eos_id);
  for (int32_t id : settings.extra_eos_ids)
    if (model.has_id(id)) impl->eos_ids.push_back(id);
  std::sort(impl->eos_ids.begin(), impl->eos_ids.end());
  impl->eos_ids.erase(std::unique(impl->eos_ids.begin(), impl->eos_ids.end()), impl->eos_ids.end());

  impl->chat_template = std::move(settings.chat_template);
  impl->template_kind = detect_chat_template(impl->chat_template);
  impl->bos_token = settings.bos_token.value_or("");
  return Tokenizer(std::move(impl));
}

Result<void> Tokenizer::encode_into(std::string_view text, std::vector<int32_t>& out,
                                    const EncodeOptions& options) const {
  const Impl& im = *impl_;
  std::string repaired;
  if (!utf8::is_valid(text)) {
    repaired = utf8::to_valid(text);
    text = repaired;
  }
  if (options.add_special_tokens) out.insert(out.end(), im.prefix_ids.begin(), im.prefix_ids.end());
  if (im.added.empty()) {
    PHOTON_TRY(im.model->encode(text, out));
  } else {
    std::vector<AddedTokenMatcher::Piece> pieces;
    im.added.split(text, !options.parse_special, pieces);
    for (const auto& p : pieces) {
      if (p.id >= 0) out.push_back(p.id);
      else PHOTON_TRY(im.model->encode(p.text, out));
    }
  }
  if (options.add_special_tokens) out.insert(out.end(), im.suffix_ids.begin(), im.suffix_ids.end());
  return {};
}

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  PHOTON_TRY(encode_into(text, ids, options));
  return ids;
}

Result<std::string> Tokenizer::decode(std::span<const int32_t> ids, const DecodeOptions& options) const {
  const Impl& im = *impl_;
  std::string bytes;
  DecodeState state;
  for (int32_t id : ids) {
    if (!im.valid_id(id)) return fail(Errc::out_of_range, fmt::format("decode: token id {} is not in the vocabulary", id));
    im.append_bytes(id, options.skip_special_tokens, state, bytes);
  }
  std::string text;
  text.reserve(bytes.size());
  utf8::append_lossy(bytes, text, true, im.model->lossy_mode() == LossyMode::per_byte);
  return text;
}

Result<std::string> Tokenizer::token_to_piece(int32_t id) const {
  if (!impl_->valid_id(id)) return fail(Errc::out_of_range, fmt::format("token id {} is not in the vocabulary", id));
  std::string bytes;
  DecodeState state;
  state.at_start = false;  // the piece as it reads inside a text
  impl_->model->append_token_bytes(id, state, bytes);
  return bytes;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const { return impl_->model->token_to_id(token); }
int32_t Tokenizer::vocab_size() const noexcept { return impl_->model->size(); }
bool Tokenizer::is_special(int32_t id) const noexcept { return impl_->valid_id(id) && impl_->special[id]; }
int32_t Tokenizer::bos_token_id() const noexcept { return impl_->bos_id; }
int32_t Tokenizer::eos_token_id() const noexcept { return impl_->eos_id; }
int32_t Tokenizer::pad_token_id() const noexcept { return impl_->pad_id; }
std::span<const int32_t> Tokenizer::eos_token_ids() const noexcept { return impl_->eos_ids; }
bool Tokenizer::is_eos(int32_t id) const noexcept {
  return std::binary_search(impl_->eos_ids.begin(), impl_->eos_ids.end(), id);
}
std::string_view Tokenizer::kind() const noexcept { return impl_->model->kind(); }
ChatTemplateKind Tokenizer::chat_template_kind() const noexcept { return impl_->template_kind; }
const std::string& Tokenizer::chat_template() const noexcept { return impl_->chat_template; }

Result<std::string> Tokenizer::render_chat(std::span<const ChatMessage> messages, const ChatOptions& options) const {
  const ChatTemplateContext ctx{impl_->chat_template, impl_->bos_token};
  return render_chat_template(impl_->template_kind, ctx, messages, options);
}

}  // namespace photon
