// Copyright dreplay authors.
//
// A buffer node as the multi-node source sees it (ServiceNode), against an
// in-process replay server: several batches may be given before the first
// is answered, and answered later in order; S_k and the inserts are read
// from the stats region; a node whose server went away never blocks the
// caller again while it reconnects (off the caller's thread), and it gives
// batches again, marked resumed, once a server is back at its address. And
// a node offered from another thread while the learner takes batches joins.

#include "learner_client/multi_node_io.h"

#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"

#include "absl/time/clock.h"
#include "actor_client/experience_writer.h"
#include "client/session.h"
#include "gtest/gtest.h"
#include "replay_server/server.h"
#include "rl/transition.h"
#include "testing/in_process_service.h"

namespace dreplay::learner {
namespace {

using client::ClientSession;
using protocol::Role;
using testing::SessionOptions;
using testing::SoftProvider;
using testing::StartServer;
using testing::WaitFor;

constexpr size_t kObservationSize = 4;  // SmallServerOptions' observations
constexpr uint32_t kBatchSize = 8;      // and batches
constexpr absl::Duration kNextTimeout = absl::Milliseconds(100);
// How long a node's clients retry, and one reconnection attempt, here.
constexpr absl::Duration kRetry = absl::Milliseconds(150);

std::vector<uint8_t> Encoded(uint64_t t) {
  rl::Transition transition;
  transition.observation.assign(kObservationSize, static_cast<float>(t));
  transition.next_observation.assign(kObservationSize, static_cast<float>(t + 1));
  transition.action = static_cast<int32_t>(t % 2);
  std::vector<uint8_t> out(rl::EncodedTransitionSize(kObservationSize));
  EXPECT_TRUE(rl::EncodeTransition(transition, absl::MakeSpan(out)).ok());
  return out;
}

server::ReplayServerOptions ServerOptions(uint16_t port = 0) {
  server::ReplayServerOptions options = testing::SmallServerOptions();
  options.port = port;
  options.stats_interval = absl::Milliseconds(10);  // S_k and inserts published
  return options;
}

class ServiceNodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartServer(server_host_.get(), ServerOptions());
    client::ClientSessionOptions options = SessionOptions(*server_, Role::kLearner);
    options.connect_deadline = kRetry;
    auto session = ClientSession::Connect(client_host_.get(), options);
    ASSERT_TRUE(session.ok()) << session.status();
    session_ = std::move(*session);
    LearnerServiceIoOptions io;
    io.placement = ReplayPlacement::kBuffer;
    io.retry.reconnect_timeout = kRetry;
    io.retry.attempt_deadline = kRetry;
    io.retry.backoff_initial = absl::Milliseconds(20);
    auto service = LearnerServiceIo::Create(session_.get(), io);
    ASSERT_TRUE(service.ok()) << service.status();
    service_ = std::move(*service);
    node_ = std::make_unique<ServiceNode>(session_.get(), service_.get(), absl::ZeroDuration());
  }

  void Insert(uint64_t count, uint32_t actor_id = 1) {
    auto actor = ClientSession::Connect(client_host_.get(),
                                        SessionOptions(*server_, Role::kActor, actor_id));
    ASSERT_TRUE(actor.ok()) << actor.status();
    auto writer = actor::ExperienceWriter::Create(actor->get(), {});
    ASSERT_TRUE(writer.ok()) << writer.status();
    for (uint64_t t = 0; t < count; ++t) ASSERT_TRUE((*writer)->Append(Encoded(t), 1.0f).ok());
    ASSERT_TRUE((*writer)->Flush().ok());
  }

  // The node's next batch, waiting for it; false if none came in time.
  bool NextBatch(NodeBatch* batch) {
    absl::StatusOr<bool> got = false;
    WaitFor([&] {
      got = node_->Next(kNextTimeout, batch);
      return !got.ok() || *got;
    });
    EXPECT_TRUE(got.ok()) << got.status();
    return got.ok() && *got;
  }

