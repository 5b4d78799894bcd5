// Copyright dreplay authors.
//
// A misbehaving peer, played by a raw TCP socket, against a soft provider:
// garbage during setup must not disturb the listener, and garbage after
// setup must end only that connection, with a NAK where a request can be
// named, while the process and every other queue pair carry on.

#include <sys/socket.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "verbs/connection_manager.h"
#include "verbs/setup_preamble.h"
#include "verbs/soft/channel.h"
#include "verbs/soft/link.h"
#include "verbs/soft/provider.h"
#include "verbs/soft/socket.h"
#include "verbs/soft/test_util.h"
#include "verbs/soft/wire.h"

namespace dreplay::verbs {
namespace {

using ::dreplay::verbs::soft::AtomicPayload;
using ::dreplay::verbs::soft::ConnectTcp;
using ::dreplay::verbs::soft::Fd;
using ::dreplay::verbs::soft::FrameHeader;
using ::dreplay::verbs::soft::FrameType;
using ::dreplay::verbs::soft::HelloHeader;
using ::dreplay::verbs::soft::ReplyHeader;
using ::dreplay::verbs::soft::SendAll;
using ::dreplay::verbs::soft::SetupVerdict;
using ::dreplay::verbs::testing::Buffer;
using ::dreplay::verbs::testing::ConnectPair;
using ::dreplay::verbs::testing::kTestTimeout;
using ::dreplay::verbs::testing::MakeBuffer;
using ::dreplay::verbs::testing::PollCompletions;
using ::dreplay::verbs::testing::PollUntilError;
using ::dreplay::verbs::testing::QpPair;
using ::dreplay::verbs::testing::Read;
using ::dreplay::verbs::testing::Write;

constexpr uint32_t kAllRemote = kLocalWrite | kRemoteRead | kRemoteWrite | kRemoteAtomic;

std::string Bytes(const void* p, size_t n) { return std::string(static_cast<const char*>(p), n); }

// A hello as the connection manager expects it: its preamble, then the soft
// HelloHeader and `payload`. `body_length` overrides the preamble's length.
std::string HelloBytes(const HelloHeader& hello, const std::string& payload = "",
                       int64_t body_length = -1) {
  Preamble p;
  p.kind = PreambleKind::kHello;
  p.provider = SetupProvider::kSoft;
  p.body_length =
      static_cast<uint32_t>(body_length >= 0 ? body_length : sizeof(hello) + payload.size());
  return EncodePreamble(p) + Bytes(&hello, sizeof(hello)) + payload;
}

HelloHeader ValidHello(uint32_t payload_length) {
  HelloHeader hello = {};
  hello.magic = soft::kSetupMagic;
  hello.version = soft::kWireVersion;
  hello.max_rd_atomic = 16;
  hello.payload_length = payload_length;
  hello.link_seed = 1;
  return hello;
}

Fd RawConnect(uint16_t port) {
  auto fd = ConnectTcp("127.0.0.1", port, absl::Now() + kTestTimeout);
  EXPECT_TRUE(fd.ok()) << fd.status();
  return fd.ok() ? std::move(*fd) : Fd();
}

void RawSend(const Fd& fd, const std::string& bytes) {
  // The peer may already have closed; that is part of some tests.
  (void)SendAll(fd.get(), bytes.data(), bytes.size(), absl::Now() + kTestTimeout);
}

// Reads until end of stream (or kTestTimeout); returns everything read.
std::string ReadToEnd(const Fd& fd) {
  std::string all;
  const absl::Time deadline = absl::Now() + kTestTimeout;
  char buf[4096];
  while (absl::Now() < deadline) {
    const ssize_t n = recv(fd.get(), buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0) break;
    if (n > 0) {
      all.append(buf, n);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      std::this_thread::yield();
    } else {
      break;  // reset: also an end
    }
  }
  return all;
}

class SoftPeerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = *CreateSoftProvider(ProviderOptions{});
    client_ = *CreateSoftProvider(ProviderOptions{});
    auto listener = server_->Listen("127.0.0.1", 0);
    ASSERT_TRUE(listener.ok()) << listener.status();
    listener_ = std::move(*listener);
    region_ = *MakeBuffer(server_.get(), 4096, kAllRemote);
  }

