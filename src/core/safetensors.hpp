// Reader of Hugging Face safetensors checkpoints, memory-mapped.
//
// File format: an 8-byte little-endian header length N, N bytes of JSON
// `{"__metadata__": {...}, "<name>": {"dtype": "BF16", "shape": [..],
// "data_offsets": [begin, end]}, ...}`, then the data section; offsets are
// relative to its start. Every header is validated before any tensor is
// handed out (see parse_safetensors_header for the checks and their Errc).
//
// Ownership: a SafetensorsFile owns its mapping; SafetensorsTensor::data
// points into it and is valid while the file (or the Checkpoint holding it)
// lives. Thread-compatibility: immutable after open; reads from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.hpp"
#include "core/mapped_file.hpp"
#include "photon/result.hpp"

namespace photon {

struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // little-endian elements, no alignment guarantee (read with memcpy)
  size_t nbytes = 0;
  std::string file;  // the `source` it was parsed from (the file's path), for messages

  int64_t numel() const noexcept;
  // "[2048, 64]" for messages.
  std::string shape_string() const;
};

// safetensors dtype string ("BF16") -> DType; false for names photon does not read.
bool safetensors_dtype(std::string_view name, DType& out) noexcept;
// DType -> safetensors dtype string ("BF16").
std::string_view safetensors_dtype_name(DType t) noexcept;

// Validates a whole safetensors image of `size` bytes at `bytes` and lists its
// tensors (data pointers into `bytes`), sorted by name. `source` names the
// file in messages. Errors:
//   truncated_file        size < 8, or the tensors tile the data section from
//                         offset 0 without gaps but end past the end of the file
//   header_out_of_bounds  8 + N runs past the end of the file
//   bad_json              the header is not a JSON object of well-formed entries
//   unknown_dtype         an entry's dtype is not F32/BF16/F16/I32/I8
//   bad_offsets           begin > end, shape x dtype size != end - begin,
//                         an entry past the data section, or two entries overlapping
Result<std::vector<SafetensorsTensor>> parse_safetensors(const uint8_t* bytes, size_t size, std::string_view source);

// One memory-mapped .safetensors file.
class SafetensorsFile {
 public:
  // MappedFile::open's errors, then parse_safetensors's.
  static Result<SafetensorsFile> open(const std::string& path);

  const std::string& path() const noexcept { return file_.path(); }
  const std::vector<SafetensorsTensor>& tensors() const noexcept { return tensors_; }
  // nullptr when absent.
  const SafetensorsTensor* find(std::string_view name) const noexcept;

 private:
  MappedFile file_;
  std::vector<SafetensorsTensor> tensors_;  // sorted by name
};

// The weights of a Hugging Face model folder: `model.safetensors`, or the
// shards that `model.safetensors.index.json` lists in its weight_map.
class Checkpoint {
 public:
  // Errors: file_not_found when the folder holds neither file or when the
  // index names a shard that does not exist; bad_json for a malformed index;
  // missing_tensor when a shard lacks a tensor the index assigns to it; any
  // SafetensorsFile::open error of a file. Messages name the file and tensor.
  static Result<Checkpoint> open(const std::string& dir);

  // nullptr when absent.
  const SafetensorsTensor* find(std::string_view name) const noexcept;
  // All tensors, sorted by name.
  const std::vector<const SafetensorsTensor*>& tensors() const noexcept { return index_; }
  // The .safetensors files opened, in order.
  std::vector<std::string> files() const;

 private:
  std::vector<SafetensorsFile> files_;
  std::vector<const SafetensorsTensor*> index_;  // into files_[i].tensors(), sorted by name
};

}  // namespace photon
