// Replay driver of the fuzz targets, for builds without libFuzzer (gcc, CI):
// runs LLVMFuzzerTestOneInput over seed inputs, then over deterministic random
// mutations of them (bit flips, byte edits, inserted / deleted / duplicated
// ranges, truncation, splices of two inputs, JSON tokens and extreme numbers),
// bounded by a count and a time budget.
//
//   photon_fuzz_<target> [--mutations N] [--seconds S] [--seed X] [--max-len B] [--timeout T] PATH...
//
// PATH: seed files, or folders whose regular files are seeds. The same
// arguments and seeds give the same inputs in the same order. A crash, an
// abort (uncaught exception, failed check) or an input running longer than
// --timeout seconds writes the input to ./fuzz-failure-<target>.bin, prints
// which input it was, and ends the process with the signal (ctest: failed).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

using Bytes = std::vector<uint8_t>;

// The input being run, for the failure handler (which may only use
// async-signal-safe calls: open, write, close).
const Bytes* g_current = nullptr;
char g_failure_path[512] = "fuzz-failure.bin";
char g_current_label[256] = "";

void write_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::write(fd, c, n);
    if (w <= 0) return;
    c += w;
    n -= size_t(w);
  }
}
void write_str(int fd, const char* s) { write_all(fd, s, std::strlen(s)); }

const char* signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT (abort, failed check or uncaught exception)";
    case SIGFPE: return "SIGFPE";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGALRM: return "SIGALRM (the input ran past --timeout)";
  }
  return "?";
}

extern "C" void on_failure(int sig) {
  write_str(2, "\nfuzz replay: ");
  write_str(2, signal_name(sig));
  write_str(2, " while running ");
  write_str(2, g_current_label);
  if (g_current != nullptr) {
    const int fd = ::open(g_failure_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      write_all(fd, g_current->data(), g_current->size());
      ::close(fd);
      write_str(2, "; input written to ");
      write_str(2, g_failure_path);
    }
  }
  write_str(2, "\n");
  ::signal(sig == SIGALRM ? SIGABRT : sig, SIG_DFL);
  ::raise(sig == SIGALRM ? SIGABRT : sig);
}

// splitmix64: small, fast, and the same on every platform.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return n == 0 ? 0 : size_t(next() % n); }
};

// Tokens that steer JSON and safetensors parsers into their edge cases.
constexpr std::string_view kTokens[] = {
    "{", "}", "[", "]", ",", ":", "\"", "\\", "null", "true", "false", "0", "-1", "-0", "1e308", "-1e308",
    "1e-400", "100000000", "1000000000", "2147483647", "2147483648", "-2147483649", "4294967296", "9223372036854775807",
    "9223372036854775808", "18446744073709551615", "18446744073709551616", "0.5", "1.0", "\"\"", "[]", "{}",
    "\\u0000", "\\ud800", "\\udfff", "\\uffff", "\xc3\xa9", "\xf0\x9f\x98\x80", "\xff", "\xc0\x80",
    "\"dtype\"", "\"shape\"", "\"data_offsets\"", "\"BF16\"", "\"I8\"", "\"F32\"", "\"__metadata__\"",
    "\"vocab\"", "\"merges\"", "\"model\"", "\"type\"", "\"added_tokens\"", "\"id\"", "\"content\"",
    "\"eos_token_id\"", "\"head_dim\"", "\"rope_scaling\"", "\"messages\"", "\"tokens\"",
};
constexpr uint64_t kWords[] = {0, 1, 7, 8, 0x7f, 0x80, 0xff, 0xffff, 0x7fffffff, 0x80000000, 0xffffffff,
                               0x7fffffffffffffffull, 0x8000000000000000ull, 0xffffffffffffffffull};

