// photon::Result<T>: the error-or-value type of every fallible photon call.
//
// The surface follows std::expected (has_value, value, error, and_then,
// transform, or_else, value_or) but is photon's own type, so C++20 and C++23
// consumers agree on its layout. Errc numbers equal the C ABI's photon_status
// numbers (include/photon/photon.h); they are never reused or renumbered.
//
// Thread-compatibility: a Result is a plain value; distinct objects may be
// used from distinct threads.
#pragma once

#include <cstdint>
#include <exception>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "photon/export.h"

namespace photon {

// Error codes. Values are part of the stable ABI: append only.
enum class Errc : int32_t {
  ok = 0,
  invalid_argument = -1,      // a null pointer, a bad value in an API call
  out_of_range = -2,          // an index or token id outside its valid range
  file_not_found = -3,        // a path that does not exist
  io_error = -4,              // read/mmap failure
  truncated_file = -5,        // a file shorter than its format requires
  header_out_of_bounds = -6,  // safetensors header length runs past the file
  bad_json = -7,              // malformed JSON text
  bad_offsets = -8,           // tensor data offsets outside the data or overlapping
  unknown_dtype = -9,         // a dtype string photon does not know
  missing_tensor = -10,       // a tensor the architecture needs is absent
  shape_mismatch = -11,       // a tensor's shape or dtype disagrees with the config
  unknown_architecture = -12, // config.json names an architecture with no factory
  missing_config_key = -13,   // config.json lacks a required key
  invalid_config = -14,       // a config value of the wrong type or out of range
  out_of_memory = -15,        // host or device allocation failed
  buffer_too_small = -16,     // a caller buffer cannot hold the result
  capacity_exceeded = -17,    // a request that can never fit (KV cache, positions)
  cancelled = -18,            // the operation or request was cancelled
  unknown_request = -19,      // no request with that id
  invalid_state = -20,        // a call that the object's state does not allow
  tokenizer_error = -21,      // malformed tokenizer files or undecodable input
  template_error = -22,       // unknown or failing chat template
  cuda_error = -23,           // a CUDA runtime / cuBLAS failure
  unsupported = -24,          // a valid input this build cannot serve (e.g. no CUDA)
  internal = -25,             // a broken invariant inside photon (a bug)
  queue_full = -26,           // the submit queue is at its configured limit
};

// A stable, static, human-readable name for a code ("invalid_argument", ...).
PHOTON_API std::string_view errc_name(Errc code) noexcept;

struct Error {
  Errc code = Errc::internal;
  std::string message;
};

// Thrown only by Result::value() on an error: a programming mistake, never
// a hot-path control flow. Check has_value() first.
class PHOTON_API BadResultAccess : public std::exception {
 public:
  explicit BadResultAccess(Error e) : error_(std::move(e)) {}
  const char* what() const noexcept override { return error_.message.c_str(); }
  const Error& error() const noexcept { return error_; }

 private:
  Error error_;
};

// The error side of a Result, convertible to any Result<T>.
struct Unexpected {
  Error error;
};

[[nodiscard]] inline Unexpected fail(Errc code, std::string message) {
  return Unexpected{Error{code, std::move(message)}};
}
[[nodiscard]] inline Unexpected fail(Error e) { return Unexpected{std::move(e)}; }

template <class T>
class [[nodiscard]] Result {
  static_assert(!std::is_reference_v<T>, "Result<T&> is not supported");

 public:
  using value_type = T;

