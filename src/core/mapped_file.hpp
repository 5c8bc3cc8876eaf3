// MappedFile: a whole file mapped read-only into memory (POSIX mmap).
//
// Ownership: owns the mapping; move-only; unmapped on destruction. Moving
// keeps the mapped address, so pointers into data() stay valid for the
// lifetime of whichever object holds the mapping.
// Thread-compatibility: immutable after open; reads from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "photon/result.hpp"

namespace photon {

class MappedFile {
 public:
  MappedFile() = default;
  MappedFile(MappedFile&& o) noexcept { swap(o); }
  MappedFile& operator=(MappedFile&& o) noexcept {
    MappedFile tmp(std::move(o));
    swap(tmp);
    return *this;
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  // file_not_found when `path` does not exist, io_error when it is not a
  // regular file or cannot be mapped. An empty file maps to data() == nullptr.
  static Result<MappedFile> open(const std::string& path);

  const uint8_t* data() const noexcept { return data_; }
  size_t size() const noexcept { return size_; }
  const std::string& path() const noexcept { return path_; }

 private:
  void swap(MappedFile& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(path_, o.path_);
  }
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace photon
