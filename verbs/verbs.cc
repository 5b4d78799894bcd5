// Copyright dreplay authors.
//
// verbs.cc: names of opcodes and completion statuses, the mapping of a
// completion status to absl::Status, the data bytes of work requests, and
// the checks every provider makes before posting.

#include "verbs/verbs.h"

#include <cstddef>
#include <iterator>

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

namespace {

// What there is to know about each WcStatus: its name and the code of the
// absl::Status that a completion with it turns into. One row per status, in
// the enum's order, so that a status is its row's index.
struct WcStatusRow {
  WcStatus status;
  const char* name;
  absl::StatusCode code;
};
constexpr WcStatusRow kWcStatusRows[] = {
    {WcStatus::kSuccess, "SUCCESS", absl::StatusCode::kOk},
    {WcStatus::kLocalLengthError, "LOCAL_LENGTH_ERROR", absl::StatusCode::kInvalidArgument},
    {WcStatus::kLocalProtectionError, "LOCAL_PROTECTION_ERROR", absl::StatusCode::kInvalidArgument},
    {WcStatus::kFlushed, "FLUSHED", absl::StatusCode::kAborted},
    {WcStatus::kRemoteAccessError, "REMOTE_ACCESS_ERROR", absl::StatusCode::kPermissionDenied},
    {WcStatus::kRemoteInvalidRequest, "REMOTE_INVALID_REQUEST", absl::StatusCode::kInvalidArgument},
    {WcStatus::kRemoteOperationError, "REMOTE_OPERATION_ERROR", absl::StatusCode::kInternal},
    {WcStatus::kRetryExceeded, "RETRY_EXCEEDED", absl::StatusCode::kUnavailable},
    {WcStatus::kRnrRetryExceeded, "RNR_RETRY_EXCEEDED", absl::StatusCode::kResourceExhausted},
    {WcStatus::kGeneralError, "GENERAL_ERROR", absl::StatusCode::kInternal},
};

constexpr bool RowsFollowTheEnum() {
  for (size_t i = 0; i < std::size(kWcStatusRows); ++i) {
    if (static_cast<size_t>(kWcStatusRows[i].status) != i) return false;
  }
  return true;
}
static_assert(RowsFollowTheEnum(), "kWcStatusRows is indexed by WcStatus");
static_assert(std::size(kWcStatusRows) == static_cast<size_t>(WcStatus::kGeneralError) + 1,
              "a row for every WcStatus (kGeneralError is the last)");

// The row of `s`; null for a value that is not a WcStatus.
const WcStatusRow* RowOf(WcStatus s) {
  const auto i = static_cast<size_t>(s);
  return i < std::size(kWcStatusRows) ? &kWcStatusRows[i] : nullptr;
}

}  // namespace

const char* WcStatusName(WcStatus s) {
  const WcStatusRow* row = RowOf(s);
  return row != nullptr ? row->name : "UNKNOWN_STATUS";
}

absl::Status Completion::ToStatus() const {
  if (ok()) return absl::OkStatus();
  std::string message =
      absl::StrCat(OpcodeName(opcode), " wr_id=", wr_id, " failed: ", WcStatusName(status));
  if (!detail.empty()) absl::StrAppend(&message, " (", detail, ")");
  const WcStatusRow* row = RowOf(status);
  return absl::Status(row != nullptr ? row->code : absl::StatusCode::kInternal, message);
}

absl::StatusOr<RemoteRegion> QueuePair::BindWindow(const MemoryRegion& /*mr*/, uint64_t /*offset*/,
                                                   uint64_t /*length*/,
                                                   uint32_t /*remote_access*/) {
  return absl::UnimplementedError("this provider has no memory windows");
}

void CountInitiated(absl::Span<const WorkRequest> wrs, QueuePairTraffic* t) {
  for (const WorkRequest& wr : wrs) {
    switch (wr.opcode) {
      case Opcode::kWrite:
      case Opcode::kWriteWithImm:
        t->initiated_out += wr.length;
        break;
      case Opcode::kRead:
        t->initiated_in += wr.length;
        break;
      case Opcode::kFetchAdd:
      case Opcode::kCompareSwap:
        t->initiated_out += sizeof(uint64_t);
        t->initiated_in += sizeof(uint64_t);
        break;
      case Opcode::kRecv:
        break;
    }
  }
}

absl::Status CheckAtomicAlignment(const WorkRequest& wr) {
  if (wr.opcode != Opcode::kFetchAdd && wr.opcode != Opcode::kCompareSwap) {
    return absl::OkStatus();
  }
  if (wr.remote_addr % kAtomicAlignment == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(OpcodeName(wr.opcode), " wr_id=", wr.wr_id,
                                                 ": remote address 0x", absl::Hex(wr.remote_addr),
                                                 " is not ", kAtomicAlignment, "-byte aligned"));
}

}  // namespace dreplay::verbs
