// Copyright dreplay authors.

#include "tools/bench/tcp_baseline.h"

#include "gtest/gtest.h"

namespace dreplay::tools {
namespace {

TEST(TcpBaselineTest, StreamsWholeMessagesAndReportsConsistentRates) {
  constexpr uint64_t kMessage = 1000;
  absl::StatusOr<TcpStreamResult> r = RunLoopbackTcpStream(kMessage, absl::Milliseconds(100));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->message_bytes, kMessage);
  EXPECT_GT(r->bytes, 0u);
  EXPECT_EQ(r->bytes % kMessage, 0u) << "the sender only stops between messages";
  EXPECT_GE(r->seconds, 0.1);
  EXPECT_NEAR(r->gbps, r->bytes * 8 / r->seconds / 1e9, 1e-9);
  EXPECT_NEAR(r->messages_per_s, r->bytes / kMessage / r->seconds, 1e-6);
}

TEST(TcpBaselineTest, StreamsToASinkThatServesOneStreamAfterAnother) {
  constexpr uint64_t kMessage = 4096;
  absl::StatusOr<std::unique_ptr<TcpStreamSink>> sink = TcpStreamSink::Start("127.0.0.1", 0);
  ASSERT_TRUE(sink.ok()) << sink.status();
  ASSERT_NE((*sink)->port(), 0);
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<TcpStreamResult> r =
        RunTcpStream("127.0.0.1", (*sink)->port(), kMessage, absl::Milliseconds(50));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_GT(r->bytes, 0u);
    EXPECT_EQ(r->bytes % kMessage, 0u) << "the sink counts every byte sent";
    EXPECT_GE(r->seconds, 0.05);
  }
}

TEST(TcpBaselineTest, RefusesAHostThatIsNoIpv4Address) {
  EXPECT_EQ(RunTcpStream("localhost", 1, 64, absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TcpStreamSink::Start("::1", 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TcpBaselineTest, RefusesAnEmptyMessageOrDuration) {
  EXPECT_EQ(RunLoopbackTcpStream(0, absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunLoopbackTcpStream(64, absl::ZeroDuration()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dreplay::tools
