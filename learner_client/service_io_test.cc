// Copyright dreplay authors.
//
// The learner loop's connections, against an in-process replay server:
// staged batches arrive decoded with their weights (and "none yet" is not
// an error), forwarded transitions arrive in order, the actors' lines are
// summed, and the bytes are counted.

#include "learner_client/service_io.h"

#include <cmath>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "absl/strings/match.h"
#include "actor_client/actor_stats_publisher.h"
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
using testing::SmallServerOptions;
using testing::SoftProvider;
using testing::StartServer;
using testing::WaitFor;

constexpr size_t kObservationSize = 4;  // SmallServerOptions' observations
constexpr uint32_t kBatchSize = 8;      // and batches
// An actor's lease there (capacity 256 over 8 leases): inserting no more
// keeps the actor from overwriting a slot while the sampler copies it,
// which would leave the entry out of its batch.
constexpr uint64_t kLeaseSlots = 32;
// A Next() that is expected to find nothing waits this long.
constexpr absl::Duration kShortWait = absl::Milliseconds(20);
constexpr absl::Duration kNextTimeout = absl::Milliseconds(100);

// The encoded transition number `t`.
std::vector<uint8_t> Encoded(uint64_t t) {
  rl::Transition transition;
  transition.observation.assign(kObservationSize, static_cast<float>(t));
  transition.next_observation.assign(kObservationSize, static_cast<float>(t + 1));
  transition.action = static_cast<int32_t>(t % 2);
  std::vector<uint8_t> out(rl::EncodedTransitionSize(kObservationSize));
  EXPECT_TRUE(rl::EncodeTransition(transition, absl::MakeSpan(out)).ok());
  return out;
}

class LearnerServiceIoTest : public ::testing::Test {
 protected:
  void SetUp() override { server_ = StartServer(server_host_.get(), SmallServerOptions()); }

  std::unique_ptr<ClientSession> Connect(Role role, uint32_t actor_id = 0,
                                         bool learner_placement = false) {
    client::ClientSessionOptions options = SessionOptions(*server_, role, actor_id);
    options.learner_placement = learner_placement;
    auto session = ClientSession::Connect(client_host_.get(), options);
    EXPECT_TRUE(session.ok()) << session.status();
    return session.ok() ? std::move(*session) : nullptr;
  }

  // A server that forwards each transition once (the hybrid placement's).
  void RestartForwarding(protocol::ForwardMode mode) {
    server_.reset();
    server::ReplayServerOptions options = SmallServerOptions();
    options.core.sampler.forward = mode;
    server_ = StartServer(server_host_.get(), options);
  }

  // Inserts `count` payloads made by `payload` through one actor.
  template <typename Payload>
  void Insert(uint64_t count, Payload payload, uint32_t actor_id = 1) {
    std::unique_ptr<ClientSession> actor = Connect(Role::kActor, actor_id);
    auto writer = actor::ExperienceWriter::Create(actor.get(), {});
    ASSERT_TRUE(writer.ok()) << writer.status();
    for (uint64_t t = 0; t < count; ++t) {
      ASSERT_TRUE((*writer)->Append(payload(t), 1.0f).ok());
    }
    ASSERT_TRUE((*writer)->Flush().ok());
  }

  std::unique_ptr<LearnerServiceIo> Io(ClientSession* session, ReplayPlacement placement) {
    LearnerServiceIoOptions options;
    options.placement = placement;
    options.retry.reconnect_timeout = testing::kTestTimeout;
    auto io = LearnerServiceIo::Create(session, options);
    EXPECT_TRUE(io.ok()) << io.status();
    return io.ok() ? std::move(*io) : nullptr;
  }

