// Tokenizer benchmark (a program, not a test).
//
// Corpus: the repository's own text: every .cpp/.hpp/.h/.cu/.cuh/.c/.py/.md/
// .txt/.sh/.cmake file under src/, include/, capi/, examples/, tests/ (not
// tests/data), docs/, scripts/, plus README.md, the license texts and the
// golden texts (hf_reference.json, extra_cases.json, llama.cpp .inp) of
// tests/data/tokenizers: code and prose, English plus the goldens' CJK,
// Cyrillic, Arabic and emoji. Files are read in sorted path order and the
// whole is repeated until it reaches --min-mb. --write-corpus saves it so that
// tests/bench/hf_tokenizer_bench.py times Hugging Face tokenizers on the same
// bytes; --write-ids saves photon's ids (one line per chunk) for its check.
//
// Chunks: the corpus is cut after a newline once a chunk holds >= --chunk
// bytes (default 4096, a typical prompt); each chunk is one encode() call
// with add_special_tokens=false.
//
// Measures, single thread: Tokenizer::load time (min of --load-runs),
// encode MB/s (best of --runs passes over all chunks), decode() MB/s of all
// ids, and DetokenizerStream per-token latency.
#include <fmt/core.h>

#include <time.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "photon/tokenizer.hpp"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// CPU time of this thread: on a shared machine, wall time also counts the
// time other processes held the core.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string build_corpus(const fs::path& root, double min_mb) {
  static const std::vector<std::string> kExt = {".cpp", ".hpp", ".h", ".cu", ".cuh", ".c", ".py", ".md", ".txt", ".sh", ".cmake"};
  std::vector<fs::path> files;
  for (const char* dir : {"src", "include", "capi", "examples", "tests", "docs", "scripts"}) {
    if (!fs::is_directory(root / dir)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root / dir)) {
      if (!e.is_regular_file()) continue;
      const std::string rel = fs::relative(e.path(), root).string();
      if (rel.rfind("tests/data", 0) == 0) continue;
      if (std::find(kExt.begin(), kExt.end(), e.path().extension().string()) != kExt.end()) files.push_back(e.path());
    }
  }
  for (const char* f : {"README.md", "LICENSE", "tests/data/tokenizers/llama3/LICENSE", "tests/data/tokenizers/llama3/USE_POLICY.md",
                        "tests/data/tokenizers/qwen3/LICENSE", "tests/data/tokenizers/llama3/golden/hf_reference.json",
                        "tests/data/tokenizers/qwen3/golden/hf_reference.json", "tests/data/tokenizers/llama3/golden/extra_cases.json",
                        "tests/data/tokenizers/qwen3/golden/extra_cases.json",
                        "tests/data/tokenizers/llama3/golden/ggml-vocab-llama-bpe.gguf.inp", "models/stories260K/SOURCE.md"}) {
    if (fs::exists(root / f)) files.push_back(root / f);
  }
  std::sort(files.begin(), files.end());
  std::string once;
  for (const auto& f : files) once += read_file(f);
  std::string corpus;
  const auto target = static_cast<size_t>(min_mb * 1e6);
  while (!once.empty() && corpus.size() < target) corpus += once;
  return corpus;
}

