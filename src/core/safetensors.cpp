#include "core/safetensors.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "core/json_util.hpp"
#include "core/try.hpp"

namespace photon {

namespace {
constexpr std::string_view kSingleFile = "model.safetensors";
constexpr std::string_view kIndexFile = "model.safetensors.index.json";
// Largest element count accepted for one tensor (keeps byte arithmetic far from overflow).
constexpr int64_t kMaxNumel = int64_t(1) << 48;

struct DtypeName {
  std::string_view name;
  DType dtype;
};
constexpr DtypeName kDtypes[] = {
    {"F32", DType::f32}, {"BF16", DType::bf16}, {"F16", DType::f16}, {"I32", DType::i32}, {"I8", DType::i8},
};
}  // namespace

bool safetensors_dtype(std::string_view name, DType& out) noexcept {
  for (const auto& d : kDtypes)
    if (d.name == name) {
      out = d.dtype;
      return true;
    }
  return false;
}

std::string_view safetensors_dtype_name(DType t) noexcept {
  for (const auto& d : kDtypes)
    if (d.dtype == t) return d.name;
  return "?";
}

int64_t SafetensorsTensor::numel() const noexcept {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string SafetensorsTensor::shape_string() const { return fmt::format("[{}]", fmt::join(shape, ", ")); }

namespace {

// One header entry checked on its own (types, dtype, shape x size == span).
Result<SafetensorsTensor> parse_entry(const std::string& name, const nlohmann::json& entry, std::string_view source,
                                      uint64_t& begin, uint64_t& end) {
  const auto bad = [&](std::string_view what) {
    return fail(Errc::bad_json, fmt::format("{}: tensor '{}': {}", source, name, what));
  };
  if (!entry.is_object()) return bad("header entry is not a JSON object");
  auto dt = entry.find("dtype");
  auto sh = entry.find("shape");
  auto off = entry.find("data_offsets");
  if (dt == entry.end() || !dt->is_string()) return bad("\"dtype\" missing or not a string");
  if (sh == entry.end() || !sh->is_array()) return bad("\"shape\" missing or not an array");
  if (off == entry.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
      !(*off)[1].is_number_unsigned())
    return bad("\"data_offsets\" must be two non-negative integers");

  SafetensorsTensor t;
  t.name = name;
  t.file = std::string(source);
  const std::string dtype_str = dt->get<std::string>();
  if (!safetensors_dtype(dtype_str, t.dtype))
    return fail(Errc::unknown_dtype, fmt::format("{}: tensor '{}' has dtype '{}'; photon reads F32, BF16, F16, I32, I8",
                                                 source, name, dtype_str));
  int64_t numel = 1;
  for (const auto& d : *sh) {
    if (!d.is_number_unsigned()) return bad("\"shape\" must hold non-negative integers");
    const uint64_t v = d.get<uint64_t>();
    if (v > uint64_t(kMaxNumel) || (v > 0 && numel > kMaxNumel / int64_t(v)))
      return fail(Errc::bad_offsets, fmt::format("{}: tensor '{}': shape {} is implausibly large", source, name,
                                                 sh->dump()));
    numel *= int64_t(v);
    t.shape.push_back(int64_t(v));
  }
  begin = (*off)[0].get<uint64_t>();
  end = (*off)[1].get<uint64_t>();
  if (begin > end)
    return fail(Errc::bad_offsets,
                fmt::format("{}: tensor '{}': data_offsets [{}, {}] begin after end", source, name, begin, end));
  t.nbytes = size_t(numel) * dtype_size(t.dtype);
  if (end - begin != uint64_t(t.nbytes))
    return fail(Errc::bad_offsets,
                fmt::format("{}: tensor '{}': shape {} of {} is {} bytes but data_offsets [{}, {}] span {}", source,
                            name, t.shape_string(), dtype_str, t.nbytes, begin, end, end - begin));
  return t;
}

}  // namespace

Result<std::vector<SafetensorsTensor>> parse_safetensors(const uint8_t* bytes, size_t size, std::string_view source) {
  if (size < 8)
    return fail(Errc::truncated_file,
                fmt::format("{}: {} bytes, shorter than the 8-byte safetensors header length", source, size));
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
  if (header_len > size - 8)
    return fail(Errc::header_out_of_bounds,
                fmt::format("{}: header length {} runs past the end of the file ({} bytes)", source, header_len, size));
  const std::string_view header(reinterpret_cast<const char*>(bytes + 8), size_t(header_len));
  PHOTON_ASSIGN_OR_RETURN(nlohmann::json root, json::parse(header, fmt::format("{} (safetensors header)", source)));
  if (!root.is_object()) return fail(Errc::bad_json, fmt::format("{}: safetensors header is not a JSON object", source));

  const uint8_t* data = bytes + 8 + header_len;
  const uint64_t data_size = size - 8 - header_len;
  struct Span {
    uint64_t begin, end;
    size_t index;
  };
  std::vector<SafetensorsTensor> tensors;
  std::vector<Span> spans;
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it.value().is_object())
        return fail(Errc::bad_json, fmt::format("{}: \"__metadata__\" is not a JSON object", source));
      continue;
    }
    uint64_t begin = 0, end = 0;
    PHOTON_ASSIGN_OR_RETURN(SafetensorsTensor t, parse_entry(it.key(), it.value(), source, begin, end));
    spans.push_back({begin, end, tensors.size()});
    tensors.push_back(std::move(t));
  }

  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  bool tiled = true;  // the spans cover [0, last end) without gaps, as every writer lays them out
  uint64_t expected_begin = 0;
  for (size_t i = 0; i < spans.size(); ++i) {
    if (i > 0 && spans[i].begin < spans[i - 1].end)
      return fail(Errc::bad_offsets, fmt::format("{}: tensors '{}' [{}, {}] and '{}' [{}, {}] overlap", source,
                                                 tensors[spans[i - 1].index].name, spans[i - 1].begin,
                                                 spans[i - 1].end, tensors[spans[i].index].name, spans[i].begin,
                                                 spans[i].end));
    tiled = tiled && spans[i].begin == expected_begin;
    expected_begin = spans[i].end;
  }
  for (const Span& s : spans) {
    if (s.end <= data_size) continue;
    if (tiled)
      return fail(Errc::truncated_file,
                  fmt::format("{}: the header describes {} bytes of tensor data but the file holds {} (truncated; "
                              "first incomplete tensor '{}')",
                              source, spans.back().end, data_size, tensors[s.index].name));
    return fail(Errc::bad_offsets, fmt::format("{}: tensor '{}': data_offsets [{}, {}] run past the data section "
                                               "({} bytes)",
                                               source, tensors[s.index].name, s.begin, s.end, data_size));
  }
  for (const Span& s : spans) tensors[s.index].data = data + s.begin;
  std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return tensors;
}

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  SafetensorsFile f;
  PHOTON_ASSIGN_OR_RETURN(f.file_, MappedFile::open(path));
  PHOTON_ASSIGN_OR_RETURN(f.tensors_, parse_safetensors(f.file_.data(), f.file_.size(), path));
  return f;
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const noexcept {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const SafetensorsTensor& t, std::string_view n) { return t.name < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

// ---- Checkpoint -------------------------------------------------------------

Result<Checkpoint> Checkpoint::open(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return fail(Errc::file_not_found, fmt::format("{}: no such model folder", dir));
  const std::string single = (fs::path(dir) / kSingleFile).string();
  const std::string index_path = (fs::path(dir) / kIndexFile).string();
  Checkpoint c;

  if (!fs::exists(index_path, ec)) {
    if (!fs::exists(single, ec))
      return fail(Errc::file_not_found,
                  fmt::format("{}: neither {} nor {} found (photon reads safetensors checkpoints)", dir, kSingleFile,
                              kIndexFile));
    PHOTON_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(single));
    c.files_.push_back(std::move(f));
    for (const auto& t : c.files_[0].tensors()) c.index_.push_back(&t);
    return c;
  }

  // Sharded: the index's weight_map assigns each tensor name to a shard file.
  PHOTON_ASSIGN_OR_RETURN(nlohmann::json index, json::parse_file(index_path));
  auto wm = index.is_object() ? index.find("weight_map") : index.end();
  if (!index.is_object() || wm == index.end() || !wm->is_object())
    return fail(Errc::bad_json, fmt::format("{}: \"weight_map\" missing or not an object", index_path));
  std::map<std::string, std::vector<std::string>> by_shard;  // shard file -> tensor names
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it.value().is_string())
      return fail(Errc::bad_json, fmt::format("{}: weight_map entry '{}' is not a file name", index_path, it.key()));
    std::string shard = it.value().get<std::string>();
    if (shard.empty() || shard.find('/') != std::string::npos || shard.find('\\') != std::string::npos ||
        shard == "." || shard == "..")
      return fail(Errc::bad_json, fmt::format("{}: weight_map entry '{}' names '{}', not a file in the folder",
                                              index_path, it.key(), shard));
    by_shard[shard].push_back(it.key());
  }
  if (by_shard.empty()) return fail(Errc::bad_json, fmt::format("{}: weight_map is empty", index_path));
  for (const auto& [shard, names] : by_shard) {
    const std::string shard_path = (fs::path(dir) / shard).string();
    if (!fs::exists(shard_path, ec))
      return fail(Errc::file_not_found,
                  fmt::format("{}: weight_map sends '{}' ({} tensors) to {}, which does not exist", index_path,
                              names.front(), names.size(), shard_path));
    PHOTON_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(shard_path));
    for (const auto& name : names)
      if (f.find(name) == nullptr)
        return fail(Errc::missing_tensor, fmt::format("{}: tensor '{}' is not in {}, where {} places it", shard_path,
                                                      name, shard, kIndexFile));
    c.files_.push_back(std::move(f));
  }
  // Built only once files_ stops growing (its elements' tensor vectors keep their storage when moved).
  size_t file_index = 0;
  for (const auto& [shard, names] : by_shard) {
    const SafetensorsFile& f = c.files_[file_index++];
    for (const auto& name : names) c.index_.push_back(f.find(name));
  }
  std::sort(c.index_.begin(), c.index_.end(), [](const auto* a, const auto* b) { return a->name < b->name; });
  return c;
}

const SafetensorsTensor* Checkpoint::find(std::string_view name) const noexcept {
  auto it = std::lower_bound(index_.begin(), index_.end(), name,
                             [](const SafetensorsTensor* t, std::string_view n) { return t->name < n; });
  return it != index_.end() && (*it)->name == name ? *it : nullptr;
}

std::vector<std::string> Checkpoint::files() const {
  std::vector<std::string> out;
  for (const auto& f : files_) out.push_back(f.path());
  return out;
}

}  // namespace photon
