// Copyright dreplay authors.
//
// Parameters go from the learner's publisher to the actors' fetchers through
// the server's params region.

#include "learner_client/param_publisher.h"

#include <atomic>
#include <cstring>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "actor_client/param_fetcher.h"
#include "client/session.h"
#include "gtest/gtest.h"
#include "replay_server/server.h"
#include "testing/in_process_service.h"

namespace dreplay::learner {
namespace {

using actor::ParamFetcher;
using client::ClientSession;
using protocol::Role;
using testing::SessionOptions;
using testing::SmallServerOptions;
using testing::SoftProvider;
using testing::StartServer;

// Parameters of `version`: `size` bytes derived from it.
std::vector<uint8_t> ParamsOf(uint64_t version, size_t size) {
  std::vector<uint8_t> p(size);
  for (size_t i = 0; i < size; ++i) p[i] = static_cast<uint8_t>((version * 37 + i * 11) & 0xff);
  return p;
}

// WRITEs `data` as version `version` into the params region the way a
// publisher does (half, then header), for a version no publisher reaches in
// a test's time.
void WriteVersion(ClientSession* learner, uint64_t version, const std::vector<uint8_t>& data) {
  const protocol::LayoutConfig& config = learner->config();
  auto buffer = client::RegisteredBuffer::Create(
      learner->provider(), sizeof(protocol::ParamsHeader) + protocol::ParamsHalfStride(config));
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  const absl::StatusOr<int> sink = learner->AddSink();
  ASSERT_TRUE(sink.ok()) << sink.status();
  uint8_t* header_image = (*buffer)->data();
  uint8_t* half_image = header_image + sizeof(protocol::ParamsHeader);
  ASSERT_TRUE(protocol::EncodeParamsHalf(
                  config, version, data,
                  absl::MakeSpan(half_image, (*buffer)->size() - sizeof(protocol::ParamsHeader)))
                  .ok());
  protocol::ParamsHeader header{};
  header.version = version;
  header.active_half = protocol::ParamsHalfOf(version);
  std::memcpy(header_image, &header, sizeof(header));
  const absl::StatusOr<verbs::RemoteRegion> params = learner->Region(protocol::RegionKind::kParams);
  ASSERT_TRUE(params.ok()) << params.status();
  verbs::WorkRequest wrs[2];
  wrs[0].wr_id = ClientSession::WrId(*sink, 1);
  wrs[0].opcode = verbs::Opcode::kWrite;
  wrs[0].signaled = false;
  wrs[0].local = (*buffer)->mr();
  wrs[0].local_addr = half_image;
  wrs[0].length = static_cast<uint32_t>(sizeof(protocol::ParamsHalfHeader) + data.size());
  wrs[0].remote_addr = params->addr + protocol::ParamsHalfOffset(config, header.active_half);
  wrs[0].rkey = params->rkey;
  wrs[1] = wrs[0];
  wrs[1].wr_id = ClientSession::WrId(*sink, 2);
  wrs[1].signaled = true;
  wrs[1].local_addr = header_image;
  wrs[1].length = sizeof(protocol::ParamsHeader);
  wrs[1].remote_addr = params->addr;
  ASSERT_TRUE(learner->Post(absl::MakeConstSpan(wrs, 2)).ok());
  ASSERT_TRUE(learner->Wait(*sink, wrs[1].wr_id, learner->options().op_timeout).ok());
}

class ParamsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_host_ = SoftProvider();
    client_host_ = SoftProvider();
    server_ = StartServer(server_host_.get(), SmallServerOptions());
  }

  std::unique_ptr<ClientSession> Connect(Role role, uint32_t actor_id = 0) {
    auto session =
        ClientSession::Connect(client_host_.get(), SessionOptions(*server_, role, actor_id));
    EXPECT_TRUE(session.ok()) << session.status();
    return session.ok() ? std::move(*session) : nullptr;
  }

  std::unique_ptr<verbs::Provider> server_host_;
  std::unique_ptr<verbs::Provider> client_host_;
  std::unique_ptr<server::ReplayServer> server_;
};