  template <class U = T,
            std::enable_if_t<std::is_constructible_v<T, U&&> &&
                                 !std::is_same_v<std::decay_t<U>, Result> &&
                                 !std::is_same_v<std::decay_t<U>, Unexpected>,
                             int> = 0>
  Result(U&& v) : ok_(true) {  // NOLINT(google-explicit-constructor)
    new (&value_) T(std::forward<U>(v));
  }
  Result(Unexpected u) : ok_(false) {  // NOLINT(google-explicit-constructor)
    new (&error_) Error(std::move(u.error));
  }
  Result(const Result& o) : ok_(o.ok_) {
    if (ok_) new (&value_) T(o.value_);
    else new (&error_) Error(o.error_);
  }
  Result(Result&& o) noexcept(std::is_nothrow_move_constructible_v<T>) : ok_(o.ok_) {
    if (ok_) new (&value_) T(std::move(o.value_));
    else new (&error_) Error(std::move(o.error_));
  }
  Result& operator=(Result o) noexcept(std::is_nothrow_move_constructible_v<T>) {
    destroy();
    ok_ = o.ok_;
    if (ok_) new (&value_) T(std::move(o.value_));
    else new (&error_) Error(std::move(o.error_));
    return *this;
  }
  ~Result() { destroy(); }

  bool has_value() const noexcept { return ok_; }
  explicit operator bool() const noexcept { return ok_; }

  T& value() & { check(); return value_; }
  const T& value() const& { check(); return value_; }
  T&& value() && { check(); return std::move(value_); }
  T& operator*() & noexcept { return value_; }
  const T& operator*() const& noexcept { return value_; }
  T&& operator*() && noexcept { return std::move(value_); }
  T* operator->() noexcept { return &value_; }
  const T* operator->() const noexcept { return &value_; }

  const Error& error() const& noexcept { return error_; }
  Error&& error() && noexcept { return std::move(error_); }

  template <class U>
  T value_or(U&& fallback) const& {
    return ok_ ? value_ : static_cast<T>(std::forward<U>(fallback));
  }

  // f: T -> Result<U>
  template <class F>
  auto and_then(F&& f) && -> std::invoke_result_t<F, T&&> {
    if (!ok_) return Unexpected{std::move(error_)};
    return std::forward<F>(f)(std::move(value_));
  }
  template <class F>
  auto and_then(F&& f) const& -> std::invoke_result_t<F, const T&> {
    if (!ok_) return Unexpected{error_};
    return std::forward<F>(f)(value_);
  }
  // f: T -> U, giving Result<U>
  template <class F>
  auto transform(F&& f) && -> Result<std::invoke_result_t<F, T&&>> {
    if (!ok_) return Unexpected{std::move(error_)};
    if constexpr (std::is_void_v<std::invoke_result_t<F, T&&>>) {
      std::forward<F>(f)(std::move(value_));
      return {};
    } else {
      return std::forward<F>(f)(std::move(value_));
    }
  }
  // f: Error -> Result<T>
  template <class F>
  Result or_else(F&& f) && {
    if (ok_) return std::move(*this);
    return std::forward<F>(f)(std::move(error_));
  }

 private:
  void check() const {
    if (!ok_) throw BadResultAccess(error_);
  }
  void destroy() noexcept {
    if (ok_) value_.~T();
    else error_.~Error();
  }
  bool ok_;
  union {
    T value_;
    Error error_;
  };
};

template <>
class [[nodiscard]] Result<void> {
 public:
  using value_type = void;
  Result() = default;
  Result(Unexpected u) : ok_(false), error_(std::move(u.error)) {}  // NOLINT

  bool has_value() const noexcept { return ok_; }
  explicit operator bool() const noexcept { return ok_; }
  void value() const {
    if (!ok_) throw BadResultAccess(error_);
  }
  const Error& error() const& noexcept { return error_; }
  Error&& error() && noexcept { return std::move(error_); }

  template <class F>
  auto and_then(F&& f) && -> std::invoke_result_t<F> {
    if (!ok_) return Unexpected{std::move(error_)};
    return std::forward<F>(f)();
  }
  template <class F>
  auto transform(F&& f) && -> Result<std::invoke_result_t<F>> {
    if (!ok_) return Unexpected{std::move(error_)};
    if constexpr (std::is_void_v<std::invoke_result_t<F>>) {
      std::forward<F>(f)();
      return {};
    } else {
      return std::forward<F>(f)();
    }
  }
  template <class F>
  Result or_else(F&& f) && {
    if (ok_) return {};
    return std::forward<F>(f)(std::move(error_));
  }

 private:
  bool ok_ = true;
  Error error_{Errc::ok, {}};
};

}  // namespace photon
