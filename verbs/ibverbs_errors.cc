// Copyright dreplay authors.

#include "verbs/ibverbs_errors.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dreplay::verbs {
namespace {

// "<strerror> (errno <n>)".
std::string DescribeErrno(int error_number) {
  return absl::StrCat(std::strerror(error_number), " (errno ", error_number, ")");
}

}  // namespace

absl::StatusCode IbvErrnoToCode(int error_number) {
  if (error_number == 0) return absl::StatusCode::kInternal;
  return absl::ErrnoToStatusCode(error_number);
}

absl::Status IbvResultToStatus(int result, absl::string_view verb) {
  if (result == 0) return absl::OkStatus();
  const int error_number = std::abs(result);
  return absl::Status(IbvErrnoToCode(error_number),
                      absl::StrCat(verb, ": ", DescribeErrno(error_number)));
}

absl::Status IbvNullResultToStatus(int saved_errno, absl::string_view verb) {
  if (saved_errno == 0) {
    return absl::InternalError(absl::StrCat(verb, ": failed without setting errno"));
  }
  return absl::Status(IbvErrnoToCode(saved_errno),
                      absl::StrCat(verb, ": ", DescribeErrno(saved_errno)));
}

absl::StatusOr<int> IbvCountToStatus(int count, int saved_errno, absl::string_view verb) {
  if (count >= 0) return count;
  std::string message = absl::StrCat(verb, " returned ", count);
  if (saved_errno != 0) {
    absl::StrAppend(&message, ": ", DescribeErrno(saved_errno));
  }
  return absl::Status(IbvErrnoToCode(saved_errno), message);
}

WcStatus FromIbvWcStatus(ibv_wc_status status) {
  switch (status) {
    case IBV_WC_SUCCESS:
      return WcStatus::kSuccess;
    case IBV_WC_LOC_LEN_ERR:
      return WcStatus::kLocalLengthError;
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_LOC_ACCESS_ERR:
      return WcStatus::kLocalProtectionError;
    case IBV_WC_WR_FLUSH_ERR:
      return WcStatus::kFlushed;
    case IBV_WC_REM_ACCESS_ERR:
      return WcStatus::kRemoteAccessError;
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_REM_INV_RD_REQ_ERR:
      return WcStatus::kRemoteInvalidRequest;
    case IBV_WC_REM_OP_ERR:
      return WcStatus::kRemoteOperationError;
    case IBV_WC_RETRY_EXC_ERR:
      return WcStatus::kRetryExceeded;
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return WcStatus::kRnrRetryExceeded;
    default:
      return WcStatus::kGeneralError;
  }
}

std::string WcFailureDetail(absl::string_view what, ibv_wc_status status, uint32_t vendor_err) {
  return absl::StrFormat("%s: %s (ibv_wc_status %d, vendor_err 0x%x)", what,
                         ibv_wc_status_str(status), static_cast<int>(status), vendor_err);
}

}  // namespace dreplay::verbs
