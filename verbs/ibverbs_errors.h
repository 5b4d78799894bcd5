// Copyright dreplay authors.
//
// ibverbs_errors.h: libibverbs results as absl::Status and WcStatus.
//
// libibverbs reports failure in three ways, and every call site in the
// ibverbs provider goes through exactly one of these helpers, so each error
// carries the verb's name and a status code derived from errno:
//
//   1. The verb returns 0 or an errno value (ibv_modify_qp, ibv_post_send,
//      ibv_query_port, ibv_dereg_mr, ibv_query_gid_ex, ...):
//        RETURN_IF_ERROR(IbvResultToStatus(ibv_modify_qp(...), "ibv_modify_qp(RTR)"));
//   2. The verb returns NULL and sets errno (ibv_open_device, ibv_alloc_pd,
//      ibv_create_cq, ibv_create_qp, ibv_reg_mr, ...):
//        ASSIGN_OR_RETURN(ibv_pd* pd, IbvCheckPointer(ibv_alloc_pd(ctx), "ibv_alloc_pd"));
//   3. The verb returns a count, negative on failure (ibv_poll_cq):
//        errno = 0;
//        const int n = ibv_poll_cq(cq, k, wc);
//        ASSIGN_OR_RETURN(int got, IbvCountToStatus(n, errno, "ibv_poll_cq"));
//
// Completions: FromIbvWcStatus() maps ibv_wc_status to WcStatus, and
// WcFailureDetail() writes the explanation a failed Completion carries
// (ibv_wc_status_str, numeric status and vendor syndrome).
//
// All functions are pure (apart from reading the errno they are handed) and
// thread-safe.

#ifndef DREPLAY_VERBS_IBVERBS_ERRORS_H_
#define DREPLAY_VERBS_IBVERBS_ERRORS_H_

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "verbs/verbs.h"

namespace dreplay::verbs {

// The status code for an errno value; 0 (errno not set) maps to kInternal.
absl::StatusCode IbvErrnoToCode(int error_number);

// Convention 1. OK when `result` is 0; otherwise an error whose code comes
// from `result` taken as an errno value, with a message such as
// "ibv_modify_qp(RTR): Invalid argument (errno 22)". A negative `result`
// (some providers return -errno) is treated as its absolute value.
absl::Status IbvResultToStatus(int result, absl::string_view verb);

// Convention 2. The error for a verb that returned NULL, given the errno it
// left (`saved_errno`, read right after the call). 0 means the library did
// not say why: kInternal, "ibv_reg_mr: failed without setting errno".
absl::Status IbvNullResultToStatus(int saved_errno, absl::string_view verb);

// Convention 2 for the common case: `p` itself, or the error for NULL with
// the current errno. Call it directly on the verb's result so that errno is
// still the verb's.
template <typename T>
absl::StatusOr<T*> IbvCheckPointer(T* p, absl::string_view verb) {
  if (p != nullptr) return p;
  return IbvNullResultToStatus(errno, verb);
}

// Convention 3. `count` itself when >= 0; otherwise an error naming the
// verb and the raw value, with the code from `saved_errno` (kInternal when
// 0), e.g. "ibv_poll_cq returned -2: Invalid argument (errno 22)".
absl::StatusOr<int> IbvCountToStatus(int count, int saved_errno, absl::string_view verb);

// The WcStatus for a libibverbs completion status. Statuses dreplay never
// provokes (bad response, MW bind, ...) become kGeneralError.
WcStatus FromIbvWcStatus(ibv_wc_status status);

// The `detail` of a failed completion: "<what>: <ibv_wc_status_str> (ibv_wc_status
// <n>, vendor_err 0x<hex>)". `what` names the request, e.g. "RDMA READ wr_id 7
// on rxe0 qpn 0x11".
std::string WcFailureDetail(absl::string_view what, ibv_wc_status status, uint32_t vendor_err);

}  // namespace dreplay::verbs

#endif  // DREPLAY_VERBS_IBVERBS_ERRORS_H_
