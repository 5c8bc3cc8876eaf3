#include "model/sp_model.hpp"

#include <fmt/core.h>
#include <sentencepiece_processor.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "model/utf8.hpp"

namespace photon {
namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";         // U+2581 "▁"
constexpr std::string_view kUnknownSurface = " \xE2\x81\x87 ";   // SentencePiece's " ⁇ "

// Minimal protobuf wire-format reader for the two NormalizerSpec flags that
// change decoding (the library's headers do not expose the model proto).
struct WireReader {
  std::string_view s;
  size_t i = 0;
  bool varint(uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (i >= s.size()) return false;
      const auto b = static_cast<unsigned char>(s[i++]);
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  }
  // Reads one field; `bytes` is set for length-delimited fields.
  bool field(uint32_t& number, uint32_t& wire, uint64_t& value, std::string_view& bytes) {
    uint64_t key;
    if (!varint(key)) return false;
    number = static_cast<uint32_t>(key >> 3);
    wire = static_cast<uint32_t>(key & 7);
    switch (wire) {
      case 0: return varint(value);
      case 1: if (i + 8 > s.size()) return false; i += 8; return true;
      case 5: if (i + 4 > s.size()) return false; i += 4; return true;
      case 2:
        if (!varint(value) || value > s.size() - i) return false;
        bytes = s.substr(i, value);
        i += value;
        return true;
      default: return false;
    }
  }
};

struct NormalizerFlags {
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool has_denormalizer = false;
  std::string unk_surface{kUnknownSurface};  // TrainerSpec.unk_surface (decoded text of <unk>)
};

// Calls f(number, wire, value, bytes) for each top-level field of the message `s` (bytes: the
// payload of a length-delimited field, value: a varint's value or that payload's length); false
// when the message is malformed.
template <class F>
bool for_each_field(std::string_view s, F&& f) {
  WireReader r{s};
  uint32_t number, wire;
  uint64_t value;
  std::string_view bytes;
  while (r.i < s.size()) {
    if (!r.field(number, wire, value, bytes)) return false;
    f(number, wire, value, bytes);
  }
  return true;
}

bool read_normalizer_flags(std::string_view proto, NormalizerFlags& flags) {
  bool ok = true;
  const bool top = for_each_field(proto, [&](uint32_t num, uint32_t wire, uint64_t, std::string_view bytes) {
    if (wire != 2) return;
    if (num == 2) {  // ModelProto.trainer_spec
      ok = ok && for_each_field(bytes, [&](uint32_t n, uint32_t w, uint64_t, std::string_view b) {
             if (w == 2 && n == 44) flags.unk_surface = std::string(b);
           });
    } else if (num == 3) {  // ModelProto.normalizer_spec
      ok = ok && for_each_field(bytes, [&](uint32_t n, uint32_t w, uint64_t v, std::string_view) {
             if (w == 0 && n == 3) flags.add_dummy_prefix = v != 0;
             if (w == 0 && n == 4) flags.remove_extra_whitespaces = v != 0;
           });
    } else if (num == 5) {  // ModelProto.denormalizer_spec
      ok = ok && for_each_field(bytes, [&](uint32_t n, uint32_t w, uint64_t, std::string_view b) {
             if (w == 2 && n == 2 && !b.empty()) flags.has_denormalizer = true;  // precompiled_charsmap
           });
    }
  });
  return top && ok;
}

}  // namespace

SentencePieceModel::~SentencePieceModel() = default;