  // A raw peer that completed setup; *server_qp is the server's side.
  Fd RawPeer(std::unique_ptr<QueuePair>* server_qp, const HelloHeader& hello = ValidHello(4)) {
    Fd fd = RawConnect(listener_->port());
    RawSend(fd, HelloBytes(hello, "evil"));
    auto pending = listener_->Accept(kTestTimeout);
    EXPECT_TRUE(pending.ok()) << pending.status();
    if (!pending.ok()) return fd;
    EXPECT_EQ((*pending)->payload(), "evil");
    auto qp = (*pending)->Accept("ok", QueuePairOptions{});
    EXPECT_TRUE(qp.ok()) << qp.status();
    if (qp.ok()) *server_qp = std::move(*qp);
    char preamble[kPreambleBytes];
    EXPECT_TRUE(
        soft::RecvAll(fd.get(), preamble, sizeof(preamble), absl::Now() + kTestTimeout).ok());
    auto decoded = DecodePreamble(Bytes(preamble, sizeof(preamble)), "listener");
    EXPECT_TRUE(decoded.ok() && decoded->kind == PreambleKind::kAccept);
    ReplyHeader reply;
    EXPECT_TRUE(soft::RecvAll(fd.get(), &reply, sizeof(reply), absl::Now() + kTestTimeout).ok());
    EXPECT_EQ(reply.verdict, static_cast<uint8_t>(SetupVerdict::kAccept));
    char ok[2];
    EXPECT_TRUE(soft::RecvAll(fd.get(), ok, 2, absl::Now() + kTestTimeout).ok());
    return fd;
  }

  // A well-behaved queue pair to the same server still works.
  void ExpectBystanderWorks() {
    std::thread accepting([&] {
      auto pending = listener_->Accept(kTestTimeout);
      ASSERT_TRUE(pending.ok()) << pending.status();
      auto qp = (*pending)->Accept("", QueuePairOptions{});
      ASSERT_TRUE(qp.ok());
      bystander_server_ = std::move(*qp);
    });
    auto connection = client_->Connect("127.0.0.1", listener_->port(), "good", {});
    accepting.join();
    ASSERT_TRUE(connection.ok()) << connection.status();
    auto local = *MakeBuffer(client_.get(), 64, kLocalWrite);
    std::memcpy(local->data(), "bystander", 9);
    WorkRequest wrs[2] = {Write(1, local.get(), 0, 9, *region_, 100),
                          Read(2, local.get(), 32, 9, *region_, 100)};
    ASSERT_TRUE(connection->qp->PostSend(wrs).ok());
    auto done = PollCompletions(connection->qp.get(), 2);
    ASSERT_EQ(done.size(), 2u);
    EXPECT_TRUE(done[0].ok()) << done[0].ToStatus();
    EXPECT_TRUE(done[1].ok()) << done[1].ToStatus();
    EXPECT_EQ(std::memcmp(local->data() + 32, "bystander", 9), 0);
  }

  std::unique_ptr<Provider> server_;
  std::unique_ptr<Provider> client_;
  std::unique_ptr<Listener> listener_;
  std::unique_ptr<Buffer> region_;
  std::unique_ptr<QueuePair> bystander_server_;
};