  // Waits for the next batch from `io`: OK when `batch` holds one.
  static absl::Status NextBatch(LearnerServiceIo* io, rl::TransitionBatch* batch,
                                std::vector<float>* weights, std::vector<EntryOrigin>* origins) {
    absl::StatusOr<bool> got = false;
    const bool done = WaitFor([&] {
      got = io->Next(kNextTimeout, batch, weights, origins);
      return !got.ok() || *got;
    });
    if (!got.ok()) return got.status();
    return done ? absl::OkStatus() : absl::DeadlineExceededError("no batch was staged in time");
  }

  std::unique_ptr<verbs::Provider> server_host_ = SoftProvider();
  std::unique_ptr<verbs::Provider> client_host_ = SoftProvider();
  std::unique_ptr<server::ReplayServer> server_;
};

// A server restarted on its port: reading what it ingested reconnects
// rather than READing on the failed connection until the retry gives up.
TEST_F(LearnerServiceIoTest, ServerIngestedFollowsARestartedServer) {
  std::unique_ptr<ClientSession> learner = Connect(Role::kLearner);
  std::unique_ptr<LearnerServiceIo> io = Io(learner.get(), ReplayPlacement::kBuffer);
  ASSERT_NE(io, nullptr);
  Insert(5, Encoded);
  ASSERT_TRUE(testing::WaitFor([&] {
    absl::StatusOr<uint64_t> n = io->server_ingested();
    return n.ok() && *n == 5;
  }));
  const uint64_t generation = learner->generation();
  server::ReplayServerOptions options = SmallServerOptions();
  options.port = server_->port();
  server_.reset();
  server_ = StartServer(server_host_.get(), options);
  absl::StatusOr<uint64_t> ingested = io->server_ingested();
  ASSERT_TRUE(ingested.ok()) << ingested.status();
  EXPECT_EQ(*ingested, 0u);  // the new server's
  EXPECT_GT(learner->generation(), generation);
}

TEST_F(LearnerServiceIoTest, BatchesArriveDecodedWithTheirWeights) {
  std::unique_ptr<ClientSession> learner = Connect(Role::kLearner);
  std::unique_ptr<LearnerServiceIo> io = Io(learner.get(), ReplayPlacement::kBuffer);
  const LearnerIo loop_io = io->io();
  ASSERT_NE(loop_io.batches, nullptr);
  EXPECT_EQ(loop_io.stream, nullptr);
  rl::TransitionBatch batch(kObservationSize);
  std::vector<float> weights;
  std::vector<EntryOrigin> origins;
  // Nothing inserted, nothing staged: "none yet", not an error.
  absl::StatusOr<bool> got = loop_io.batches->Next(kShortWait, &batch, &weights, &origins);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(*got);

  Insert(kLeaseSlots, Encoded);
  ASSERT_TRUE(WaitFor([&] {
    got = loop_io.batches->Next(kNextTimeout, &batch, &weights, &origins);
    return !got.ok() || *got;
  }));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(batch.size(), kBatchSize);
  ASSERT_EQ(weights.size(), batch.size());
  for (float w : weights) EXPECT_GT(w, 0.0f);
  const std::vector<float> priorities(batch.size(), 2.0f);
  EXPECT_TRUE(loop_io.batches->WritePriorities(priorities).ok());
  ASSERT_EQ(origins.size(), batch.size());
  for (const EntryOrigin& origin : origins) EXPECT_TRUE(origin.arrived);
  const LinkStats link = loop_io.link_stats();
  EXPECT_GT(link.total_bytes(), 0u);
  EXPECT_EQ(link.total_bytes(), io->link_bytes());
  EXPECT_GT(link.experience, 0u);
  EXPECT_GT(link.priorities, 0u);
  EXPECT_GE(link.transitions_fetched, kBatchSize);
  // The server ingested what was inserted.
  absl::StatusOr<uint64_t> ingested = loop_io.server_ingested();
  ASSERT_TRUE(ingested.ok()) << ingested.status();
  EXPECT_GT(*ingested, 0u);
  EXPECT_LE(*ingested, kLeaseSlots);
}

