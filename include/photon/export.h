/* photon symbol visibility. Pure C99 preprocessor, included by photon.h and
 * by the public C++ headers.
 *
 * libphoton is compiled with -fvisibility=hidden and linked with a version
 * script (src/libphoton.map) that exports only photon_* C functions and the
 * photon:: C++ API: a declaration is exported only when it carries
 * PHOTON_API (a function, or a class: its members, vtable and typeinfo).
 *
 * PHOTON_DEPRECATED(msg) marks a declaration deprecated; photon announces a
 * removal one minor release ahead (docs/CHANGELOG-API.md). */
#ifndef PHOTON_EXPORT_H
#define PHOTON_EXPORT_H

#if defined(_WIN32) || defined(__CYGWIN__)
#  if defined(PHOTON_BUILDING_LIBRARY)
#    define PHOTON_API __declspec(dllexport)
#  elif defined(PHOTON_STATIC)
#    define PHOTON_API
#  else
#    define PHOTON_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__) || defined(__clang__)
#  define PHOTON_API __attribute__((visibility("default")))
#else
#  define PHOTON_API
#endif

#if defined(__GNUC__) || defined(__clang__)
#  define PHOTON_DEPRECATED(msg) __attribute__((deprecated(msg)))
#elif defined(_MSC_VER)
#  define PHOTON_DEPRECATED(msg) __declspec(deprecated(msg))
#else
#  define PHOTON_DEPRECATED(msg)
#endif

#endif /* PHOTON_EXPORT_H */