TEST_F(SoftPeerTest, ListenerSkipsGarbageAndAcceptsTheNextRealPeer) {
  std::vector<Fd> garbage;
  garbage.push_back(RawConnect(listener_->port()));
  garbage.back().Reset();  // connect and hang up at once
  garbage.push_back(RawConnect(listener_->port()));
  RawSend(garbage.back(), std::string(64, '\xab'));
  HelloHeader huge = ValidHello(1u << 30);
  garbage.push_back(RawConnect(listener_->port()));
  RawSend(garbage.back(), HelloBytes(huge));
  HelloHeader old = ValidHello(0);
  old.version = soft::kWireVersion + 1;
  garbage.push_back(RawConnect(listener_->port()));
  RawSend(garbage.back(), HelloBytes(old));
  HelloHeader bad_link = ValidHello(0);
  bad_link.link_delay_ns = -5;
  garbage.push_back(RawConnect(listener_->port()));
  RawSend(garbage.back(), HelloBytes(bad_link));
  HelloHeader tiny_bandwidth = ValidHello(0);  // would overflow the emulator's clock
  tiny_bandwidth.link_bandwidth_gbps = 1e-12;
  garbage.push_back(RawConnect(listener_->port()));
  RawSend(garbage.back(), HelloBytes(tiny_bandwidth));
  HelloHeader cut = ValidHello(100);
  garbage.push_back(RawConnect(listener_->port()));
  RawSend(garbage.back(), HelloBytes(cut, "only part", sizeof(cut) + 100));
  garbage.back().Reset();
  garbage.push_back(RawConnect(listener_->port()));  // says nothing at all

  absl::StatusOr<Connection> real = absl::UnknownError("not run");
  std::thread connector(
      [&] { real = client_->Connect("127.0.0.1", listener_->port(), "real peer", {}); });
  auto pending = listener_->Accept(kTestTimeout);
  ASSERT_TRUE(pending.ok()) << pending.status();
  EXPECT_EQ((*pending)->payload(), "real peer");
  auto qp = (*pending)->Accept("hi", QueuePairOptions{});
  connector.join();
  ASSERT_TRUE(qp.ok()) << qp.status();
  ASSERT_TRUE(real.ok()) << real.status();
  EXPECT_EQ(real->reply, "hi");
}

TEST_F(SoftPeerTest, ARejectedPeerReadsTheReasonAndThenEndOfStream) {
  Fd fd = RawConnect(listener_->port());
  const HelloHeader hello = ValidHello(0);
  RawSend(fd, HelloBytes(hello));
  auto pending = listener_->Accept(kTestTimeout);
  ASSERT_TRUE(pending.ok());
  (*pending)->Reject("full");
  const std::string all = ReadToEnd(fd);
  ASSERT_EQ(all.size(), kPreambleBytes + 4);
  auto preamble = DecodePreamble(all, "listener");
  ASSERT_TRUE(preamble.ok()) << preamble.status();
  EXPECT_EQ(preamble->kind, PreambleKind::kReject);
  EXPECT_EQ(preamble->provider, SetupProvider::kSoft);
  EXPECT_EQ(preamble->body_length, 4u);
  EXPECT_EQ(all.substr(kPreambleBytes), "full");
}

TEST_F(SoftPeerTest, ASoftConnectToAListenerOfAnotherProviderFailsNamingBoth) {
  // What `--provider=auto` choosing ibverbs on the server's host and soft on
  // the client's looks like to the client; the listener logs the same.
  ConnectionManagerOptions options;
  options.provider = SetupProvider::kIbverbs;
  auto manager = ConnectionManager::Start("127.0.0.1", 0, options);
  ASSERT_TRUE(manager.ok()) << manager.status();
  auto connection = client_->Connect("127.0.0.1", (*manager)->port(), "payload", {});
  ASSERT_TRUE(absl::IsFailedPrecondition(connection.status())) << connection.status();
  const std::string message(connection.status().message());
  EXPECT_NE(message.find("uses the ibverbs provider"), std::string::npos) << message;
  EXPECT_NE(message.find("the soft provider"), std::string::npos) << message;
  EXPECT_NE(message.find("--provider"), std::string::npos) << message;
  EXPECT_EQ((*manager)->counters().refused, 1u);
}