TEST_F(LearnerServiceIoTest, EntriesThatDoNotDecodeAreDroppedCountedAndAnsweredWithPriorityZero) {
  std::unique_ptr<ClientSession> learner = Connect(Role::kLearner);
  std::unique_ptr<LearnerServiceIo> io = Io(learner.get(), ReplayPlacement::kBuffer);
  Insert(kLeaseSlots, [](uint64_t t) { return testing::TaggedPayload(t, 100); });
  rl::TransitionBatch batch(kObservationSize);
  std::vector<float> weights;
  std::vector<EntryOrigin> origins;
  ASSERT_TRUE(NextBatch(io.get(), &batch, &weights, &origins).ok());
  EXPECT_EQ(batch.size(), 0u);
  EXPECT_TRUE(weights.empty());
  EXPECT_EQ(io->transitions_dropped(), learner->config().batch_size);
  // The batch is answered (every entry at priority 0), so staging goes on.
  ASSERT_TRUE(io->WritePriorities({}).ok());
  ASSERT_TRUE(NextBatch(io.get(), &batch, &weights, &origins).ok());
  EXPECT_EQ(io->transitions_dropped(), 2u * learner->config().batch_size);
}

// Assembly ahead: once batch n is returned, batch n + 1 (already staged) is
// READ and assembled while the learner "trains", and n's priorities still
// reach n's entries. Each transition t gets priority 1 + t every time it is
// sampled, so the server's priority sum reaches sum_t (1 + t + eps)^alpha
// and stays there only if every update landed on the entries of its own
// batch; an update written to other entries would keep moving it.
TEST_F(LearnerServiceIoTest, BatchesAssembledAheadAreAnsweredForTheirOwnEntries) {
  constexpr uint64_t kTransitions = 8;
  std::unique_ptr<ClientSession> learner = Connect(Role::kLearner);
  std::unique_ptr<LearnerServiceIo> io = Io(learner.get(), ReplayPlacement::kBuffer);
  ASSERT_NE(io, nullptr);
  Insert(kTransitions, Encoded);
  const server::ReplayServerOptions options = SmallServerOptions();
  double expected_sum = 0;
  for (uint64_t t = 0; t < kTransitions; ++t) {
    expected_sum +=
        std::pow(1.0 + t + options.core.memory.priority_epsilon, options.core.memory.alpha);
  }
  rl::TransitionBatch batch(kObservationSize);
  std::vector<float> weights;
  std::vector<EntryOrigin> origins;
  std::vector<float> priorities;
  uint64_t batches = 0;
  // Once every transition has its final priority the sum stays put; a
  // wrong pairing would only pass through it.
  int matched_in_a_row = 0;
  absl::Status failed;
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<bool> got = io->Next(kNextTimeout, &batch, &weights, &origins);
    if (!got.ok()) failed = got.status();
    if (!failed.ok()) return true;
    if (!*got) return false;
    ++batches;
    priorities.clear();
    for (size_t i = 0; i < batch.size(); ++i) {
      // Encoded(t) has observation t in every element.
      priorities.push_back(1.0f + batch.observations()[i * kObservationSize]);
    }
    failed = io->WritePriorities(priorities);
    const protocol::StatsBlock stats = server_->ReadStats();
    const bool matches =
        stats.size == kTransitions && std::abs(stats.priority_sum - expected_sum) < 1e-6;
    matched_in_a_row = matches ? matched_in_a_row + 1 : 0;
    return matched_in_a_row == 30;
  })) << "priority sum "
      << server_->ReadStats().priority_sum << ", expected " << expected_sum << " after " << batches
      << " batches";
  ASSERT_TRUE(failed.ok()) << failed;
  EXPECT_GT(io->batches_read_ahead(), 0u);
  EXPECT_GT(io->assembly_cpu_ns(), 0u);
  EXPECT_EQ(server_->ReadStats().priority_updates_stale, 0u);
}