  std::unique_ptr<verbs::Provider> server_host_ = SoftProvider();
  std::unique_ptr<verbs::Provider> client_host_ = SoftProvider();
  std::unique_ptr<server::ReplayServer> server_;
  std::unique_ptr<ClientSession> session_;
  std::unique_ptr<LearnerServiceIo> service_;
  std::unique_ptr<ServiceNode> node_;
};

TEST_F(ServiceNodeTest, BatchesAreAnsweredLaterInOrderWithTheirPriorityAlpha) {
  Insert(32);
  NodeBatch first(kObservationSize, rl::ObservationType::kFloat32);
  NodeBatch second(kObservationSize, rl::ObservationType::kFloat32);
  ASSERT_TRUE(NextBatch(&first));
  ASSERT_TRUE(NextBatch(&second));  // the first still unanswered
  EXPECT_EQ(node_->unanswered(), 2u);
  for (const NodeBatch* b : {&first, &second}) {
    EXPECT_EQ(b->rows.size(), kBatchSize);
    ASSERT_EQ(b->priority_alpha.size(), kBatchSize);
    ASSERT_EQ(b->weights.size(), kBatchSize);
    for (float pa : b->priority_alpha) EXPECT_GT(pa, 0.0f);
    EXPECT_FALSE(b->resumed);
  }
  EXPECT_NE(first.ticket, second.ticket);
  const std::vector<float> priorities(kBatchSize, 3.0f);
  EXPECT_TRUE(absl::IsInvalidArgument(node_->Answer(first.ticket, {1.0f})));
  ASSERT_TRUE(node_->Answer(first.ticket, priorities).ok());
  ASSERT_TRUE(node_->Answer(second.ticket, priorities).ok());
  EXPECT_EQ(node_->unanswered(), 0u);
  EXPECT_TRUE(node_->Answer(first.ticket, priorities).ok()) << "a ticket already answered is void";
  // The server took both updates: it stages more batches than its depth.
  for (int n = 0; n < 6; ++n) {
    NodeBatch more(kObservationSize, rl::ObservationType::kFloat32);
    ASSERT_TRUE(NextBatch(&more)) << "batch " << n;
    ASSERT_TRUE(node_->Answer(more.ticket, priorities).ok());
  }
  EXPECT_TRUE(WaitFor([&] {
    absl::StatusOr<uint64_t> inserted = node_->Inserted();
    absl::StatusOr<double> sum = node_->PrioritySum();
    return inserted.ok() && *inserted == 32 && sum.ok() && *sum > 0;
  }));
}

TEST_F(ServiceNodeTest, ALostNodeNeverBlocksAndComesBackResumed) {
  Insert(32);
  NodeBatch batch(kObservationSize, rl::ObservationType::kFloat32);
  ASSERT_TRUE(NextBatch(&batch));
  const uint16_t port = server_->port();
  server_.reset();
  // The first call finds the connection lost, within the clients' bounds.
  absl::Time start = absl::Now();
  absl::StatusOr<bool> got = false;
  WaitFor([&] {
    got = node_->Next(kNextTimeout, &batch);
    return !got.ok();
  });
  EXPECT_TRUE(client::IsConnectionFailure(got.status())) << got.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  // Every later call answers at once while it reconnects off this thread.
  for (int n = 0; n < 20; ++n) {
    start = absl::Now();
    EXPECT_TRUE(absl::IsUnavailable(node_->Next(kNextTimeout, &batch).status()));
    EXPECT_TRUE(absl::IsUnavailable(node_->PrioritySum().status()));
    EXPECT_LT(absl::Now() - start, absl::Milliseconds(50));
  }
  EXPECT_GT(node_->link_stats().total_bytes(), 0u);
  // A server back at the address, with data: the node gives batches again,
  // and says the ones before are void.
  server_ = StartServer(server_host_.get(), ServerOptions(port));
  Insert(32);
  bool resumed = false;
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<bool> next = node_->Next(kNextTimeout, &batch);
    if (next.ok() && *next) resumed = batch.resumed;
    return next.ok() && *next;
  }));
  EXPECT_TRUE(resumed);
  EXPECT_EQ(node_->unanswered(), 1u) << "the batch before the loss is forgotten";
  EXPECT_TRUE(node_->Answer(batch.ticket, std::vector<float>(batch.rows.size(), 1.0f)).ok());
}