std::vector<std::string_view> chunk(std::string_view corpus, size_t chunk_bytes) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start < corpus.size()) {
    size_t end = start + chunk_bytes;
    if (end >= corpus.size()) {
      end = corpus.size();
    } else {
      const size_t nl = corpus.find('\n', end);
      end = nl == std::string_view::npos ? corpus.size() : nl + 1;
    }
    out.push_back(corpus.substr(start, end - start));
    start = end;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> models;
  std::string repo = ".", corpus_file, write_corpus, write_ids;
  double min_mb = 4.0;
  size_t chunk_bytes = 4096;
  int runs = 3, load_runs = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        fmt::print(stderr, "{} needs a value\n", a);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--model") models.push_back(next());
    else if (a == "--repo") repo = next();
    else if (a == "--corpus") corpus_file = next();
    else if (a == "--min-mb") min_mb = std::stod(next());
    else if (a == "--chunk") chunk_bytes = std::stoul(next());
    else if (a == "--runs") runs = std::stoi(next());
    else if (a == "--load-runs") load_runs = std::stoi(next());
    else if (a == "--write-corpus") write_corpus = next();
    else if (a == "--write-ids") write_ids = next();
    else {
      fmt::print(stderr,
                 "usage: {} --model DIR [--model DIR...] [--repo ROOT | --corpus FILE] [--min-mb 4] [--chunk 4096]\n"
                 "          [--runs 3] [--load-runs 3] [--write-corpus FILE] [--write-ids FILE]\n",
                 argv[0]);
      return 2;
    }
  }
  if (models.empty()) {
    fmt::print(stderr, "--model DIR is required\n");
    return 2;
  }
  const std::string corpus = corpus_file.empty() ? build_corpus(repo, min_mb) : read_file(corpus_file);
  if (corpus.empty()) {
    fmt::print(stderr, "empty corpus (run from the repository root or pass --repo / --corpus)\n");
    return 2;
  }
  if (!write_corpus.empty()) std::ofstream(write_corpus, std::ios::binary) << corpus;
  const auto chunks = chunk(corpus, chunk_bytes);
  fmt::print("corpus: {:.2f} MB in {} chunks of >= {} bytes\n", corpus.size() / 1e6, chunks.size(), chunk_bytes);

  for (const auto& dir : models) {
    double load_s = 1e9, load_cpu = 1e9;
    std::optional<photon::Tokenizer> tok;
    for (int r = 0; r < std::max(1, load_runs); ++r) {
      const auto t0 = Clock::now();
      const double c0 = thread_cpu_seconds();
      auto t = photon::Tokenizer::load(dir);
      load_s = std::min(load_s, seconds_since(t0));
      load_cpu = std::min(load_cpu, thread_cpu_seconds() - c0);
      if (!t) {
        fmt::print(stderr, "{}: {}\n", dir, t.error().message);
        return 1;
      }
      tok.emplace(std::move(*t));
    }
    std::vector<std::vector<int32_t>> ids(chunks.size());
    double enc_s = 1e9, enc_cpu = 1e9;
    size_t n_tokens = 0;
    for (int r = 0; r < std::max(1, runs); ++r) {
      n_tokens = 0;
      const auto t0 = Clock::now();
      const double c0 = thread_cpu_seconds();
      for (size_t c = 0; c < chunks.size(); ++c) {
        ids[c].clear();
        auto res = tok->encode_into(chunks[c], ids[c], {.add_special_tokens = false});
        if (!res) {
          fmt::print(stderr, "encode: {}\n", res.error().message);
          return 1;
        }
        n_tokens += ids[c].size();
      }
      enc_s = std::min(enc_s, seconds_since(t0));
      enc_cpu = std::min(enc_cpu, thread_cpu_seconds() - c0);
    }
    std::vector<int32_t> all;
    all.reserve(n_tokens);
    for (const auto& v : ids) all.insert(all.end(), v.begin(), v.end());

    auto t0 = Clock::now();
    auto text = tok->decode(all);
    const double dec_s = seconds_since(t0);
    if (!text) {
      fmt::print(stderr, "decode: {}\n", text.error().message);
      return 1;
    }
    photon::DetokenizerStream stream(*tok);
    std::string streamed;
    streamed.reserve(text->size());
    const double c0 = thread_cpu_seconds();
    for (int32_t id : all) streamed += *stream.feed(id);
    streamed += stream.finish();
    const double stream_s = thread_cpu_seconds() - c0;
    if (streamed != *text) {
      fmt::print(stderr, "streamed text differs from decode()\n");
      return 1;
    }
    // Exact unless the tokenizer normalizes (Qwen3: NFC).
    const bool round_trip = *text == corpus;
    fmt::print("{} ({}):\n  load {:.3f} s wall, {:.3f} s cpu\n  encode {:.2f} MB/s wall, {:.2f} MB/s cpu ({} tokens, "
               "{:.2f} bytes/token)\n  decode {:.1f} MB/s wall | stream detok {:.1f} ns/token cpu\n"
               "  decode(encode(x)) == x: {}\n",
               dir, tok->kind(), load_s, load_cpu, corpus.size() / 1e6 / enc_s, corpus.size() / 1e6 / enc_cpu, n_tokens,
               static_cast<double>(corpus.size()) / static_cast<double>(n_tokens),
               corpus.size() / 1e6 / dec_s, stream_s * 1e9 / static_cast<double>(all.size()),
               round_trip ? "yes" : "no");
    if (!write_ids.empty()) {
      std::ofstream out(models.size() == 1 ? write_ids : write_ids + "." + fs::path(dir).filename().string());
      for (const auto& v : ids) {
        for (size_t k = 0; k < v.size(); ++k) out << (k ? " " : "") << v[k];
        out << '\n';
      }
    }
  }
  return 0;
}