void mutate_once(Bytes& b, const std::vector<Bytes>& seeds, Rng& rng, size_t max_len) {
  const size_t pos = rng.below(b.size() + 1);
  switch (rng.below(10)) {
    case 0:
      if (!b.empty()) b[rng.below(b.size())] ^= uint8_t(1u << rng.below(8));
      break;
    case 1:
      if (!b.empty()) b[rng.below(b.size())] = uint8_t(rng.next());
      break;
    case 2: {  // insert random bytes
      const size_t n = 1 + rng.below(8);
      for (size_t i = 0; i < n; ++i) b.insert(b.begin() + std::ptrdiff_t(pos), uint8_t(rng.next()));
      break;
    }
    case 3: {  // delete a range
      const size_t n = std::min(b.size() - std::min(pos, b.size()), 1 + rng.below(32));
      b.erase(b.begin() + std::ptrdiff_t(pos), b.begin() + std::ptrdiff_t(pos + n));
      break;
    }
    case 4: {  // duplicate a range somewhere else
      if (b.empty()) break;
      const size_t from = rng.below(b.size());
      const size_t n = std::min(b.size() - from, 1 + rng.below(64));
      const Bytes chunk(b.begin() + std::ptrdiff_t(from), b.begin() + std::ptrdiff_t(from + n));
      b.insert(b.begin() + std::ptrdiff_t(rng.below(b.size() + 1)), chunk.begin(), chunk.end());
      break;
    }
    case 5:  // truncate
      b.resize(pos);
      break;
    case 6: {  // splice: this input's head, another's tail
      const Bytes& other = seeds[rng.below(seeds.size())];
      const size_t cut = rng.below(other.size() + 1);
      b.resize(pos);
      b.insert(b.end(), other.begin() + std::ptrdiff_t(cut), other.end());
      break;
    }
    case 7: {  // insert a token
      const std::string_view t = kTokens[rng.below(std::size(kTokens))];
      b.insert(b.begin() + std::ptrdiff_t(pos), t.begin(), t.end());
      break;
    }
    case 8: {  // replace a run of digits (a JSON number) with a token
      size_t i = rng.below(b.size() + 1);
      while (i < b.size() && !(b[i] >= '0' && b[i] <= '9')) ++i;
      size_t j = i;
      while (j < b.size() && ((b[j] >= '0' && b[j] <= '9') || b[j] == '.' || b[j] == 'e' || b[j] == '-')) ++j;
      const std::string_view t = kTokens[rng.below(std::size(kTokens))];
      b.erase(b.begin() + std::ptrdiff_t(i), b.begin() + std::ptrdiff_t(j));
      b.insert(b.begin() + std::ptrdiff_t(i), t.begin(), t.end());
      break;
    }
    default: {  // overwrite with a little-endian machine word (binary headers)
      const uint64_t w = kWords[rng.below(std::size(kWords))];
      const size_t width = size_t(1) << rng.below(4);  // 1, 2, 4 or 8 bytes
      if (b.size() < width) break;
      const size_t at = rng.below(b.size() - width + 1);
      for (size_t k = 0; k < width; ++k) b[at + k] = uint8_t(w >> (8 * k));
      break;
    }
  }
  if (b.size() > max_len) b.resize(max_len);
}

Bytes read_bytes(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

int usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--mutations N] [--seconds S] [--seed X] [--max-len B] [--timeout T] PATH...\n"
               "  PATH: seed files or folders of seed files\n",
               argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t mutations = 1000, seed = 0x5eed;
  double seconds = 30;
  size_t max_len = 1 << 20;
  unsigned timeout = 25;
  std::vector<std::filesystem::path> paths;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--mutations" && has_value) mutations = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--seconds" && has_value) seconds = std::strtod(argv[++i], nullptr);
    else if (a == "--seed" && has_value) seed = std::strtoull(argv[++i], nullptr, 0);
    else if (a == "--max-len" && has_value) max_len = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--timeout" && has_value) timeout = unsigned(std::strtoul(argv[++i], nullptr, 10));
    else if (!a.empty() && a[0] == '-') return usage(argv[0]);
    else paths.emplace_back(a);
  }
  if (paths.empty()) return usage(argv[0]);

  std::vector<Bytes> seeds;
  std::vector<std::string> names;
  for (const auto& p : paths) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
      std::vector<std::filesystem::path> files;
      for (const auto& e : std::filesystem::directory_iterator(p))
        if (e.is_regular_file()) files.push_back(e.path());
      std::sort(files.begin(), files.end());  // a fixed order: the mutations depend on it
      for (const auto& f : files) {
        seeds.push_back(read_bytes(f));
        names.push_back(f.string());
      }
    } else if (std::filesystem::is_regular_file(p, ec)) {
      seeds.push_back(read_bytes(p));
      names.push_back(p.string());
    } else {
      std::fprintf(stderr, "fuzz replay: %s is neither a file nor a folder\n", p.string().c_str());
      return 2;
    }
  }
  if (seeds.empty()) {
    std::fprintf(stderr, "fuzz replay: no seed inputs found\n");
    return 2;
  }

  const std::string exe = std::filesystem::path(argv[0]).filename().string();
  std::snprintf(g_failure_path, sizeof g_failure_path, "fuzz-failure-%s.bin", exe.c_str());
  for (int sig : {SIGSEGV, SIGABRT, SIGFPE, SIGBUS, SIGILL, SIGALRM}) ::signal(sig, on_failure);

  auto run = [&](const Bytes& input) {
    g_current = &input;
    ::alarm(timeout);
    LLVMFuzzerTestOneInput(input.data(), input.size());
    ::alarm(0);
    g_current = nullptr;
  };

  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < seeds.size(); ++i) {
    std::snprintf(g_current_label, sizeof g_current_label, "seed %s", names[i].c_str());
    run(seeds[i]);
  }
  Rng rng{seed};
  uint64_t done = 0;
  for (; done < mutations; ++done) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > seconds) break;
    const size_t base = rng.below(seeds.size());
    Bytes input = seeds[base];
    const size_t edits = 1 + rng.below(4);
    for (size_t e = 0; e < edits; ++e) mutate_once(input, seeds, rng, max_len);
    std::snprintf(g_current_label, sizeof g_current_label, "mutation %llu (--seed %llu) of %s",
                  static_cast<unsigned long long>(done), static_cast<unsigned long long>(seed),
                  names[base].c_str());
    run(input);
  }
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("fuzz replay %s: %zu seeds and %llu of %llu mutations in %.1f s, no failure\n", exe.c_str(),
              seeds.size(), static_cast<unsigned long long>(done), static_cast<unsigned long long>(mutations),
              elapsed);
  return 0;
}
