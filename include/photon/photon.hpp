// photon.hpp: optional, header-only RAII helpers for C++ code that uses the
// C ABI (photon.h) rather than the C++ API (photon/engine.hpp): it needs only
// libphoton's stable C symbols, so it works across libphoton releases of one
// ABI major without a rebuild.
//
//   photon::c::EnginePtr engine;
//   if (photon_status st = photon::c::open_engine(engine, "models/stories260K"); st != PHOTON_OK)
//     std::cerr << photon::c::last_error() << "\n";
//   auto params = photon::c::init<photon_request_params>();
//
// Header-only, C++17. Thread-safety: as the C functions it calls.
#ifndef PHOTON_PHOTON_HPP
#define PHOTON_PHOTON_HPP

#include <memory>
#include <string>

#include "photon/photon.h"

namespace photon::c {

// Deleters for std::unique_ptr; each calls the matching photon_*_destroy
// (which accepts NULL).
struct EngineDeleter {
  void operator()(photon_engine* engine) const noexcept { photon_engine_destroy(engine); }
};
struct TokenizerDeleter {
  void operator()(photon_tokenizer* tokenizer) const noexcept { photon_tokenizer_destroy(tokenizer); }
};
struct CompletionDeleter {
  void operator()(photon_completion* completion) const noexcept { photon_completion_destroy(completion); }
};

using EnginePtr = std::unique_ptr<photon_engine, EngineDeleter>;
using TokenizerPtr = std::unique_ptr<photon_tokenizer, TokenizerDeleter>;
using CompletionPtr = std::unique_ptr<photon_completion, CompletionDeleter>;

// Opens into `out` (reset first; empty on error). Returns the C status.
inline photon_status open_engine(EnginePtr& out, const char* model_dir, const photon_engine_params* params = nullptr) {
  out.reset();
  photon_engine* raw = nullptr;
  photon_status st = photon_engine_open(&raw, model_dir, params);
  out.reset(raw);
  return st;
}

inline photon_status open_tokenizer(TokenizerPtr& out, const char* dir) {
  out.reset();
  photon_tokenizer* raw = nullptr;
  photon_status st = photon_tokenizer_open(&raw, dir);
  out.reset(raw);
  return st;
}

// A params struct filled with photon's defaults (photon_X_params_init with
// this header's size). Output structs (photon_engine_metrics, ...) get their
// struct_size set and the rest zeroed.
template <class T>
T init() {
  T v{};
  v.struct_size = static_cast<uint32_t>(sizeof(T));
  return v;
}
template <>
inline photon_tokenize_params init<photon_tokenize_params>() {
  photon_tokenize_params p;
  photon_tokenize_params_init(&p, sizeof p);
  return p;
}
template <>
inline photon_detokenize_params init<photon_detokenize_params>() {
  photon_detokenize_params p;
  photon_detokenize_params_init(&p, sizeof p);
  return p;
}
template <>
inline photon_chat_message init<photon_chat_message>() {
  photon_chat_message m;
  photon_chat_message_init(&m, sizeof m);
  return m;
}
template <>
inline photon_chat_params init<photon_chat_params>() {
  photon_chat_params p;
  photon_chat_params_init(&p, sizeof p);
  return p;
}
template <>
inline photon_engine_params init<photon_engine_params>() {
  photon_engine_params p;
  photon_engine_params_init(&p, sizeof p);
  return p;
}
template <>
inline photon_request_params init<photon_request_params>() {
  photon_request_params p;
  photon_request_params_init(&p, sizeof p);
  return p;
}

// The calling thread's last error message, copied.
inline std::string last_error() { return std::string(photon_last_error_message()); }

}  // namespace photon::c

#endif  // PHOTON_PHOTON_HPP