// Without assembly ahead, nothing is READ before the learner asks.
TEST_F(LearnerServiceIoTest, WithoutAssemblyAheadNothingIsReadAhead) {
  std::unique_ptr<ClientSession> learner = Connect(Role::kLearner);
  LearnerServiceIoOptions options;
  options.placement = ReplayPlacement::kBuffer;
  options.assemble_ahead = false;
  options.retry.reconnect_timeout = testing::kTestTimeout;
  absl::StatusOr<std::unique_ptr<LearnerServiceIo>> io =
      LearnerServiceIo::Create(learner.get(), options);
  ASSERT_TRUE(io.ok()) << io.status();
  Insert(kLeaseSlots, Encoded);
  rl::TransitionBatch batch(kObservationSize);
  std::vector<float> weights;
  std::vector<EntryOrigin> origins;
  for (int n = 0; n < 5; ++n) {
    absl::StatusOr<bool> got;
    ASSERT_TRUE(WaitFor([&] {
      got = (*io)->Next(kNextTimeout, &batch, &weights, &origins);
      return !got.ok() || *got;
    }));
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_GT(batch.size(), 0u);
    ASSERT_TRUE((*io)->WritePriorities(std::vector<float>(batch.size(), 1.0f)).ok());
  }
  EXPECT_EQ((*io)->batches_read_ahead(), 0u);
  EXPECT_GT((*io)->assembly_cpu_ns(), 0u);
}

// A priority update of the wrong length is refused, naming the batch.
TEST_F(LearnerServiceIoTest, PrioritiesOfTheWrongCountAreRefused) {
  std::unique_ptr<ClientSession> learner = Connect(Role::kLearner);
  std::unique_ptr<LearnerServiceIo> io = Io(learner.get(), ReplayPlacement::kBuffer);
  ASSERT_NE(io, nullptr);
  EXPECT_TRUE(absl::IsFailedPrecondition(io->WritePriorities({})));
  Insert(kLeaseSlots, Encoded);
  rl::TransitionBatch batch(kObservationSize);
  std::vector<float> weights;
  std::vector<EntryOrigin> origins;
  ASSERT_TRUE(NextBatch(io.get(), &batch, &weights, &origins).ok());
  const absl::Status wrong = io->WritePriorities(std::vector<float>(batch.size() + 1, 1.0f));
  EXPECT_TRUE(absl::IsInvalidArgument(wrong)) << wrong;
  EXPECT_TRUE(absl::StrContains(wrong.message(), "priorities were given")) << wrong;
}

TEST_F(LearnerServiceIoTest, TheLearnerPlacementNeedsASessionOpenedForIt) {
  // A buffer-placement session has no key to the slots, commit words or
  // journal, so the forward reader refuses it with a clear error.
  std::unique_ptr<ClientSession> learner = Connect(Role::kLearner);
  EXPECT_FALSE(learner->Region(protocol::RegionKind::kSlots).ok());
  LearnerServiceIoOptions options;
  options.placement = ReplayPlacement::kLearner;
  const absl::Status status = LearnerServiceIo::Create(learner.get(), options).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "learner_placement")) << status;
}

TEST_F(LearnerServiceIoTest, TheStreamForwardsEveryTransitionInOrder) {
  std::unique_ptr<ClientSession> learner = Connect(Role::kLearner, 0, /*learner_placement=*/true);
  std::unique_ptr<LearnerServiceIo> io = Io(learner.get(), ReplayPlacement::kLearner);
  const LearnerIo loop_io = io->io();
  EXPECT_EQ(loop_io.batches, nullptr);
  ASSERT_NE(loop_io.stream, nullptr);
  constexpr uint64_t kInserted = 5;
  Insert(kInserted, Encoded);
  std::vector<uint64_t> sequences;
  std::vector<ForwardedItem> items;
  ASSERT_TRUE(WaitFor([&] {
    EXPECT_TRUE(loop_io.stream->Next(kNextTimeout, &items).ok());
    for (const ForwardedItem& item : items) {
      sequences.push_back(item.sequence);
      EXPECT_EQ(item.payload.size(), rl::EncodedTransitionSize(kObservationSize));
      EXPECT_EQ(item.initial_priority, 1.0f);
    }
    return sequences.size() >= kInserted;
  }));
  EXPECT_EQ(sequences, (std::vector<uint64_t>{0, 1, 2, 3, 4}));
}

