// The extensible-struct rule of the C ABI (photon.h, "Params structs"):
// a struct crosses the boundary with the caller's idea of its size, and
// photon reads or writes exactly min(caller size, photon's size) bytes.
//
// Each struct that crosses lists its fields in a Layout<T> specialization
// (declaration order, PHOTON_CAPI_FIELD). The list serves two purposes:
// a caller size is accepted only if some release of photon.h could have
// produced it (the end of a field, or that end padded to alignof(T), or at
// least sizeof(T)), and layout_is_complete<T>() proves at compile time that
// no field was left out of the list.
//
// Thread-safety: pure functions over caller memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

#include "core/try.hpp"
#include "photon/result.hpp"

namespace photon::capi {

struct FieldSpan {
  size_t offset;
  size_t size;
  size_t align;
  constexpr size_t end() const { return offset + size; }
};

#define PHOTON_CAPI_FIELD(T, f)                                                   \
  ::photon::capi::FieldSpan {                                                     \
    offsetof(T, f), sizeof(static_cast<T*>(nullptr)->f),                          \
        alignof(std::remove_reference_t<decltype(static_cast<T*>(nullptr)->f)>) \
  }

// Specialize with: static constexpr std::string_view name; static constexpr FieldSpan fields[].
template <class T>
struct Layout;

constexpr size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// True when Layout<T>::fields names every field of T, in order, with nothing
// between them but alignment padding.
template <class T>
constexpr bool layout_is_complete() {
  size_t end = 0;
  for (const FieldSpan& f : Layout<T>::fields) {
    if (f.offset != align_up(end, f.align)) return false;
    end = f.end();
  }
  return align_up(end, alignof(T)) == sizeof(T);
}

// Whether `size` is a size of T that some release of photon.h could have had.
template <class T>
constexpr bool is_known_size(size_t size) {
  if (size >= sizeof(T)) return true;
  for (const FieldSpan& f : Layout<T>::fields) {
    if (size == f.end() || size == align_up(f.end(), alignof(T))) return true;
  }
  return false;
}

// Checks a caller-declared size of T: a known size, and (when larger than
// photon's T) the caller's extra bytes at `bytes` are all zero. `what` names
// the size in messages ("params->struct_size", "event_size").
template <class T>
Result<void> check_caller_size(const void* bytes, size_t size, std::string_view what) {
  if (size > UINT32_MAX || !is_known_size<T>(size)) {
    return fail(Errc::invalid_argument,
                std::string(what) + " = " + std::to_string(size) + " is not a size of " +
                    std::string(Layout<T>::name) + " (use sizeof; this libphoton's is " +
                    std::to_string(sizeof(T)) + ")");
  }
  if (bytes != nullptr && size > sizeof(T)) {
    const auto* tail = static_cast<const unsigned char*>(bytes);
    for (size_t i = sizeof(T); i < size; ++i) {
      if (tail[i] != 0) {
        return fail(Errc::invalid_argument,
                    std::string(Layout<T>::name) + " has a non-zero byte at offset " + std::to_string(i) +
                        ", past the " + std::to_string(sizeof(T)) +
                        " bytes this libphoton knows: a field of a newer photon.h is set, which this "
                        "library cannot honour (upgrade libphoton or leave the field at its default)");
      }
    }
  }
  return {};
}

// Reads a params struct (first field `uint32_t struct_size`): NULL gives
// `defaults`; otherwise the caller's bytes over `defaults`.
template <class T>
Result<T> read_params(const T* in, const T& defaults, std::string_view arg_name) {
  static_assert(std::is_trivially_copyable_v<T> && offsetof(T, struct_size) == 0);
  T out = defaults;
  if (in == nullptr) return out;
  const size_t size = in->struct_size;
  PHOTON_TRY(check_caller_size<T>(in, size, std::string(arg_name) + "->struct_size"));
  std::memcpy(static_cast<void*>(&out), static_cast<const void*>(in), size < sizeof(T) ? size : sizeof(T));
  out.struct_size = static_cast<uint32_t>(sizeof(T));
  return out;
}

// photon_X_params_init: `defaults` into the first min(size, sizeof T) bytes of
// `p`, zeros beyond, struct_size = size.
template <class T>
Result<void> init_params(T* p, size_t size, const T& defaults) {
  if (p == nullptr) return fail(Errc::invalid_argument, "params is NULL");
  PHOTON_TRY(check_caller_size<T>(nullptr, size, "struct_size"));
  auto* bytes = reinterpret_cast<unsigned char*>(p);
  const size_t known = size < sizeof(T) ? size : sizeof(T);
  std::memcpy(bytes, static_cast<const void*>(&defaults), known);
  if (size > known) std::memset(bytes + known, 0, size - known);
  p->struct_size = static_cast<uint32_t>(size);
  return {};
}

// Writes `value` into a caller struct of `size` bytes at `dst` (size already
// checked): min(size, sizeof T) bytes of it, zeros beyond.
template <class T>
void write_sized(void* dst, size_t size, const T& value) {
  auto* bytes = static_cast<unsigned char*>(dst);
  const size_t known = size < sizeof(T) ? size : sizeof(T);
  std::memcpy(bytes, static_cast<const void*>(&value), known);
  if (size > known) std::memset(bytes + known, 0, size - known);
}

// Writes an output struct whose struct_size the caller set (`out` non-NULL
// checked here, named `arg_name` in messages): min(struct_size, sizeof T)
// bytes of `value`, zeros beyond, struct_size left as the caller set it.
template <class T>
Result<void> write_out(T* out, T value, std::string_view arg_name) {
  if (out == nullptr) return fail(Errc::invalid_argument, std::string(arg_name) + " is NULL");
  const size_t size = out->struct_size;
  PHOTON_TRY(check_caller_size<T>(nullptr, size, std::string(arg_name) + "->struct_size"));
  value.struct_size = out->struct_size;
  write_sized(out, size, value);
  return {};
}

}  // namespace photon::capi