struct GarbageCase {
  const char* name;
  // Builds what the raw peer sends after setup; `region` is the server's.
  std::string (*bytes)(const Buffer& region);
  bool expect_nak;
  WcStatus nak_status;
};

FrameHeader Header(FrameType type, uint64_t seq, uint32_t payload_length) {
  FrameHeader h = {};
  h.type = static_cast<uint8_t>(type);
  h.seq = seq;
  h.payload_length = payload_length;
  return h;
}

std::string Frame(const FrameHeader& h, const std::string& payload = "") {
  return Bytes(&h, sizeof(h)) + payload;
}

class SoftPeerGarbageTest : public SoftPeerTest,
                            public ::testing::WithParamInterface<GarbageCase> {};

TEST_P(SoftPeerGarbageTest, EndsOnlyThatConnection) {
  const GarbageCase& tc = GetParam();
  std::unique_ptr<QueuePair> server_qp;
  Fd fd = RawPeer(&server_qp);
  ASSERT_NE(server_qp, nullptr);
  RawSend(fd, tc.bytes(*region_));
  if (std::string(tc.name) == "TruncatedHeader") {
    shutdown(fd.get(), SHUT_WR);
  }
  PollUntilError(server_qp.get());
  EXPECT_EQ(server_qp->state(), QpState::kError);
  const std::string reply = ReadToEnd(fd);  // the server closes its side
  if (tc.expect_nak) {
    ASSERT_GE(reply.size(), sizeof(FrameHeader));
    // The NAK follows any acknowledgements of what came before.
    size_t at = 0;
    FrameHeader h;
    std::memcpy(&h, reply.data(), sizeof(h));
    while (h.type == static_cast<uint8_t>(FrameType::kAck) && at + 2 * sizeof(h) <= reply.size()) {
      at += sizeof(h);
      std::memcpy(&h, reply.data() + at, sizeof(h));
    }
    EXPECT_EQ(h.type, static_cast<uint8_t>(FrameType::kNak));
    EXPECT_EQ(h.status, static_cast<uint8_t>(tc.nak_status))
        << WcStatusName(static_cast<WcStatus>(h.status));
    EXPECT_EQ(reply.size(), at + sizeof(h) + h.payload_length);
  }
  ExpectBystanderWorks();
}

