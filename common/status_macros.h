// Copyright dreplay authors.
//
// status_macros.h: early-return helpers for absl::Status and absl::StatusOr.
//
//   RETURN_IF_ERROR(expr);            // returns expr's status if not OK
//   ASSIGN_OR_RETURN(auto x, expr);   // x = *expr, or returns expr's status
//
// Both evaluate `expr` exactly once and cost one branch on the OK path.

#ifndef DREPLAY_COMMON_STATUS_MACROS_H_
#define DREPLAY_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define DREPLAY_STATUS_CONCAT_INNER_(a, b) a##b
#define DREPLAY_STATUS_CONCAT_(a, b) DREPLAY_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status) and returns it from the enclosing function
// when it is not OK.
#define RETURN_IF_ERROR(expr)                                              \
  do {                                                                     \
    const ::absl::Status dreplay_status_ = (expr);                         \
    if (ABSL_PREDICT_FALSE(!dreplay_status_.ok())) return dreplay_status_; \
  } while (0)

// Evaluates `rexpr` (an absl::StatusOr<T>); on success moves its value into
// `lhs` (a declaration or an lvalue), otherwise returns its status.
#define ASSIGN_OR_RETURN(lhs, rexpr) \
  DREPLAY_ASSIGN_OR_RETURN_IMPL_(DREPLAY_STATUS_CONCAT_(dreplay_statusor_, __LINE__), lhs, rexpr)

#define DREPLAY_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr)        \
  auto statusor = (rexpr);                                          \
  if (ABSL_PREDICT_FALSE(!statusor.ok())) return statusor.status(); \
  lhs = std::move(statusor).value()

#endif  // DREPLAY_COMMON_STATUS_MACROS_H_
