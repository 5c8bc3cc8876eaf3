#include "model/tokenizer_json.hpp"

#include <fmt/core.h>

#include "core/json_util.hpp"
#include "core/try.hpp"

namespace photon {
namespace {

using Json = nlohmann::json;

// SAX handler: builds a DOM like nlohmann's own, except under
// root.model.vocab and root.model.merges.
class Handler final : public nlohmann::json_sax<Json> {
 public:
  explicit Handler(TokenizerJson& out) : out_(out) {}

  std::string error;  // a semantic error (the parse stops)

  bool null() override { return value(Json()); }
  bool boolean(bool v) override { return value(Json(v)); }
  bool number_integer(number_integer_t v) override { return value(Json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return value(Json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return value(Json(v)); }
  bool binary(binary_t& v) override { return value(Json::binary(v)); }

  bool string(string_t& v) override {
    if (mode_ == Mode::merges && depth_ == merges_depth_) {  // "a b"
      const size_t sp = v.find(' ');
      if (sp == std::string::npos || v.find(' ', sp + 1) != std::string::npos)
        return stop(fmt::format("model.merges[{}] \"{}\" is not two tokens separated by one space", out_.merges.size(), v));
      out_.merges.emplace_back(v.substr(0, sp), v.substr(sp + 1));
      return true;
    }
    if (mode_ == Mode::merges && depth_ == merges_depth_ + 1) {  // ["a", "b"]
      pair_.push_back(std::move(v));
      return true;
    }
    if (mode_ != Mode::dom) return stop(fmt::format("unexpected string in model.{}", mode_ == Mode::vocab ? "vocab" : "merges"));
    return value(Json(std::move(v)));
  }

  bool start_object(std::size_t) override {
    if (mode_ != Mode::dom) return stop(fmt::format("unexpected object in model.{}", mode_ == Mode::vocab ? "vocab" : "merges"));
    if (entering_special() == Mode::vocab) {
      mode_ = Mode::vocab;
      vocab_depth_ = ++depth_;
      out_.has_vocab = true;
      return true;
    }
    ++depth_;
    return push(Json::object());
  }
  bool end_object() override {
    if (mode_ == Mode::vocab && depth_ == vocab_depth_) {
      mode_ = Mode::dom;
      --depth_;
      return value(Json());  // placeholder under "vocab"
    }
    --depth_;
    return pop();
  }
  bool start_array(std::size_t) override {
    if (mode_ == Mode::merges && depth_ == merges_depth_) {  // one ["a", "b"] merge
      ++depth_;
      pair_.clear();
      return true;
    }
    if (mode_ != Mode::dom) return stop("unexpected array in model.vocab or model.merges");
    if (entering_special() == Mode::merges) {
      mode_ = Mode::merges;
      merges_depth_ = ++depth_;
      out_.has_merges = true;
      return true;
    }
    ++depth_;
    return push(Json::array());
  }
  bool end_array() override {
    if (mode_ == Mode::merges && depth_ == merges_depth_ + 1) {
      --depth_;
      if (pair_.size() != 2) return stop(fmt::format("model.merges[{}] is not a pair of strings", out_.merges.size()));
      out_.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
      return true;
    }
    if (mode_ == Mode::merges && depth_ == merges_depth_) {
      mode_ = Mode::dom;
      --depth_;
      return value(Json());  // placeholder under "merges"
    }
    --depth_;
    return pop();
  }
  bool key(string_t& k) override {
    if (mode_ == Mode::vocab) {
      vocab_key_ = std::move(k);
      return true;
    }
    key_ = std::move(k);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) override {
    if (error.empty()) error = ex.what();
    parse_failed = true;
    return false;
  }
  bool parse_failed = false;

 private:
  enum class Mode { dom, vocab, merges };

  // Whether the container about to open is root.model.vocab / root.model.merges.
  Mode entering_special() const {
    if (stack_.size() == 2 && stack_[0]->is_object() && stack_[1]->is_object() && path_model_ &&
        (key_ == "vocab" || key_ == "merges"))
      return key_ == "vocab" ? Mode::vocab : Mode::merges;
    return Mode::dom;
  }
  bool stop(std::string message) {
    error = std::move(message);
    return false;
  }
  // Adds a scalar (or placeholder) to the current container.
  bool value(Json v) {
    if (mode_ == Mode::vocab) {
      if (!v.is_number_integer())
        return stop(fmt::format("model.vocab[\"{}\"] is not an integer id", vocab_key_));
      out_.vocab.emplace_back(std::move(vocab_key_), v.get<int64_t>());
      return true;
    }
    if (mode_ == Mode::merges) {
      if (depth_ == merges_depth_ + 1 && v.is_string()) {
        pair_.push_back(v.get<std::string>());
        return true;
      }
      return stop(fmt::format("model.merges[{}] is neither \"a b\" nor [\"a\", \"b\"]", out_.merges.size()));
    }
    if (stack_.empty()) {
      out_.root = std::move(v);
      return true;
    }
    Json& parent = *stack_.back();
    if (parent.is_array()) parent.push_back(std::move(v));
    else parent[key_] = std::move(v);
    return true;
  }
  bool push(Json container) {
    Json* slot;
    if (stack_.empty()) {
      out_.root = std::move(container);
      slot = &out_.root;
    } else if (stack_.back()->is_array()) {
      stack_.back()->push_back(std::move(container));
      slot = &stack_.back()->back();
    } else {
      slot = &(*stack_.back())[key_];
      *slot = std::move(container);
    }
    // root.model is the object opened at depth 2 under the key "model".
    if (stack_.size() == 1 && key_ == "model") path_model_ = true;
    else if (stack_.size() == 1) path_model_ = false;
    stack_.push_back(slot);
    return true;
  }
  bool pop() {
    if (stack_.empty()) return stop("unbalanced JSON");
    stack_.pop_back();
    return true;
  }

  TokenizerJson& out_;
  std::vector<Json*> stack_;
  std::string key_, vocab_key_;
  std::vector<std::string> pair_;
  Mode mode_ = Mode::dom;
  int depth_ = 0, vocab_depth_ = -1, merges_depth_ = -1;
  bool path_model_ = false;
};

}  // namespace

Result<TokenizerJson> read_tokenizer_json(const std::string& path) {
  PHOTON_ASSIGN_OR_RETURN(const std::string text, json::read_file(path));
  TokenizerJson out;
  out.vocab.reserve(text.size() / 40);
  out.merges.reserve(text.size() / 40);
  Handler h(out);
  // Syntax errors reach Handler::parse_error (sax_parse does not throw for them).
  const bool ok = nlohmann::json::sax_parse(text, &h, nlohmann::json::input_format_t::json, /*strict=*/true);
  if (!ok || h.parse_failed)
    return fail(h.parse_failed ? Errc::bad_json : Errc::tokenizer_error, fmt::format("{}: {}", path, h.error));
  return out;
}

}  // namespace photon
