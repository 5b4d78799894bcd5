// Copyright dreplay authors.
//
// Who holds which frame for the emulated link (LinkRelease): the times at
// which FrameWriter sends each kind of frame, and the release time it
// stamps on it.

#include "verbs/soft/frame_writer.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "verbs/soft/link.h"
#include "verbs/soft/link_table.h"
#include "verbs/soft/wire.h"

namespace dreplay::verbs::soft {
namespace {

constexpr int64_t kUs = 1000;
// The one-way delay of the model: long enough that "at once" and "held"
// cannot be confused on a loaded machine.
constexpr int64_t kDelayNs = 20000 * kUs;

class FrameWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
    out_ = fds[0];
    in_ = fds[1];
  }
  void TearDown() override {
    close(out_);
    close(in_);
  }

  std::unique_ptr<FrameWriter> Writer(LinkRelease release) {
    LinkModel model;
    model.one_way_delay = absl::Nanoseconds(kDelayNs);
    return std::make_unique<FrameWriter>(out_, std::make_shared<SharedLink>(model, 1, release));
  }

  static FrameHeader Header(FrameType type, uint32_t payload_length) {
    FrameHeader h = {};
    h.type = static_cast<uint8_t>(type);
    h.payload_length = payload_length;
    h.seq = 7;
    return h;
  }

  // The header of the next frame on the socket, and its payload skipped;
  // false when nothing is there.
  bool ReadFrame(FrameHeader* h) {
    if (read(in_, h, sizeof(*h)) != static_cast<ssize_t>(sizeof(*h))) return false;
    std::vector<char> payload(h->payload_length);
    size_t got = 0;
    while (got < payload.size()) {
      const ssize_t n = read(in_, payload.data() + got, payload.size() - got);
      if (n <= 0) return false;
      got += static_cast<size_t>(n);
    }
    return true;
  }

  // Flushes what is due at `after` and checks that the next frame on the
  // socket is of `type`, stamped with its arrival on an idle link: queued
  // between `before` and `after`, plus the delay.
  void ExpectSentStamped(FrameWriter* writer, FrameType type, int64_t before, int64_t after) {
    ASSERT_EQ(writer->Flush(after, &why_), FrameWriter::Stop::kNone);
    FrameHeader h;
    ASSERT_TRUE(ReadFrame(&h));
    EXPECT_EQ(h.type, static_cast<uint8_t>(type));
    EXPECT_GE(h.release_ns, before + kDelayNs);
    EXPECT_LE(h.release_ns, after + kDelayNs);
  }

  int out_ = -1;
  int in_ = -1;
  std::string why_;
};

// Where both ends read one clock, a small response goes at once, stamped
// with its modelled arrival: the requester holds it.
TEST_F(FrameWriterTest, StampedSendsASmallResponseAtOnceWithItsArrival) {
  auto writer = Writer(LinkRelease::kStamped);
  std::vector<char> data(1024, 'x');
  const int64_t before = MonotonicNowNs();
  writer->QueueResponse(Header(FrameType::kReadResponse, data.size()), data.data(), data.size());
  const int64_t after = MonotonicNowNs();
  int64_t send_ns = 0;
  int64_t slack_ns = 0;
  ASSERT_TRUE(writer->NextSend(&send_ns, &slack_ns));
  EXPECT_LE(send_ns, after);
  ExpectSentStamped(writer.get(), FrameType::kReadResponse, before, after);
  EXPECT_EQ(writer->responses_queued(), 0);
}

// Requests stay with their sender (executed at their arrival), and so do
// large responses (the peer's socket buffers would fill).
TEST_F(FrameWriterTest, StampedHoldsRequestsAndLargeResponsesAtTheSender) {
  auto writer = Writer(LinkRelease::kStamped);
  const int64_t before = MonotonicNowNs();
  writer->QueueRequest(Header(FrameType::kRead, 0), nullptr, 0, before);
  int64_t send_ns = 0;
  int64_t slack_ns = 0;
  ASSERT_TRUE(writer->NextSend(&send_ns, &slack_ns));
  EXPECT_GE(send_ns, before + kDelayNs - kHostPathNs);
  ASSERT_EQ(writer->Flush(MonotonicNowNs(), &why_), FrameWriter::Stop::kNone);
  FrameHeader h;
  EXPECT_FALSE(ReadFrame(&h)) << "a request left before its time";

  auto large = Writer(LinkRelease::kStamped);
  std::vector<char> data(2 * 4096, 'y');
  const int64_t at = MonotonicNowNs();
  large->QueueResponse(Header(FrameType::kReadResponse, data.size()), data.data(), data.size());
  ASSERT_TRUE(large->NextSend(&send_ns, &slack_ns));
  EXPECT_GE(send_ns, at + kDelayNs - kHostPathNs);
  ASSERT_EQ(large->Flush(MonotonicNowNs(), &why_), FrameWriter::Stop::kNone);
  EXPECT_FALSE(ReadFrame(&h)) << "a large response left before its time";
}

// Between hosts (no common clock) the sender alone holds every frame, and
// stamps none.
TEST_F(FrameWriterTest, SenderHoldsResponsesUnstamped) {
  auto writer = Writer(LinkRelease::kSender);
  const char ack = 0;
  const int64_t before = MonotonicNowNs();
  writer->QueueResponse(Header(FrameType::kAck, 0), &ack, 0);
  int64_t send_ns = 0;
  int64_t slack_ns = 0;
  ASSERT_TRUE(writer->NextSend(&send_ns, &slack_ns));
  EXPECT_GE(send_ns, before + kDelayNs - kHostPathNs);
  ASSERT_EQ(writer->Flush(send_ns, &why_), FrameWriter::Stop::kNone);
  FrameHeader h;
  ASSERT_TRUE(ReadFrame(&h));
  EXPECT_EQ(h.release_ns, 0);
}

// kReceiver writes every small frame at once, requests too.
TEST_F(FrameWriterTest, ReceiverSendsSmallRequestsAtOnce) {
  auto writer = Writer(LinkRelease::kReceiver);
  const int64_t before = MonotonicNowNs();
  writer->QueueRequest(Header(FrameType::kRead, 0), nullptr, 0, before);
  ExpectSentStamped(writer.get(), FrameType::kRead, before, MonotonicNowNs());
}

}  // namespace
}  // namespace dreplay::verbs::soft