TEST_F(LearnerServiceIoTest, TheHybridStreamGetsEachTransitionOnceAndFreesTheStaging) {
  RestartForwarding(protocol::ForwardMode::kForwardPriority);
  std::unique_ptr<ClientSession> learner = Connect(Role::kLearner);
  std::unique_ptr<LearnerServiceIo> io = Io(learner.get(), ReplayPlacement::kHybrid);
  const LearnerIo loop_io = io->io();
  EXPECT_EQ(loop_io.batches, nullptr);
  ASSERT_NE(loop_io.stream, nullptr);
  // Two leases' worth (8 batches, twice the staging depth): staging goes
  // on only if every batch is answered.
  const uint64_t lease = learner->config().capacity / learner->config().leases;
  Insert(
      lease, [](uint64_t t) { return Encoded(t); }, 1);
  Insert(
      lease, [](uint64_t t) { return Encoded(1000 + t); }, 2);
  std::vector<uint64_t> arrivals;
  std::multiset<float> firsts;
  std::vector<ForwardedItem> items;
  ASSERT_TRUE(WaitFor([&] {
    EXPECT_TRUE(loop_io.stream->Next(kNextTimeout, &items).ok());
    for (const ForwardedItem& item : items) {
      arrivals.push_back(item.sequence);
      rl::Transition t;
      EXPECT_TRUE(rl::DecodeTransition(item.payload, kObservationSize, &t).ok());
      firsts.insert(t.observation[0]);
      EXPECT_EQ(item.initial_priority, 1.0f);
      EXPECT_GT(item.insert_time_ns, 0u);
    }
    return arrivals.size() >= 2 * lease;
  }));
  ASSERT_EQ(arrivals.size(), 2 * lease);
  std::multiset<float> expected;
  for (uint64_t t = 0; t < lease; ++t) {
    expected.insert(static_cast<float>(t));
    expected.insert(static_cast<float>(1000 + t));
  }
  EXPECT_EQ(firsts, expected) << "every transition, once";
  for (uint64_t k = 0; k < arrivals.size(); ++k) EXPECT_EQ(arrivals[k], k);
  // Nothing more crosses, and the generated count is the server's.
  EXPECT_TRUE(loop_io.stream->Next(kShortWait, &items).ok());
  EXPECT_TRUE(items.empty());
  ASSERT_TRUE(WaitFor([&] {
    EXPECT_TRUE(loop_io.stream->Next(absl::ZeroDuration(), &items).ok());
    return loop_io.stream->generated() == std::optional<uint64_t>(2 * lease);
  }));
  EXPECT_EQ(loop_io.link_stats().transitions_fetched, 2 * lease);
}

TEST_F(LearnerServiceIoTest, APlacementRefusesAServerThatStagesTheOtherKindOfBatch) {
  {
    std::unique_ptr<ClientSession> learner = Connect(Role::kLearner);
    LearnerServiceIoOptions options;
    options.placement = ReplayPlacement::kHybrid;
    const absl::Status status = LearnerServiceIo::Create(learner.get(), options).status();
    EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
    EXPECT_TRUE(absl::StrContains(status.message(), "--forward=priority")) << status;
  }
  RestartForwarding(protocol::ForwardMode::kForwardFifo);
  std::unique_ptr<ClientSession> learner = Connect(Role::kLearner);
  EXPECT_EQ(learner->policy().forward, static_cast<uint32_t>(protocol::ForwardMode::kForwardFifo));
  LearnerServiceIoOptions options;
  options.placement = ReplayPlacement::kBuffer;
  const absl::Status status = LearnerServiceIo::Create(learner.get(), options).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "--replay_placement=hybrid")) << status;
}

