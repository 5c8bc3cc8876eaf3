// Early-return helpers for photon::Result inside src/ (not part of the public API).
#pragma once

#include "photon/result.hpp"

#define PHOTON_CONCAT_INNER_(a, b) a##b
#define PHOTON_CONCAT_(a, b) PHOTON_CONCAT_INNER_(a, b)

// Evaluates `expr` (a Result<T>); on error returns that error from the
// enclosing function (whose return type must be some Result<U>).
#define PHOTON_TRY(expr)                                             \
  do {                                                               \
    auto&& photon_try_r_ = (expr);                                   \
    if (!photon_try_r_.has_value())                                  \
      return ::photon::Unexpected{std::move(photon_try_r_).error()}; \
  } while (0)

// `PHOTON_ASSIGN_OR_RETURN(auto x, f());` declares/assigns the value or returns the error.
#define PHOTON_ASSIGN_OR_RETURN(lhs, expr) \
  PHOTON_ASSIGN_OR_RETURN_IMPL_(PHOTON_CONCAT_(photon_aor_, __LINE__), lhs, expr)
#define PHOTON_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr)       \
  auto tmp = (expr);                                        \
  if (!tmp.has_value())                                     \
    return ::photon::Unexpected{std::move(tmp).error()};    \
  lhs = std::move(*tmp)
