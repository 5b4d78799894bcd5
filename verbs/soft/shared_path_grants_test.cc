// Copyright dreplay authors.
//
// Tests of the requester half of the same-host path (shared_path.h) against
// a peer that sends grants of its own making: only a grant that answers an
// outstanding ask, covers the request that asked, and stays within
// kMaxGrantBytes is mapped, and a grant whose fds are not there is dropped
// without waiting for them.

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "verbs/shareable_memory.h"
#include "verbs/soft/frame_writer.h"
#include "verbs/soft/shared_path.h"
#include "verbs/soft/shm_link.h"
#include "verbs/soft/socket.h"

namespace dreplay::verbs::soft {
namespace {

constexpr absl::Duration kSetupWait = absl::Seconds(10);
// Far below the second a grant could once hold the provider's thread.
constexpr absl::Duration kNoWait = absl::Milliseconds(200);
constexpr uint64_t kRemoteAddr = uint64_t{1} << 40;  // the peer's address of the range

class SharedPathGrantsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto offer = ShmOffer::Create();
    ASSERT_TRUE(offer.ok()) << offer.status();
    HelloHeader hello = {};
    (*offer)->Fill(&hello);
    peer_ = AnswerShmOffer(hello);
    ASSERT_NE(peer_, nullptr);
    auto link = (*offer)->Complete(absl::Now() + kSetupWait);
    ASSERT_TRUE(link.ok()) << link.status();
    writer_ = std::make_unique<FrameWriter>(-1, nullptr);
    path_ = std::make_unique<SharedPath>(std::move(*link), LinkModel{}, nullptr, 16, writer_.get());
    auto memory = ShareableMemory::Allocate(ShareableMemory::PageBytes(), 0, false);
    ASSERT_TRUE(memory.ok()) << memory.status();
    memory_ = std::move(*memory);
  }

  WorkRequest Write(uint32_t rkey, uint64_t offset, uint32_t length) {
    WorkRequest wr;
    wr.opcode = Opcode::kWrite;
    wr.rkey = rkey;
    wr.remote_addr = kRemoteAddr + offset;
    wr.local_addr = local_.data();
    wr.length = length;
    wr.signaled = false;
    return wr;
  }

  // The peer passes `fd` for `rkey` and then grants `length` bytes of
  // `segment_bytes` under it, writable.
  void Grant(uint32_t rkey, int fd, uint64_t length, uint64_t segment_bytes, bool send_fd = true) {
    if (send_fd) {
      ASSERT_TRUE(peer_->SendFds(rkey, {&fd, 1}).ok());
    }
    FrameHeader h = {};
    h.type = static_cast<uint8_t>(FrameType::kShareGrant);
    h.rkey = rkey;
    h.remote_addr = kRemoteAddr;
    h.aux = kRemoteWrite;
    h.payload_length = sizeof(ShareGrant);
    const ShareGrant grant{length, segment_bytes, 1, 0};
    path_->OnFrame(h, reinterpret_cast<const char*>(&grant));
  }

  int SegmentFd() const {
    return ShareableMemory::FindSegments(memory_.data(), memory_.size())[0].fd;
  }

  // Whether a WRITE of `rkey` goes on a mapping (it then lands in memory_).
  bool Mapped(uint32_t rkey) { return path_->TryExecute(Write(rkey, 8, 8), true, 0, 0); }

  std::unique_ptr<ShmLink> peer_;
  std::unique_ptr<FrameWriter> writer_;
  std::unique_ptr<SharedPath> path_;
  ShareableMemory memory_;
  std::vector<uint8_t> local_ = std::vector<uint8_t>(64, 0x5c);
};

TEST_F(SharedPathGrantsTest, AGrantThatAnswersAnAskIsMapped) {
  path_->NoteKey(Write(1, 0, 64));
  Grant(1, SegmentFd(), memory_.size(), memory_.size());
  ASSERT_TRUE(Mapped(1));
  EXPECT_EQ(static_cast<uint8_t>(memory_.data()[8]), 0x5c);
}

TEST_F(SharedPathGrantsTest, AGrantNobodyAskedForIsIgnored) {
  Grant(2, SegmentFd(), memory_.size(), memory_.size());
  EXPECT_FALSE(Mapped(2));
  EXPECT_EQ(memory_.data()[8], 0);
  // Nor is a second grant for a key already answered.
  path_->NoteKey(Write(3, 0, 64));
  Grant(3, SegmentFd(), 64, memory_.size(), /*send_fd=*/false);  // too short: dropped
  Grant(3, SegmentFd(), memory_.size(), memory_.size());
  EXPECT_FALSE(Mapped(3));
}

TEST_F(SharedPathGrantsTest, AGrantThatMissesTheAskedRangeIsIgnored) {
  path_->NoteKey(Write(4, 2 * memory_.size(), 64));
  Grant(4, SegmentFd(), memory_.size(), memory_.size());
  EXPECT_FALSE(Mapped(4));
}

TEST_F(SharedPathGrantsTest, AGrantLargerThanTheBoundIsNotMapped) {
  // A sparse sealed memfd of twice the bound: mappable, but too large.
  const uint64_t huge = 2 * kMaxGrantBytes;
  Fd fd(memfd_create("dreplay-shm-huge", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  ASSERT_TRUE(fd.valid());
  ASSERT_EQ(ftruncate(fd.get(), static_cast<off_t>(huge)), 0);
  ASSERT_EQ(fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
  path_->NoteKey(Write(5, 0, 64));
  Grant(5, fd.get(), huge, huge);
  EXPECT_FALSE(Mapped(5));
}

TEST_F(SharedPathGrantsTest, AGrantWithoutItsFdsIsDroppedWithoutWaiting) {
  path_->NoteKey(Write(6, 0, 64));
  const absl::Time start = absl::Now();
  Grant(6, SegmentFd(), memory_.size(), memory_.size(), /*send_fd=*/false);
  EXPECT_LT(absl::Now() - start, kNoWait);
  EXPECT_FALSE(Mapped(6));
}

}  // namespace
}  // namespace dreplay::verbs::soft
