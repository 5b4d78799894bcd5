// Copyright dreplay authors.
//
// verbs.cc: names of opcodes and completion statuses, and the mapping of a
// completion status to absl::Status.

#include "verbs/verbs.h"

#include "absl/strings/str_cat.h"

namespace dreplay::verbs {

const char* OpcodeName(Opcode op) {
  switch (op) {
    case Opcode::kWrite:
      return "WRITE";
    case Opcode::kWriteWithImm:
      return "WRITE_WITH_IMM";
    case Opcode::kRead:
      return "READ";
    case Opcode::kFetchAdd:
      return "FETCH_ADD";
    case Opcode::kCompareSwap:
      return "COMPARE_SWAP";
    case Opcode::kRecv:
      return "RECV";
  }
  return "UNKNOWN_OPCODE";
}

const char* WcStatusName(WcStatus s) {
  switch (s) {
    case WcStatus::kSuccess:
      return "SUCCESS";
    case WcStatus::kLocalLengthError:
      return "LOCAL_LENGTH_ERROR";
    case WcStatus::kLocalProtectionError:
      return "LOCAL_PROTECTION_ERROR";
    case WcStatus::kFlushed:
      return "FLUSHED";
    case WcStatus::kRemoteAccessError:
      return "REMOTE_ACCESS_ERROR";
    case WcStatus::kRemoteInvalidRequest:
      return "REMOTE_INVALID_REQUEST";
    case WcStatus::kRemoteOperationError:
      return "REMOTE_OPERATION_ERROR";
    case WcStatus::kRetryExceeded:
      return "RETRY_EXCEEDED";
    case WcStatus::kRnrRetryExceeded:
      return "RNR_RETRY_EXCEEDED";
    case WcStatus::kGeneralError:
      return "GENERAL_ERROR";
  }
  return "UNKNOWN_STATUS";
}

namespace {

absl::StatusCode CodeFor(WcStatus s) {
  switch (s) {
    case WcStatus::kSuccess:
      return absl::StatusCode::kOk;
    case WcStatus::kLocalLengthError:
    case WcStatus::kLocalProtectionError:
    case WcStatus::kRemoteInvalidRequest:
      return absl::StatusCode::kInvalidArgument;
    case WcStatus::kRemoteAccessError:
      return absl::StatusCode::kPermissionDenied;
    case WcStatus::kFlushed:
      return absl::StatusCode::kAborted;
    case WcStatus::kRetryExceeded:
      return absl::StatusCode::kUnavailable;
    case WcStatus::kRnrRetryExceeded:
      return absl::StatusCode::kResourceExhausted;
    case WcStatus::kRemoteOperationError:
    case WcStatus::kGeneralError:
      return absl::StatusCode::kInternal;
  }
  return absl::StatusCode::kInternal;
}

}  // namespace

absl::Status Completion::ToStatus() const {
  if (ok()) return absl::OkStatus();
  std::string message = absl::StrCat(OpcodeName(opcode), " wr_id=", wr_id,
                                     " failed: ", WcStatusName(status));
  if (!detail.empty()) absl::StrAppend(&message, " (", detail, ")");
  return absl::Status(CodeFor(status), message);
}

}  // namespace dreplay::verbs