TEST_F(ParamsTest, PublishedVersionsAreFetchedWholeAndOnlyOnce) {
  auto learner = Connect(Role::kLearner);
  auto actor = Connect(Role::kActor, 1);
  ASSERT_TRUE(learner && actor);
  auto publisher = *ParamPublisher::Create(learner.get());
  auto fetcher = *ParamFetcher::Create(actor.get(), {});
  std::vector<uint8_t> params;
  EXPECT_FALSE(*fetcher->FetchIfNewer(&params));  // nothing published yet

  EXPECT_EQ(*publisher->Publish(ParamsOf(1, 1000)), 1u);
  ASSERT_TRUE(*fetcher->FetchIfNewer(&params));
  EXPECT_EQ(fetcher->version(), 1u);
  EXPECT_EQ(params, ParamsOf(1, 1000));
  EXPECT_FALSE(*fetcher->FetchIfNewer(&params));

  // Grown parameters are READ whole, and skipped versions do not matter.
  EXPECT_EQ(*publisher->Publish(ParamsOf(2, 3000)), 2u);
  EXPECT_EQ(*publisher->Publish(ParamsOf(3, 4096)), 3u);
  ASSERT_TRUE(*fetcher->FetchIfNewer(&params));
  EXPECT_EQ(fetcher->version(), 3u);
  EXPECT_EQ(params, ParamsOf(3, 4096));
}