TEST_F(LearnerServiceIoTest, ReadSumsTheActorsLinesAndPublishIsCounted) {
  for (uint32_t id : {1u, 2u}) {
    std::unique_ptr<ClientSession> actor = Connect(Role::kActor, id);
    auto publisher = actor::ActorStatsPublisher::Create(actor.get());
    ASSERT_TRUE(publisher.ok()) << publisher.status();
    (*publisher)->RecordStep(10 * id);
    (*publisher)->RecordEpisode(id);
    ASSERT_TRUE((*publisher)->Publish(0).ok());
  }
  std::unique_ptr<ClientSession> learner = Connect(Role::kLearner);
  std::unique_ptr<LearnerServiceIo> io = Io(learner.get(), ReplayPlacement::kBuffer);
  const absl::StatusOr<ActorTotals> totals = io->io().actors->Read();
  ASSERT_TRUE(totals.ok()) << totals.status();
  EXPECT_EQ(totals->actors, 2u);
  EXPECT_EQ(totals->env_steps, 30u);
  EXPECT_EQ(totals->episodes, 2u);
  EXPECT_EQ(totals->returns_count, 2u);
  EXPECT_EQ(totals->returns_sum, 3.0);

  const uint64_t before = io->link_bytes();
  const std::vector<uint8_t> params(256, 7);
  ASSERT_TRUE(io->io().params->Publish(params).ok());
  EXPECT_GE(io->link_bytes(), before + params.size());
}

// Each entry's policy lag: the versions the learner published minus the
// one its actor acted with (none: unknown; one ahead of what the learner
// has seen complete: no lag).
TEST_F(LearnerServiceIoTest, BatchesCarryThePolicyLagOfTheirEntries) {
  std::unique_ptr<ClientSession> learner = Connect(Role::kLearner);
  std::unique_ptr<LearnerServiceIo> io = Io(learner.get(), ReplayPlacement::kBuffer);
  ASSERT_NE(io, nullptr);
  const std::vector<uint8_t> params(256, 7);
  for (int v = 1; v <= 3; ++v) ASSERT_TRUE(io->io().params->Publish(params).ok());
  std::unique_ptr<ClientSession> actor = Connect(Role::kActor, 1);
  auto writer = actor::ExperienceWriter::Create(actor.get(), {});
  ASSERT_TRUE(writer.ok()) << writer.status();
  // Transition t acted with version t % 5: 0 (none), 1, 2, 3 (the latest)
  // or 4 (ahead).
  for (uint64_t t = 0; t < kLeaseSlots; ++t) {
    (*writer)->set_params_version(t % 5);
    ASSERT_TRUE((*writer)->Append(Encoded(t), 1.0f).ok());
  }
  ASSERT_TRUE((*writer)->Flush().ok());
  rl::TransitionBatch batch(kObservationSize);
  std::vector<float> weights;
  std::vector<EntryOrigin> origins;
  int known = 0;
  for (int n = 0; n < 8; ++n) {
    ASSERT_TRUE(NextBatch(io.get(), &batch, &weights, &origins).ok());
    ASSERT_EQ(origins.size(), batch.size());
    for (size_t r = 0; r < batch.size(); ++r) {
      const auto t = static_cast<uint64_t>(batch.observations()[r * kObservationSize]);
      const int64_t expected[] = {-1, 2, 1, 0, 0};
      EXPECT_EQ(origins[r].params_version, t % 5) << "transition " << t;
      EXPECT_EQ(origins[r].policy_lag, expected[t % 5]) << "transition " << t;
      known += origins[r].policy_lag >= 0;
    }
    ASSERT_TRUE(io->WritePriorities(std::vector<float>(batch.size(), 1.0f)).ok());
  }
  EXPECT_GT(known, 0);
}

}  // namespace
}  // namespace dreplay::learner
