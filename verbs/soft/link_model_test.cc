// Copyright dreplay authors.
//
// The link emulator measured end to end: round trips and bandwidth seen by
// an application match the configured link within 10 %, and READ credits
// cap small READs at max_rd_atomic per round trip. Every case runs in each
// ProviderOptions::soft_link_release mode (who waits for a frame's
// modelled arrival; wire.h, "Receiver-released frames").

#include <algorithm>
#include <cstdio>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "verbs/soft/link.h"
#include "verbs/soft/provider.h"
#include "verbs/soft/test_util.h"

namespace dreplay::verbs {
namespace {

using ::dreplay::verbs::testing::Buffer;
using ::dreplay::verbs::testing::ConnectPair;
using ::dreplay::verbs::testing::MakeBuffer;
using ::dreplay::verbs::testing::PollCompletions;
using ::dreplay::verbs::testing::QpPair;
using ::dreplay::verbs::testing::Read;
using ::dreplay::verbs::testing::Write;

constexpr double kTolerance = 0.10;
// A busy machine can only add latency and take away bandwidth, never the
// reverse: every attempt must respect the model's physical bound, and the
// best of a few attempts must come within kTolerance of the model. The
// attempts stop at the first that does; 12 leave room for a machine loaded
// by a parallel test run (5 were too few there), at no cost on an idle one.
constexpr int kAttempts = 12;

// Under a sanitizer the emulator's own code runs several times slower, so
// whether it keeps up with the model (reaches the modelled bandwidth, adds
// nothing beyond the model's delay) says nothing there; those checks run
// only in uninstrumented builds. The physical bounds (never faster than the
// link, never a shorter round trip) hold in every build.
#ifdef DREPLAY_INSTRUMENTED_BUILD
constexpr bool kChecksKeepingUp = false;
#else
constexpr bool kChecksKeepingUp = true;
#endif

class SoftLinkModelTest : public ::testing::TestWithParam<SoftLinkRelease> {
 protected:
  // Both ends stamp their frames and hold those that come early.
  static bool Stamped() { return GetParam() != SoftLinkRelease::kSender; }

  void Start(const LinkModel& link, size_t bytes) {
    ProviderOptions provider;
    provider.soft_link_release = GetParam();
    client_ = *CreateSoftProvider(provider);
    server_ = *CreateSoftProvider(provider);
    QueuePairOptions options;
    options.link = link;
    auto pair = ConnectPair(client_.get(), server_.get(), options, {});
    ASSERT_TRUE(pair.ok()) << pair.status();
    pair_ = std::move(*pair);
    local_ = *MakeBuffer(client_.get(), bytes, kLocalWrite);
    remote_ = *MakeBuffer(server_.get(), bytes, kLocalWrite | kRemoteRead | kRemoteWrite);
  }

  // Moves `total` bytes in `size`-byte requests with `depth` outstanding and
  // returns the rate in Gb/s, from the first post to the last completion.
  double Stream(Opcode op, uint32_t size, int depth, size_t total) {
    QueuePair* qp = pair_.client.get();
    auto request = [&](uint64_t i) {
      const size_t offset = (i % depth) * size;
      return op == Opcode::kRead ? Read(i, local_.get(), offset, size, *remote_, offset)
                                 : Write(i, local_.get(), offset, size, *remote_, offset);
    };
    const uint64_t count = total / size;
    uint64_t posted = 0;
    uint64_t completed = 0;
    const absl::Time start = absl::Now();
    for (; posted < static_cast<uint64_t>(depth); ++posted) {
      WorkRequest wr = request(posted);
      EXPECT_TRUE(qp->PostSend({&wr, 1}).ok());
    }
    const absl::Time deadline = start + testing::kTestTimeout;
    Completion done[32];
    while (completed < count && absl::Now() < deadline) {
      const int n = qp->Poll(absl::MakeSpan(done));
      for (int i = 0; i < n; ++i) {
        EXPECT_TRUE(done[i].ok()) << done[i].ToStatus();
        ++completed;
        if (posted < count) {
          WorkRequest wr = request(posted++);
          EXPECT_TRUE(qp->PostSend({&wr, 1}).ok());
        }
      }
    }
    EXPECT_EQ(completed, count);
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    return static_cast<double>(completed) * size * 8 / seconds / 1e9;
  }

  absl::Duration ReadRoundTrip(QueuePair* qp) {
    WorkRequest wr = Read(1, local_.get(), 0, 8, *remote_, 0);
    const absl::Time start = absl::Now();
    EXPECT_TRUE(qp->PostSend({&wr, 1}).ok());
    EXPECT_EQ(PollCompletions(qp, 1).size(), 1u);
    return absl::Now() - start;
  }

  absl::Duration MedianReadRoundTrip(int samples) {
    std::vector<absl::Duration> rtts;
    for (int i = 0; i < samples; ++i) {
      WorkRequest wr = Read(i, local_.get(), 0, 8, *remote_, 0);
      const absl::Time start = absl::Now();
      EXPECT_TRUE(pair_.client->PostSend({&wr, 1}).ok());
      auto done = PollCompletions(pair_.client.get(), 1);
      EXPECT_EQ(done.size(), 1u);
      rtts.push_back(absl::Now() - start);
    }
    std::sort(rtts.begin(), rtts.end());
    return rtts[rtts.size() / 2];
  }