INSTANTIATE_TEST_SUITE_P(
    Cases, SoftPeerGarbageTest,
    ::testing::Values(
        GarbageCase{"UnknownFrameType",
                    [](const Buffer&) {
                      FrameHeader h = Header(FrameType::kWrite, 0, 0);
                      h.type = 99;
                      return Frame(h);
                    },
                    true, WcStatus::kRemoteInvalidRequest},
        GarbageCase{"WriteLongerThanAnyMessage",
                    [](const Buffer& r) {
                      FrameHeader h = Header(FrameType::kWrite, 0, 0xffffffffu);
                      h.remote_addr = r.addr();
                      h.rkey = r.rkey();
                      return Frame(h);
                    },
                    true, WcStatus::kRemoteInvalidRequest},
        GarbageCase{"WriteWithAGuessedRkey",
                    [](const Buffer& r) {
                      FrameHeader h = Header(FrameType::kWrite, 0, 8);
                      h.remote_addr = r.addr();
                      h.rkey = r.rkey() + 1;
                      return Frame(h, "12345678");
                    },
                    true, WcStatus::kRemoteAccessError},
        GarbageCase{"WritePastTheRegion",
                    [](const Buffer& r) {
                      FrameHeader h = Header(FrameType::kWrite, 0, 8);
                      h.remote_addr = r.addr() + 4092;
                      h.rkey = r.rkey();
                      return Frame(h, "12345678");
                    },
                    true, WcStatus::kRemoteAccessError},
        GarbageCase{"ReadWrappingTheAddressSpace",
                    [](const Buffer& r) {
                      FrameHeader h = Header(FrameType::kRead, 0, 0);
                      h.remote_addr = ~uint64_t{0} - 4;
                      h.rkey = r.rkey();
                      h.aux = 64;
                      return Frame(h);
                    },
                    true, WcStatus::kRemoteAccessError},
        GarbageCase{"AtomicWithAShortPayload",
                    [](const Buffer& r) {
                      FrameHeader h = Header(FrameType::kFetchAdd, 0, 4);
                      h.remote_addr = r.addr();
                      h.rkey = r.rkey();
                      return Frame(h, "1234");
                    },
                    true, WcStatus::kRemoteInvalidRequest},
        GarbageCase{"SkippedSequenceNumber",
                    [](const Buffer& r) {
                      FrameHeader first = Header(FrameType::kWrite, 0, 4);
                      first.remote_addr = r.addr();
                      first.rkey = r.rkey();
                      FrameHeader skipped = first;
                      skipped.seq = 5;
                      return Frame(first, "abcd") + Frame(skipped, "efgh");
                    },
                    true, WcStatus::kRemoteInvalidRequest},
        GarbageCase{
            "ResponseToNothing",
            [](const Buffer&) { return Frame(Header(FrameType::kReadResponse, 0, 8), "12345678"); },
            true, WcStatus::kRemoteInvalidRequest},
        GarbageCase{"AckFromTheFuture",
                    [](const Buffer&) { return Frame(Header(FrameType::kAck, 100, 0)); }, true,
                    WcStatus::kRemoteInvalidRequest},
        GarbageCase{"NakWithTooMuchText",
                    [](const Buffer&) { return Frame(Header(FrameType::kNak, 0, 100000)); }, true,
                    WcStatus::kRemoteInvalidRequest},
        GarbageCase{"TruncatedHeader",
                    [](const Buffer&) {
                      const FrameHeader h = Header(FrameType::kWrite, 0, 8);
                      return Bytes(&h, sizeof(h) / 2);
                    },
                    false, WcStatus::kSuccess}),
    [](const ::testing::TestParamInfo<GarbageCase>& info) { return info.param.name; });

// A peer that ignores its READ credits and never reads the responses is cut
// off once more responses are queued than it was allowed to ask for.
TEST_F(SoftPeerTest, APeerExceedingItsReadCreditsIsCutOff) {
  std::unique_ptr<QueuePair> server_qp;
  Fd fd = RawPeer(&server_qp);
  ASSERT_NE(server_qp, nullptr);
  const size_t kBig = 1 << 20;
  std::vector<uint8_t> big(kBig);
  auto big_region = server_->RegisterMemory(big.data(), big.size(), kRemoteRead);
  ASSERT_TRUE(big_region.ok());
  std::string requests;
  for (uint64_t seq = 0; seq < 200; ++seq) {
    FrameHeader h = Header(FrameType::kRead, seq, 0);
    h.remote_addr = reinterpret_cast<uint64_t>(big.data());
    h.rkey = (*big_region)->rkey();
    h.aux = kBig;
    requests += Frame(h);
  }
  RawSend(fd, requests);
  PollUntilError(server_qp.get());
  EXPECT_EQ(server_qp->state(), QpState::kError);
  EXPECT_NE(server_qp->error().message().find("max_rd_atomic"), std::string::npos)
      << server_qp->error();
  server_qp.reset();  // before the memory it reads from goes away
  ExpectBystanderWorks();
}

