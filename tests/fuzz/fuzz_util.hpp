// What the fuzz targets share: a property check that crashes (so libFuzzer and
// the replay driver report the input) and a private scratch folder for
// targets whose parser reads files from a folder.
//
// Thread-compatibility: one fuzz target per process, one input at a time.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

// A property every accepted (or rejected) input must keep; a violation is a
// bug in the parser and ends the process like a crash.
#define FUZZ_CHECK(cond)                                                              \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::fprintf(stderr, "%s:%d: fuzz property violated: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                   \
    }                                                                                 \
  } while (0)

namespace photon::fuzz {

// A folder under the system temp dir, unique to this process, removed when
// the process exits normally.
class ScratchDir {
 public:
  ScratchDir() {
    path_ = std::filesystem::temp_directory_path() / ("photon-fuzz-" + std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  std::string str() const { return path_.string(); }
  // Writes (or with an empty `bytes` and remove = true, deletes) `name` in the folder.
  void write(const std::string& name, std::string_view bytes) const {
    std::ofstream f(path_ / name, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), std::streamsize(bytes.size()));
    if (!f) {
      std::fprintf(stderr, "fuzz: cannot write %s\n", (path_ / name).c_str());
      std::abort();
    }
  }
  void remove(const std::string& name) const {
    std::error_code ec;
    std::filesystem::remove(path_ / name, ec);
  }

 private:
  std::filesystem::path path_;
};

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return size == 0 ? std::string_view() : std::string_view(reinterpret_cast<const char*>(data), size);
}

}  // namespace photon::fuzz