TEST_F(ParamsTest, PublishIfIdleNeverWaitsAndDefersWhileOneIsInFlight) {
  auto learner = Connect(Role::kLearner);
  auto actor = Connect(Role::kActor, 1);
  ASSERT_TRUE(learner && actor);
  auto publisher = *ParamPublisher::Create(learner.get());
  auto fetcher = *ParamFetcher::Create(actor.get(), {});
  ASSERT_TRUE(*publisher->PublishIfIdle(ParamsOf(1, 1000)));
  // Until the first one's completion is seen, later calls post nothing.
  uint64_t deferred = 0;
  absl::StatusOr<bool> posted;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!(posted = publisher->PublishIfIdle(ParamsOf(2, 2000))).ok() || !*posted) {
    ASSERT_TRUE(posted.ok()) << posted.status();
    ASSERT_LT(absl::Now(), deadline);
    ++deferred;
  }
  EXPECT_EQ(publisher->version(), 1u);  // the first one's completion was seen
  // A blocking publication waits for the one in flight, then goes after it.
  EXPECT_EQ(*publisher->Publish(ParamsOf(3, 3000)), 3u);
  std::vector<uint8_t> params;
  ASSERT_TRUE(*fetcher->FetchIfNewer(&params));
  EXPECT_EQ(fetcher->version(), 3u);
  EXPECT_EQ(params, ParamsOf(3, 3000));
  // The oversized check comes first, as in Publish().
  EXPECT_EQ(publisher->PublishIfIdle(std::vector<uint8_t>(1 << 24)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ParamsTest, OversizedParametersAreRefused) {
  auto learner = Connect(Role::kLearner);
  ASSERT_NE(learner, nullptr);
  auto publisher = *ParamPublisher::Create(learner.get());
  const absl::Status s = publisher->Publish(ParamsOf(1, 4097)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("param_bytes=4096"), std::string::npos) << s;
  EXPECT_EQ(publisher->version(), 0u);
}

TEST_F(ParamsTest, ANewPublisherContinuesAfterTheServersVersion) {
  {
    auto learner = Connect(Role::kLearner);
    ASSERT_NE(learner, nullptr);
    auto publisher = *ParamPublisher::Create(learner.get());
    ASSERT_TRUE(publisher->Publish(ParamsOf(1, 10)).ok());
    ASSERT_TRUE(publisher->Publish(ParamsOf(2, 10)).ok());
  }
  auto learner = Connect(Role::kLearner);  // waits for the first to be dropped
  ASSERT_NE(learner, nullptr);
  auto publisher = *ParamPublisher::Create(learner.get());
  EXPECT_EQ(publisher->version(), 2u);
  EXPECT_EQ(*publisher->Publish(ParamsOf(3, 10)), 3u);
}

TEST_F(ParamsTest, TheLastVersionBeforeTheWrapDoesNotFreezeFetching) {
  constexpr uint64_t kLast = std::numeric_limits<uint64_t>::max();
  auto actor = Connect(Role::kActor, 1);
  ASSERT_NE(actor, nullptr);
  auto fetcher = *ParamFetcher::Create(actor.get(), {});
  std::vector<uint8_t> params;
  {
    auto learner = Connect(Role::kLearner);
    ASSERT_NE(learner, nullptr);
    WriteVersion(learner.get(), kLast, ParamsOf(7, 100));
  }
  ASSERT_TRUE(*fetcher->FetchIfNewer(&params));
  EXPECT_EQ(fetcher->version(), kLast);
  // A publisher continues after it: the version wraps, and actors fetch on.
  auto learner = Connect(Role::kLearner);
  ASSERT_NE(learner, nullptr);
  auto publisher = *ParamPublisher::Create(learner.get());
  EXPECT_EQ(publisher->version(), kLast);
  EXPECT_EQ(*publisher->Publish(ParamsOf(8, 100)), 2u);
  ASSERT_TRUE(*fetcher->FetchIfNewer(&params));
  EXPECT_EQ(fetcher->version(), 2u);
  EXPECT_EQ(params, ParamsOf(8, 100));
  EXPECT_EQ(*publisher->Publish(ParamsOf(9, 100)), 3u);
  ASSERT_TRUE(*fetcher->FetchIfNewer(&params));
  EXPECT_EQ(params, ParamsOf(9, 100));
}

TEST_F(ParamsTest, AServerStartedAfreshIsFetchedFromAgain) {
  auto actor = Connect(Role::kActor, 1);
  auto learner = Connect(Role::kLearner);
  ASSERT_TRUE(actor && learner);
  auto fetcher = *ParamFetcher::Create(actor.get(), {});
  std::vector<uint8_t> params;
  WriteVersion(learner.get(), 500, ParamsOf(1, 100));
  ASSERT_TRUE(*fetcher->FetchIfNewer(&params));
  // The params region as a fresh server has it, then its first version.
  WriteVersion(learner.get(), 1, ParamsOf(2, 100));
  ASSERT_TRUE(*fetcher->FetchIfNewer(&params));
  EXPECT_EQ(fetcher->version(), 1u);
  EXPECT_EQ(params, ParamsOf(2, 100));
  EXPECT_FALSE(*fetcher->FetchIfNewer(&params));
}

TEST_F(ParamsTest, ConcurrentFetchesNeverSeeATornOrMixedVersion) {
  std::atomic<bool> done{false};
  std::atomic<uint64_t> published{0};
  std::thread learner_thread([&] {
    auto learner = Connect(Role::kLearner);
    ASSERT_NE(learner, nullptr);
    auto publisher = *ParamPublisher::Create(learner.get());
    for (uint64_t v = 1; v <= 300; ++v) {
      ASSERT_TRUE(publisher->Publish(ParamsOf(v, 2048 + v % 7)).ok());
      published = v;
    }
    done = true;
  });
  auto actor = Connect(Role::kActor, 2);
  ASSERT_NE(actor, nullptr);
  actor::ParamFetcherOptions options;
  options.max_attempts = 1000;
  options.retry_backoff = absl::ZeroDuration();
  auto fetcher = *ParamFetcher::Create(actor.get(), options);
  std::vector<uint8_t> params;
  uint64_t fetches = 0;
  uint64_t last = 0;
  while (!done || fetcher->version() < 300) {
    absl::StatusOr<bool> fresh = fetcher->FetchIfNewer(&params);
    ASSERT_TRUE(fresh.ok()) << fresh.status();
    if (!*fresh) continue;
    ++fetches;
    ASSERT_GT(fetcher->version(), last);
    last = fetcher->version();
    ASSERT_EQ(params.size(), 2048 + last % 7);
    ASSERT_EQ(params, ParamsOf(last, params.size())) << "version " << last;
  }
  learner_thread.join();
  EXPECT_GE(fetches, 1u);
  EXPECT_EQ(fetcher->version(), 300u);
}

}  // namespace
}  // namespace dreplay::learner