// A peer that queues large READs and stops reading its socket, then sends
// a WRITE: the responder must not copy every queued READ response to keep
// RC order (credits x region bytes); it holds the WRITE, and the input
// behind it, until the responses have drained.
TEST_F(SoftPeerTest, AWriteBehindUnreadReadResponsesWaitsForThemToDrain) {
  // How long the responder has to misbehave before the check.
  constexpr absl::Duration kSettle = absl::Seconds(2);
  std::unique_ptr<QueuePair> server_qp;
  Fd fd = RawPeer(&server_qp);
  ASSERT_NE(server_qp, nullptr);
  const size_t kBig = 2 << 20;  // 16 of them: far more than loopback buffers hold
  std::vector<uint8_t> big(kBig);
  auto big_region = server_->RegisterMemory(big.data(), big.size(), kRemoteRead);
  ASSERT_TRUE(big_region.ok());
  std::string requests;
  uint64_t seq = 0;
  for (; seq < 16; ++seq) {
    FrameHeader h = Header(FrameType::kRead, seq, 0);
    h.remote_addr = reinterpret_cast<uint64_t>(big.data());
    h.rkey = (*big_region)->rkey();
    h.aux = kBig;
    requests += Frame(h);
  }
  FrameHeader write = Header(FrameType::kWrite, seq, 8);
  write.remote_addr = region_->addr();
  write.rkey = region_->rkey();
  requests += Frame(write, "written!");
  RawSend(fd, requests);

  const auto* word = reinterpret_cast<const uint64_t*>(region_->data());
  // Without backpressure the WRITE lands once the responses are copied (a
  // fraction of a second); with it, not before the peer reads.
  const absl::Time settled = absl::Now() + kSettle;
  while (__atomic_load_n(word, __ATOMIC_ACQUIRE) == 0 && absl::Now() < settled) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(__atomic_load_n(word, __ATOMIC_ACQUIRE), 0u)
      << "the WRITE overtook READ responses the peer had not read";

  // The peer reads again: the responses drain and the WRITE lands.
  std::vector<char> sink(1 << 20);
  const absl::Time deadline = absl::Now() + kTestTimeout;
  while (__atomic_load_n(word, __ATOMIC_ACQUIRE) == 0 && absl::Now() < deadline) {
    if (recv(fd.get(), sink.data(), sink.size(), MSG_DONTWAIT) <= 0) std::this_thread::yield();
  }
  EXPECT_EQ(std::memcmp(region_->data(), "written!", 8), 0);
  EXPECT_EQ(server_qp->state(), QpState::kReady) << server_qp->error();
  server_qp.reset();  // before the memory it reads from goes away
}

// Receiver-released frames (wire.h): a peer with a link model that reads
// the same clock stamps each frame with its modelled arrival.
HelloHeader LinkedHello(uint64_t clock_id) {
  HelloHeader hello = ValidHello(4);
  hello.link_delay_ns = 50000;
  hello.clock_id = clock_id;
  return hello;
}

FrameHeader StampedWrite(const Buffer& region, uint64_t seq, uint64_t offset, int64_t release) {
  FrameHeader h = Header(FrameType::kWrite, seq, 8);
  h.remote_addr = region.addr() + offset;
  h.rkey = region.rkey();
  h.release_ns = release;
  return h;
}

// Waits (bounded) until the word at `offset` of `region` is not zero; the
// clock when it was seen, or 0.
int64_t WhenLanded(Buffer& region, uint64_t offset) {
  const auto* word = reinterpret_cast<const uint64_t*>(region.data() + offset);
  const absl::Time deadline = absl::Now() + kTestTimeout;
  while (absl::Now() < deadline) {
    if (__atomic_load_n(word, __ATOMIC_ACQUIRE) != 0) return soft::MonotonicNowNs();
    std::this_thread::yield();
  }
  return 0;
}