  std::unique_ptr<Provider> client_;
  std::unique_ptr<Provider> server_;
  QpPair pair_;
  std::unique_ptr<Buffer> local_;
  std::unique_ptr<Buffer> remote_;
};

// The round trip on the emulated link is the model's plus what the host's
// own loopback path costs beyond the emulator's allowance for it. That cost
// is measured alongside, on a connection without a link model. Load only
// adds time, so the fastest of 41 round trips of each kind is compared: a
// busy machine does not make the test flaky, and an emulator that held
// frames too long or too short still fails it.
TEST_P(SoftLinkModelTest, ReadRoundTripIsTwiceTheOneWayDelay) {
  LinkModel link;
  link.one_way_delay = absl::Microseconds(500);
  Start(link, 4096);
  auto base = ConnectPair(client_.get(), server_.get());
  ASSERT_TRUE(base.ok()) << base.status();
  const absl::Duration model = absl::Milliseconds(1);
  const absl::Duration allowance = absl::Nanoseconds(2 * soft::kHostPathNs);
  std::vector<absl::Duration> emulated;
  std::vector<absl::Duration> plain;
  for (int i = 0; i < 41; ++i) {
    emulated.push_back(ReadRoundTrip(pair_.client.get()));
    plain.push_back(ReadRoundTrip(base->client.get()));
  }
  std::sort(emulated.begin(), emulated.end());
  std::sort(plain.begin(), plain.end());
  const absl::Duration rtt = emulated.front();
  const absl::Duration host = plain.front();
  const absl::Duration host_extra = std::max(absl::ZeroDuration(), host - allowance);
  std::printf(
      "fastest READ round trip %.1f us (model 1000 us); without a link model "
      "%.1f us\n",
      absl::ToDoubleMicroseconds(rtt), absl::ToDoubleMicroseconds(host));
  EXPECT_GE(rtt, model * (1 - kTolerance));
  if (Stamped()) {
    // Held until the modelled arrival, each way (to within 1 us): never
    // sooner, however fast the host's own path.
    EXPECT_GE(rtt, model - absl::Microseconds(2));
  }
  if (kChecksKeepingUp) {
    EXPECT_LE(rtt, model * (1 + kTolerance) + host_extra);
    EXPECT_GE(rtt - host_extra, model * (1 - kTolerance));
  }
}

// A thread that spins on its completions sends its held requests on time
// itself, and the NIC thread does not spin for them; when the thread stops
// polling, the NIC thread still sends them on time: a READ posted just
// before a pause of many round trips has completed when polling resumes.
TEST_P(SoftLinkModelTest, RequestsLeaveOnTimeWhenTheApplicationStopsPolling) {
  LinkModel link;
  link.one_way_delay = absl::Milliseconds(2);
  Start(link, 4096);
  QueuePair* qp = pair_.client.get();
  for (int i = 0; i < 3; ++i) ReadRoundTrip(qp);  // a spinning poller
  WorkRequest wr = Read(9, local_.get(), 0, 8, *remote_, 0);
  ASSERT_TRUE(qp->PostSend({&wr, 1}).ok());
  absl::SleepFor(absl::Milliseconds(40));  // 10 round trips, no polls
  const absl::Time resumed = absl::Now();
  EXPECT_EQ(PollCompletions(qp, 1).size(), 1u);
  // Sent only when polling resumed, its answer would take at least the
  // link's one-way delay more.
  EXPECT_LT(absl::Now() - resumed, absl::Milliseconds(1));
}

TEST_P(SoftLinkModelTest, WriteStreamRunsAtTheEmulatedBandwidth) {
  LinkModel link;
  link.bandwidth_gbps = 1;
  Start(link, 16 * 65536);
  double best = 0;
  for (int i = 0; i < kAttempts; ++i) {
    const double gbps = Stream(Opcode::kWrite, 65536, 16, 12 << 20);
    std::printf("WRITE stream %.3f Gb/s (model 1 Gb/s)\n", gbps);
    EXPECT_LE(gbps, 1 + kTolerance);
    best = std::max(best, gbps);
    if (best >= 1 - kTolerance) break;
  }
  if (kChecksKeepingUp) {
    EXPECT_GE(best, 1 - kTolerance);
  }
}

TEST_P(SoftLinkModelTest, ReadStreamRunsAtTheEmulatedBandwidth) {
  LinkModel link;
  link.bandwidth_gbps = 1;
  link.one_way_delay = absl::Microseconds(50);
  Start(link, 16 * 65536);
  double best = 0;
  for (int i = 0; i < kAttempts; ++i) {
    const double gbps = Stream(Opcode::kRead, 65536, 16, 12 << 20);
    std::printf("READ stream %.3f Gb/s (model 1 Gb/s)\n", gbps);
    EXPECT_LE(gbps, 1 + kTolerance);
    best = std::max(best, gbps);
    if (best >= 1 - kTolerance) break;
  }
  if (kChecksKeepingUp) {
    EXPECT_GE(best, 1 - kTolerance);
  }
}

// 16 READs of 1 KiB per 0.8 ms round trip: about 0.16 Gb/s however fast the
// link; more credits or larger READs are the only way up. (The rate is
// compared with the round trip measured on the same connection, which
// includes the host's own latency.)
TEST_P(SoftLinkModelTest, SmallReadsAreCappedByCreditsPerRoundTrip) {
  LinkModel link;
  link.one_way_delay = absl::Microseconds(400);
  link.bandwidth_gbps = 25;
  Start(link, 64 * 1024);
  ASSERT_EQ(pair_.client->max_rd_atomic(), 16);
  const double model_ceiling = 16.0 * 1024 * 8 / 800e-6 / 1e9;
  double best = 0;
  double ceiling = 0;
  for (int i = 0; i < kAttempts; ++i) {
    const absl::Duration rtt = MedianReadRoundTrip(15);
    ceiling = 16.0 * 1024 * 8 / absl::ToDoubleSeconds(rtt) / 1e9;
    const double gbps = Stream(Opcode::kRead, 1024, 64, 2 << 20);
    std::printf(
        "1 KiB READs %.3f Gb/s (credit ceiling %.3f Gb/s at the measured "
        "round trip of %.1f us, %.3f Gb/s at the model's 800 us)\n",
        gbps, ceiling, absl::ToDoubleMicroseconds(rtt), model_ceiling);
    EXPECT_LE(gbps, model_ceiling * (1 + kTolerance));
    best = std::max(best, gbps / ceiling);
    if (best >= 1 - 2 * kTolerance) break;
  }
  if (kChecksKeepingUp) {
    EXPECT_GE(best, 1 - 2 * kTolerance);
  }
}

INSTANTIATE_TEST_SUITE_P(Release, SoftLinkModelTest,
                         ::testing::Values(SoftLinkRelease::kAuto, SoftLinkRelease::kReceiver,
                                           SoftLinkRelease::kSender),
                         [](const ::testing::TestParamInfo<SoftLinkRelease>& info) {
                           switch (info.param) {
                             case SoftLinkRelease::kAuto:
                               return "Auto";
                             case SoftLinkRelease::kReceiver:
                               return "Receiver";
                             case SoftLinkRelease::kSender:
                               break;
                           }
                           return "Sender";
                         });

// Queue pairs between the same two hosts share one link: four streams at
// once take as long as all their bytes need at the link's bandwidth.
// (A loaded machine only makes them slower, so the bound is safe.)
TEST(SoftSharedLinkTest, QueuePairsBetweenTwoHostsShareTheBandwidth) {
  constexpr double kGbps = 1.0;
  constexpr uint32_t kSize = 1 << 20;
  constexpr int kQueuePairs = 4;
  constexpr int kPerQp = 4;
  auto client = CreateSoftProvider(ProviderOptions{});
  ASSERT_TRUE(client.ok()) << client.status();
  auto server = CreateSoftProvider(ProviderOptions{});
  ASSERT_TRUE(server.ok()) << server.status();
  QueuePairOptions options;
  options.link.bandwidth_gbps = kGbps;
  std::vector<QpPair> pairs;
  for (int i = 0; i < kQueuePairs; ++i) {
    auto pair = ConnectPair(client->get(), server->get(), options, {});
    ASSERT_TRUE(pair.ok()) << pair.status();
    pairs.push_back(std::move(*pair));
  }
  auto local = MakeBuffer(client->get(), kSize, kLocalWrite);
  ASSERT_TRUE(local.ok());
  auto remote = MakeBuffer(server->get(), kSize, kLocalWrite | kRemoteWrite);
  ASSERT_TRUE(remote.ok());

  const absl::Time start = absl::Now();
  for (QpPair& pair : pairs) {
    std::vector<WorkRequest> wrs;
    for (int i = 0; i < kPerQp; ++i) wrs.push_back(Write(i, local->get(), 0, kSize, **remote, 0));
    ASSERT_TRUE(pair.client->PostSend(wrs).ok());
  }
  for (QpPair& pair : pairs) {
    const std::vector<Completion> done = PollCompletions(pair.client.get(), kPerQp);
    ASSERT_EQ(done.size(), static_cast<size_t>(kPerQp));
    for (const Completion& c : done) EXPECT_TRUE(c.ok()) << c.ToStatus();
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const double bytes = static_cast<double>(kQueuePairs) * kPerQp * kSize;
  const double shared_seconds = bytes * 8 / (kGbps * 1e9);
  std::printf("%d queue pairs, %.0f MiB over one %.1f Gb/s link: %.1f ms (shared: %.1f ms)\n",
              kQueuePairs, bytes / (1 << 20), kGbps, seconds * 1e3, shared_seconds * 1e3);
  EXPECT_GE(seconds, (1 - kTolerance) * shared_seconds);
}

}  // namespace
}  // namespace dreplay::verbs