Result<std::unique_ptr<SentencePieceModel>> SentencePieceModel::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(Errc::file_not_found, fmt::format("{}: cannot open", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string proto = ss.str();
  std::unique_ptr<SentencePieceModel> m(new SentencePieceModel());
  m->sp_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const auto status = m->sp_->LoadFromSerializedProto(proto);
  if (!status.ok())
    return fail(Errc::tokenizer_error, fmt::format("{}: not a SentencePiece model: {}", path, status.ToString()));
  NormalizerFlags flags;
  if (!read_normalizer_flags(proto, flags))
    return fail(Errc::tokenizer_error, fmt::format("{}: malformed model proto (normalizer_spec)", path));
  if (flags.has_denormalizer)
    return fail(Errc::tokenizer_error, fmt::format("{}: denormalizer_spec rules are not supported", path));
  m->strip_leading_space_ = flags.add_dummy_prefix || flags.remove_extra_whitespaces;
  m->remove_extra_whitespaces_ = flags.remove_extra_whitespaces;
  m->unk_surface_ = flags.unk_surface;

  const int n = m->sp_->GetPieceSize();
  if (n <= 0) return fail(Errc::tokenizer_error, fmt::format("{}: the model has no pieces", path));
  m->pieces_.resize(static_cast<size_t>(n));
  for (int id = 0; id < n; ++id) {
    Piece& p = m->pieces_[id];
    const std::string& piece = m->sp_->IdToPiece(id);
    if (m->sp_->IsControl(id)) {
      p.kind = Kind::control;
      p.text = piece;
    } else if (m->sp_->IsUnknown(id)) {
      p.kind = Kind::unknown;
      p.text = piece;
    } else if (m->sp_->IsByte(id)) {
      // "<0xAB>"
      unsigned value = 0;
      if (piece.size() != 6 || piece.compare(0, 3, "<0x") != 0 || piece[5] != '>' ||
          std::sscanf(piece.c_str() + 3, "%2x", &value) != 1)
        return fail(Errc::tokenizer_error, fmt::format("{}: byte piece {} is not <0xXX>: \"{}\"", path, id, piece));
      p.kind = Kind::byte;
      p.text.assign(1, static_cast<char>(value));
    } else {
      p.leading_space = piece.compare(0, kSpaceSymbol.size(), kSpaceSymbol) == 0;
      for (size_t i = 0; i < piece.size();) {
        if (piece.compare(i, kSpaceSymbol.size(), kSpaceSymbol) == 0) {
          p.text.push_back(' ');
          i += kSpaceSymbol.size();
        } else {
          p.text.push_back(piece[i++]);
        }
      }
    }
  }
  m->bos_id_ = m->sp_->bos_id();
  m->eos_id_ = m->sp_->eos_id();
  m->pad_id_ = m->sp_->pad_id();
  return m;
}

Result<void> SentencePieceModel::encode(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return {};
  std::vector<int> ids;
  const auto status = sp_->Encode(text, &ids);
  if (!status.ok()) return fail(Errc::tokenizer_error, "SentencePiece encode failed: " + status.ToString());
  out.insert(out.end(), ids.begin(), ids.end());
  return {};
}

void SentencePieceModel::append_token_bytes(int32_t id, DecodeState& state, std::string& out) const {
  const Piece& p = pieces_[id];
  if (p.kind == Kind::byte) {
    out.append(p.text);
    state.any_text = true;
    return;
  }
  if (state.bos_ws_seen || state.any_text) state.at_start = false;
  state.bos_ws_seen = false;
  std::string_view text = p.text;
  switch (p.kind) {
    case Kind::control:
      text = {};
      break;
    case Kind::unknown:
      text = unk_surface_;
      break;
    default:
      if (state.at_start && strip_leading_space_ && p.leading_space) {
        text.remove_prefix(1);
        state.bos_ws_seen = !remove_extra_whitespaces_;
      }
      break;
  }
  out.append(text);
  if (!text.empty()) state.any_text = true;
}

std::optional<int32_t> SentencePieceModel::token_to_id(std::string_view token) const {
  const int id = sp_->PieceToId(token);
  // PieceToId answers unk_id for unknown text; accept it only for the unk piece itself.
  if (id < 0 || id >= size()) return std::nullopt;
  if (sp_->IdToPiece(id) != token) return std::nullopt;
  return id;
}

std::vector<AddedToken> SentencePieceModel::special_tokens() const {
  std::vector<AddedToken> out;
  for (int32_t id = 0; id < size(); ++id) {
    const Piece& p = pieces_[id];
    if (p.kind != Kind::control && p.kind != Kind::unknown) continue;
    AddedToken t;
    t.id = id;
    t.content = p.text;
    t.special = true;
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace photon