// A node offered from another thread while the learner takes batches joins
// at a later batch and gives rows.
TEST(MultiNodeIoTest, ANodeOfferedFromAnotherThreadJoinsAndGivesRows) {
  std::unique_ptr<verbs::Provider> server_host = SoftProvider();
  std::unique_ptr<verbs::Provider> client_host = SoftProvider();
  std::unique_ptr<server::ReplayServer> servers[2] = {
      StartServer(server_host.get(), ServerOptions()),
      StartServer(server_host.get(), ServerOptions())};
  // Node k's transitions are numbered from 100 k.
  for (int k = 0; k < 2; ++k) {
    auto actor =
        ClientSession::Connect(client_host.get(), SessionOptions(*servers[k], Role::kActor, 1));
    ASSERT_TRUE(actor.ok()) << actor.status();
    auto writer = actor::ExperienceWriter::Create(actor->get(), {});
    ASSERT_TRUE(writer.ok()) << writer.status();
    for (uint64_t t = 0; t < 32; ++t) {
      ASSERT_TRUE((*writer)->Append(Encoded(100 * k + t), 1.0f).ok());
    }
    ASSERT_TRUE((*writer)->Flush().ok());
  }
  auto node = [&](int k) {
    MultiNodeIo::Node n;
    n.address = absl::StrCat("node-", k);
    auto session =
        ClientSession::Connect(client_host.get(), SessionOptions(*servers[k], Role::kLearner));
    EXPECT_TRUE(session.ok()) << session.status();
    n.session = std::move(*session);
    LearnerServiceIoOptions io;
    io.placement = ReplayPlacement::kBuffer;
    auto service = LearnerServiceIo::Create(n.session.get(), io);
    EXPECT_TRUE(service.ok()) << service.status();
    n.service = std::move(*service);
    return n;
  };
  std::vector<MultiNodeIo::Node> first;
  first.push_back(node(0));
  MultiNodeOptions options;
  options.batch_size = kBatchSize;
  auto multi = MultiNodeIo::Create(std::move(first), options, kObservationSize,
                                   rl::ObservationType::kFloat32);
  ASSERT_TRUE(multi.ok()) << multi.status();
  std::thread joiner([&] { (*multi)->Offer(node(1)); });
  rl::TransitionBatch batch(kObservationSize);
  std::vector<float> weights;
  std::vector<EntryOrigin> origins;
  bool from_1 = false;
  const bool joined = WaitFor([&] {
    absl::StatusOr<bool> got = (*multi)->Next(kNextTimeout, &batch, &weights, &origins);
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok() || !*got) return false;
    for (size_t r = 0; r < batch.size(); ++r) {
      from_1 = from_1 || batch.observations()[r * kObservationSize] >= 100;
    }
    EXPECT_TRUE((*multi)->WritePriorities(std::vector<float>(batch.size(), 1.0f)).ok());
    return from_1;
  });
  joiner.join();
  EXPECT_TRUE(joined) << "no row of the offered node";
  EXPECT_EQ((*multi)->offered(), 1u);
  ASSERT_EQ((*multi)->size(), 2u);
  EXPECT_EQ((*multi)->address(1), "node-1");
  EXPECT_GT((*multi)->source()->shares()[1].rows, 0u);
}

}  // namespace
}  // namespace dreplay::learner