TEST_F(SoftPeerTest, AStampedFrameAndWhatFollowsItWaitForItsReleaseTime) {
  if (soft::ClockId() == 0) GTEST_SKIP() << "no boot id: this host's clock has no id";
  std::unique_ptr<QueuePair> server_qp;
  Fd fd = RawPeer(&server_qp, LinkedHello(soft::ClockId()));
  ASSERT_NE(server_qp, nullptr);
  const int64_t release = soft::MonotonicNowNs() + 300 * 1000 * 1000;
  // The second WRITE is due at once, but it is behind the first.
  RawSend(fd, Frame(StampedWrite(*region_, 0, 0, release), "released") +
                  Frame(StampedWrite(*region_, 1, 8, 0), "follower"));
  const int64_t follower_seen = WhenLanded(*region_, 8);
  ASSERT_NE(follower_seen, 0) << "the WRITEs never landed";
  EXPECT_EQ(std::memcmp(region_->data(), "releasedfollower", 16), 0)
      << "the unstamped WRITE overtook the held one";
  // Released at most 1 us early (the reader's allowance).
  EXPECT_GE(follower_seen, release - 1000);
  EXPECT_EQ(server_qp->state(), QpState::kReady) << server_qp->error();
}

TEST_F(SoftPeerTest, AStampFromAPeerOnAnotherClockIsIgnored) {
  std::unique_ptr<QueuePair> server_qp;
  Fd fd = RawPeer(&server_qp, LinkedHello(soft::ClockId() ^ 1));
  ASSERT_NE(server_qp, nullptr);
  // An hour ahead on this clock: means nothing on the peer's.
  const int64_t hour = int64_t{3600} * 1000 * 1000 * 1000;
  RawSend(fd, Frame(StampedWrite(*region_, 0, 0, soft::MonotonicNowNs() + hour), "at once!"));
  ASSERT_NE(WhenLanded(*region_, 0), 0) << "the WRITE was held for its stamp";
  EXPECT_EQ(std::memcmp(region_->data(), "at once!", 8), 0);
}

TEST_F(SoftPeerTest, ConnectRefusesALinkTooSlowToModel) {
  QueuePairOptions options;
  options.link.bandwidth_gbps = 1e-12;
  auto connection = client_->Connect("127.0.0.1", listener_->port(), "slow", options);
  EXPECT_EQ(connection.status().code(), absl::StatusCode::kInvalidArgument) << connection.status();
}

// A polling thread takes the input (channel.h): a queue pair whose application
// polled with a request outstanding reads its socket from the polling
// thread alone. When the application stops polling, the NIC thread takes
// the input back: the peer's WRITE lands with nobody polling.
TEST_F(SoftPeerTest, APeerIsServedAfterThePollerStopsWithARequestOutstanding) {
  std::unique_ptr<QueuePair> server_qp;
  Fd fd = RawPeer(&server_qp);
  ASSERT_NE(server_qp, nullptr);
  // A READ of the raw peer's memory, which it never answers.
  auto local = *MakeBuffer(server_.get(), 64, kLocalWrite);
  WorkRequest read;
  read.wr_id = 1;
  read.opcode = Opcode::kRead;
  read.local = local->mr.get();
  read.local_addr = local->data();
  read.length = 8;
  read.remote_addr = 4096;
  read.rkey = 1;
  ASSERT_TRUE(server_qp->PostSend({&read, 1}).ok());
  // Polls with no gap for well over kSpinningNs, as an application that
  // spins on its completions does.
  Completion c;
  const int64_t until = soft::MonotonicNowNs() + 20 * soft::kSpinningNs;
  while (soft::MonotonicNowNs() < until) ASSERT_EQ(server_qp->Poll(absl::MakeSpan(&c, 1)), 0);

  FrameHeader write = Header(FrameType::kWrite, 0, 8);
  write.remote_addr = region_->addr();
  write.rkey = region_->rkey();
  RawSend(fd, Frame(write, "unpolled"));
  ASSERT_NE(WhenLanded(*region_, 0), 0) << "nobody read the input after the poller left";
  EXPECT_EQ(std::memcmp(region_->data(), "unpolled", 8), 0);
  // The application comes back: its READ is still outstanding, the queue
  // pair still works.
  EXPECT_EQ(server_qp->Poll(absl::MakeSpan(&c, 1)), 0);
  EXPECT_EQ(server_qp->state(), QpState::kReady) << server_qp->error();
}

}  // namespace
}  // namespace dreplay::verbs
