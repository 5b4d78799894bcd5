// Copyright dreplay authors.

#include "verbs/verbs.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dreplay::verbs {
namespace {

using ::testing::HasSubstr;

TEST(OpcodeNameTest, NamesEveryOpcode) {
  EXPECT_STREQ(OpcodeName(Opcode::kWrite), "WRITE");
  EXPECT_STREQ(OpcodeName(Opcode::kWriteWithImm), "WRITE_WITH_IMM");
  EXPECT_STREQ(OpcodeName(Opcode::kRead), "READ");
  EXPECT_STREQ(OpcodeName(Opcode::kFetchAdd), "FETCH_ADD");
  EXPECT_STREQ(OpcodeName(Opcode::kCompareSwap), "COMPARE_SWAP");
  EXPECT_STREQ(OpcodeName(Opcode::kRecv), "RECV");
  EXPECT_STREQ(OpcodeName(static_cast<Opcode>(99)), "UNKNOWN_OPCODE");
}

TEST(WcStatusNameTest, NamesEveryStatus) {
  EXPECT_STREQ(WcStatusName(WcStatus::kSuccess), "SUCCESS");
  EXPECT_STREQ(WcStatusName(WcStatus::kRemoteAccessError), "REMOTE_ACCESS_ERROR");
  EXPECT_STREQ(WcStatusName(WcStatus::kFlushed), "FLUSHED");
  EXPECT_STREQ(WcStatusName(static_cast<WcStatus>(99)), "UNKNOWN_STATUS");
}

TEST(CompletionTest, SuccessIsOk) {
  Completion c;
  EXPECT_TRUE(c.ok());
  EXPECT_TRUE(c.ToStatus().ok());
}

TEST(CompletionTest, ErrorsMapToStatusCodes) {
  const struct {
    WcStatus status;
    absl::StatusCode code;
  } cases[] = {
      {WcStatus::kLocalLengthError, absl::StatusCode::kInvalidArgument},
      {WcStatus::kLocalProtectionError, absl::StatusCode::kInvalidArgument},
      {WcStatus::kFlushed, absl::StatusCode::kAborted},
      {WcStatus::kRemoteAccessError, absl::StatusCode::kPermissionDenied},
      {WcStatus::kRemoteInvalidRequest, absl::StatusCode::kInvalidArgument},
      {WcStatus::kRemoteOperationError, absl::StatusCode::kInternal},
      {WcStatus::kRetryExceeded, absl::StatusCode::kUnavailable},
      {WcStatus::kRnrRetryExceeded, absl::StatusCode::kResourceExhausted},
      {WcStatus::kGeneralError, absl::StatusCode::kInternal},
  };
  for (const auto& tc : cases) {
    Completion c;
    c.status = tc.status;
    EXPECT_EQ(c.ToStatus().code(), tc.code) << WcStatusName(tc.status);
  }
}

TEST(CompletionTest, MessageNamesOpcodeWrIdStatusAndDetail) {
  Completion c;
  c.wr_id = 1234;
  c.opcode = Opcode::kRead;
  c.status = WcStatus::kRemoteAccessError;
  c.detail = "rkey 0x1 is not registered";
  const std::string message(c.ToStatus().message());
  EXPECT_THAT(message, HasSubstr("READ"));
  EXPECT_THAT(message, HasSubstr("1234"));
  EXPECT_THAT(message, HasSubstr("REMOTE_ACCESS_ERROR"));
  EXPECT_THAT(message, HasSubstr("rkey 0x1 is not registered"));
}

TEST(MemoryRegionTest, ContainsChecksBoundsWithoutOverflow) {
  class Fake : public MemoryRegion {
   public:
    void* addr() const override { return reinterpret_cast<void*>(4096); }
    size_t length() const override { return 100; }
    uint32_t lkey() const override { return 1; }
    uint32_t rkey() const override { return 1; }
    uint32_t access() const override { return 0; }
  } mr;
  auto at = [](uintptr_t p) { return reinterpret_cast<const void*>(p); };
  EXPECT_TRUE(mr.Contains(at(4096), 100));
  EXPECT_TRUE(mr.Contains(at(4195), 1));
  EXPECT_FALSE(mr.Contains(at(4195), 2));
  EXPECT_FALSE(mr.Contains(at(4095), 1));
  EXPECT_FALSE(mr.Contains(at(4100), SIZE_MAX));
  EXPECT_EQ(mr.remote().addr, 4096u);
  EXPECT_EQ(mr.remote().length, 100u);
}

TEST(CheckAtomicAlignmentTest, RefusesAtomicsOnMisalignedRemoteWords) {
  for (const Opcode op : {Opcode::kFetchAdd, Opcode::kCompareSwap}) {
    WorkRequest wr;
    wr.opcode = op;
    wr.wr_id = 7;
    wr.length = 8;
    wr.remote_addr = 0x1000;
    EXPECT_TRUE(CheckAtomicAlignment(wr).ok()) << OpcodeName(op);
    for (const uint64_t offset : {1, 4, 7}) {
      wr.remote_addr = 0x1000 + offset;
      const absl::Status s = CheckAtomicAlignment(wr);
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << OpcodeName(op) << " +" << offset;
      EXPECT_THAT(std::string(s.message()), HasSubstr("aligned"));
    }
  }
}

TEST(CheckAtomicAlignmentTest, LeavesOtherOpcodesAlone) {
  for (const Opcode op : {Opcode::kWrite, Opcode::kWriteWithImm, Opcode::kRead}) {
    WorkRequest wr;
    wr.opcode = op;
    wr.remote_addr = 0x1003;
    EXPECT_TRUE(CheckAtomicAlignment(wr).ok()) << OpcodeName(op);
  }
}

}  // namespace
}  // namespace dreplay::verbs
