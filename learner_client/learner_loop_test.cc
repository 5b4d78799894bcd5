// Copyright dreplay authors.

#include "learner_client/learner_loop.h"

#include <atomic>
#include <cmath>
#include <deque>
#include <limits>
#include <optional>
#include <vector>

#include "gtest/gtest.h"
#include "rl/make_environment.h"
#include "rl/policy.h"
#include "rl/random.h"

namespace dreplay::learner {
namespace {

constexpr int kObservation = 4;  // CartPole
constexpr int kBatch = 16;

// A valid encoded CartPole transition drawn from `random`, followed by
// `pad` bytes of padding (as an actor's --payload_pad_bytes).
std::vector<uint8_t> RandomPayload(rl::Random& random, size_t pad = 0) {
  rl::Transition t;
  for (int i = 0; i < kObservation; ++i) {
    t.observation.push_back(static_cast<float>(random.Uniform(-0.2, 0.2)));
    t.next_observation.push_back(static_cast<float>(random.Uniform(-0.2, 0.2)));
  }
  t.action = static_cast<int32_t>(random.UniformInt(2));
  t.reward = 1.0f;
  t.discount = 0.97f;
  t.steps = 3;
  std::vector<uint8_t> out(rl::EncodedTransitionSize(kObservation) + pad, 0xee);
  EXPECT_TRUE(rl::EncodeTransition(t, absl::MakeSpan(out)).ok());
  return out;
}

class FakeBatches : public BatchSource {
 public:
  explicit FakeBatches(int batches) : remaining(batches) {}
  absl::StatusOr<bool> Next(absl::Duration, rl::TransitionBatch* batch, std::vector<float>* weights,
                            std::vector<EntryOrigin>* origins) override {
    if (remaining == 0) return false;
    --remaining;
    batch->Clear();
    weights->clear();
    origins->clear();
    for (int i = 0; i < kBatch; ++i) {
      const absl::Status s = batch->AddEncoded(RandomPayload(random));
      if (!s.ok()) return s;
      weights->push_back(0.5f);
      // Even entries crossed the link; odd ones came from the cache.
      if (with_origins) {
        origins->push_back({i % 2 == 0 ? arrived_insert_ns : cached_insert_ns, i % 2 == 0});
      }
    }
    return true;
  }
  absl::Status WritePriorities(absl::Span<const float> priorities) override {
    written.emplace_back(priorities.begin(), priorities.end());
    return absl::OkStatus();
  }
  int remaining;
  rl::Random random{5};
  std::vector<std::vector<float>> written;
  bool with_origins = false;
  uint64_t arrived_insert_ns = 0;
  uint64_t cached_insert_ns = 0;
};

class FakeStream : public TransitionStream {
 public:
  FakeStream(int total, int chunk, size_t pad = 0) : remaining(total), chunk(chunk), pad(pad) {}
  absl::Status Next(absl::Duration, std::vector<ForwardedItem>* out) override {
    out->clear();
    payloads.clear();
    const int n = std::min(remaining, chunk);
    for (int i = 0; i < n; ++i) payloads.push_back(RandomPayload(random, pad));
    for (int i = 0; i < n; ++i) {
      ForwardedItem item;
      item.sequence = next_sequence++;
      item.initial_priority = 1.0f;
      item.insert_time_ns = insert_ns;
      item.payload = payloads[i];
      out->push_back(item);
    }
    remaining -= n;
    return absl::OkStatus();
  }
  int remaining;
  const int chunk;
  const size_t pad;
  uint64_t insert_ns = 0;
  uint64_t next_sequence = 0;
  std::vector<std::vector<uint8_t>> payloads;
  rl::Random random{6};
};

class FakeParams : public ParamsSink {
 public:
  absl::Status Publish(absl::Span<const uint8_t> params) override {
    published.emplace_back(params.begin(), params.end());
    return absl::OkStatus();
  }
  std::vector<std::vector<uint8_t>> published;
};

// Busy (nothing posted) for the first `busy` calls of PublishIfIdle.
class BusyParams : public FakeParams {
 public:
  explicit BusyParams(int busy) : busy_(busy) {}
  absl::StatusOr<bool> PublishIfIdle(absl::Span<const uint8_t> params) override {
    ++calls;
    if (busy_ > 0) {
      --busy_;
      return false;
    }
    published.emplace_back(params.begin(), params.end());
    return true;
  }
  int calls = 0;

 private:
  int busy_;
};

class FakeActors : public ActorStatsSource {
 public:
  absl::StatusOr<ActorTotals> Read() override {
    ++reads;
    totals.env_steps += steps_per_read;  // actors that go on stepping
    return totals;
  }
  ActorTotals totals;
  int reads = 0;
  uint64_t steps_per_read = 0;
};

LearnerLoopOptions SmallOptions(ReplayPlacement placement) {
  LearnerLoopOptions o;
  o.placement = placement;
  o.env = "CartPole-v1";
  o.dqn.network.hidden_sizes = {16};
  o.dqn.seed = 3;
  o.memory.capacity = 1024;
  o.batch_size = kBatch;
  o.min_replay_size = 100;
  o.eval_episodes = 5;
  o.eval_interval = absl::Hours(1);
  o.progress_interval = absl::Hours(1);
  o.wait_timeout = absl::Milliseconds(1);
  o.publish_every = 0;
  return o;
}

TEST(EvaluateGreedyTest, GivesTheReturnsOfEvaluatePolicyWithTheGreedyAction) {
  rl::QNetworkOptions options;
  options.observation_size = kObservation;
  options.action_count = 2;
  options.hidden_sizes = {8};
  for (uint64_t seed : {1, 2, 3}) {
    auto network = rl::QNetwork::Create(options, seed);
    ASSERT_TRUE(network.ok());
    auto batched = EvaluateGreedy(**network, "CartPole-v1", 8, 100);
    ASSERT_TRUE(batched.ok()) << batched.status();
    auto env = rl::MakeEnvironment("CartPole-v1");
    ASSERT_TRUE(env.ok());
    const rl::QNetwork& net = **network;
    auto single = rl::EvaluatePolicy(
        **env, [&net](absl::Span<const float> obs) { return net.GreedyAction(obs); }, 8, 100);
    ASSERT_TRUE(single.ok()) << single.status();
    EXPECT_EQ(batched->returns, single->returns) << "network seed " << seed;
    EXPECT_DOUBLE_EQ(batched->mean_return, single->mean_return);
  }
}

TEST(EvaluateGreedyTest, RefusesANetworkOfAnotherShapeAndZeroEpisodes) {
  rl::QNetworkOptions options;
  options.observation_size = 6;
  options.action_count = 3;
  auto network = rl::QNetwork::Create(options, 1);
  ASSERT_TRUE(network.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(EvaluateGreedy(**network, "CartPole-v1", 2, 0).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(EvaluateGreedy(**network, "Acrobot-v1", 0, 0).status()));
}

TEST(LearnerLoopTest, BufferPlacementTrainsOnEveryBatchAndWritesBackItsPriorities) {
  FakeBatches batches(30);
  LearnerLoopOptions o = SmallOptions(ReplayPlacement::kBuffer);
  o.max_train_steps = 30;
  auto loop = LearnerLoop::Create(o, {&batches, nullptr, nullptr, nullptr, {}, {}});
  ASSERT_TRUE(loop.ok()) << loop.status();
  const std::atomic<bool> stop{false};
  ASSERT_TRUE((*loop)->Run(stop).ok());
  EXPECT_EQ((*loop)->learner().train_steps(), 30);
  ASSERT_EQ(batches.written.size(), 30u);
  double sum = 0;
  for (const auto& priorities : batches.written) {
    ASSERT_EQ(priorities.size(), static_cast<size_t>(kBatch));
    for (float p : priorities) {
      EXPECT_GE(p, 0.0f);
      sum += p;
    }
  }
  const SummaryRecord s = (*loop)->Summary();
  EXPECT_EQ(s.replay_placement, "buffer");
  EXPECT_EQ(s.train_steps, 30u);
  EXPECT_EQ(s.link_transitions_total, 30u * kBatch);
  ASSERT_TRUE(s.loss_mean_last_half.has_value());
  ASSERT_TRUE(s.transferred_priority_mean_last_half.has_value());
  EXPECT_GT(*s.transferred_priority_mean_last_half, 0.0);
  // One final evaluation, as the run did not end solved.
  EXPECT_EQ(s.evaluations, 1u);
}

TEST(LearnerLoopTest, LearnerPlacementStoresEveryArrivalAndTrainsOnceEnoughAreStored) {
  FakeStream stream(300, 40);
  LearnerLoopOptions o = SmallOptions(ReplayPlacement::kLearner);
  o.max_train_steps = 50;
  auto loop = LearnerLoop::Create(o, {nullptr, &stream, nullptr, nullptr, {}, {}});
  ASSERT_TRUE(loop.ok()) << loop.status();
  const std::atomic<bool> stop{false};
  ASSERT_TRUE((*loop)->Run(stop).ok());
  EXPECT_EQ((*loop)->learner().train_steps(), 50);
  EXPECT_EQ((*loop)->local_replay_size(), 300u);
  const SummaryRecord s = (*loop)->Summary();
  EXPECT_EQ(s.replay_placement, "learner");
  EXPECT_EQ(s.link_transitions_total, 300u);
  EXPECT_TRUE(s.loss_mean_last_half.has_value());
}

TEST(LearnerLoopTest, MaxUpdatesPerSecondHoldsTheLoopBackInEveryPlacement) {
  // 20 steps at 100/s take at least 190 ms however fast the steps are; the
  // learner placement keeps taking arrivals in while it is held back.
  FakeBatches batches(1000);
  FakeStream stream(1000, 40);
  for (ReplayPlacement placement : {ReplayPlacement::kBuffer, ReplayPlacement::kLearner}) {
    LearnerLoopOptions o = SmallOptions(placement);
    o.max_train_steps = 20;
    o.max_updates_per_s = 100;
    o.eval_interval = absl::InfiniteDuration();
    LearnerIo io;
    io.batches = &batches;
    io.stream = &stream;
    auto loop = LearnerLoop::Create(o, io);
    ASSERT_TRUE(loop.ok()) << loop.status();
    const std::atomic<bool> stop{false};
    const absl::Time start = absl::Now();
    ASSERT_TRUE((*loop)->Run(stop).ok());
    EXPECT_GE(absl::Now() - start, absl::Milliseconds(190)) << ReplayPlacementName(placement);
    EXPECT_EQ((*loop)->learner().train_steps(), 20);
  }
  EXPECT_EQ(stream.remaining, 0);  // 1000 arrived in 25 calls
}

TEST(LearnerLoopTest, LearnerPlacementDoesNotTrainBeforeTheMinimumReplaySize) {
  FakeStream stream(60, 20);
  LearnerLoopOptions o = SmallOptions(ReplayPlacement::kLearner);
  o.duration = absl::Milliseconds(100);
  auto loop = LearnerLoop::Create(o, {nullptr, &stream, nullptr, nullptr, {}, {}});
  ASSERT_TRUE(loop.ok()) << loop.status();
  const std::atomic<bool> stop{false};
  ASSERT_TRUE((*loop)->Run(stop).ok());
  EXPECT_EQ((*loop)->learner().train_steps(), 0);
  EXPECT_EQ((*loop)->local_replay_size(), 60u);
}

TEST(LearnerLoopTest, PublishesTheNetworkAtTheStartAndEveryPublishPeriod) {
  FakeBatches batches(25);
  FakeParams params;
  LearnerLoopOptions o = SmallOptions(ReplayPlacement::kBuffer);
  o.max_train_steps = 25;
  o.publish_every = 10;
  auto loop = LearnerLoop::Create(o, {&batches, nullptr, &params, nullptr, {}, {}});
  ASSERT_TRUE(loop.ok()) << loop.status();
  const std::atomic<bool> stop{false};
  ASSERT_TRUE((*loop)->Run(stop).ok());
  ASSERT_EQ(params.published.size(), 3u);  // start, step 10, step 20
  rl::QNetworkOptions shape;
  shape.observation_size = kObservation;
  shape.action_count = 2;
  shape.hidden_sizes = {16};
  auto network = rl::QNetwork::Create(shape, 99);
  ASSERT_TRUE(network.ok());
  auto version = (*network)->Load(params.published.back());
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(*version, 3u);
}

TEST(LearnerLoopTest, APublicationInFlightDefersTheNextWhichCarriesNewerParameters) {
  FakeBatches batches(25);
  BusyParams params(/*busy=*/5);
  LearnerLoopOptions o = SmallOptions(ReplayPlacement::kBuffer);
  o.max_train_steps = 25;
  o.publish_every = 10;
  auto loop = LearnerLoop::Create(o, {&batches, nullptr, &params, nullptr, {}, {}});
  ASSERT_TRUE(loop.ok()) << loop.status();
  const std::atomic<bool> stop{false};
  ASSERT_TRUE((*loop)->Run(stop).ok());
  // The start (blocking), then step 10's, posted 5 calls later at step 15,
  // and step 20's.
  ASSERT_EQ(params.published.size(), 3u);
  EXPECT_EQ(params.calls, 7);
  rl::QNetworkOptions shape;
  shape.observation_size = kObservation;
  shape.action_count = 2;
  shape.hidden_sizes = {16};
  auto network = *rl::QNetwork::Create(shape, 99);
  ASSERT_EQ(*network->Load(params.published[1]), 2u);
  std::vector<float> deferred = network->GetParameters();
  ASSERT_EQ(*network->Load(params.published[2]), 3u);
  EXPECT_NE(deferred, network->GetParameters());
}

TEST(LearnerLoopTest, SnapshotsAtTheStartOnTheIntervalGridAndAtTheEnd) {
  FakeBatches batches(1000000);
  LearnerLoopOptions o = SmallOptions(ReplayPlacement::kBuffer);
  o.duration = absl::Milliseconds(300);
  o.snapshot_interval = absl::Milliseconds(50);
  o.eval_interval = absl::InfiniteDuration();
  std::vector<SnapshotRecord> records;
  std::vector<std::vector<uint8_t>> buffers;
  LearnerIo io{&batches, nullptr, nullptr, nullptr, {}, {}};
  io.on_snapshot = [&](const SnapshotRecord& r, absl::Span<const uint8_t> p) {
    records.push_back(r);
    buffers.emplace_back(p.begin(), p.end());
    return absl::OkStatus();
  };
  auto loop = LearnerLoop::Create(o, io);
  ASSERT_TRUE(loop.ok()) << loop.status();
  const std::atomic<bool> stop{false};
  ASSERT_TRUE((*loop)->Run(stop).ok());
  ASSERT_GE(records.size(), 3u);  // start, at least one on the grid, end
  EXPECT_LT(records.front().wall_s, 0.05);
  EXPECT_EQ(records.front().train_steps, 0u);
  EXPECT_GE(records.back().wall_s, 0.3);
  EXPECT_EQ(records.back().train_steps, (*loop)->learner().train_steps());
  rl::QNetworkOptions shape;
  shape.observation_size = kObservation;
  shape.action_count = 2;
  shape.hidden_sizes = {16};
  auto network = *rl::QNetwork::Create(shape, 99);
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(records[i].index, i);
    if (i > 0) {
      EXPECT_GE(records[i].wall_s, records[i - 1].wall_s);
      EXPECT_GE(records[i].train_steps, records[i - 1].train_steps);
    }
    EXPECT_EQ(*network->Load(buffers[i]), i);
  }
  // No evaluation ran: the summary has none.
  EXPECT_EQ((*loop)->Summary().evaluations, 0u);
}

TEST(LearnerLoopTest, RefusesANegativeOrInfiniteUpdateRate) {
  FakeBatches batches(1);
  for (double rate :
       {-1.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    LearnerLoopOptions o = SmallOptions(ReplayPlacement::kBuffer);
    o.max_updates_per_s = rate;
    EXPECT_EQ(LearnerLoop::Create(o, {&batches, nullptr, nullptr, nullptr, {}, {}}).status().code(),
              absl::StatusCode::kInvalidArgument)
        << rate;
  }
}

// The actors step on while the run ends (and an evaluation runs): the last
// snapshot and the summary must count the same steps.
TEST(LearnerLoopTest, TheLastSnapshotAndTheSummaryCountTheSameEnvSteps) {
  FakeBatches batches(1000000);
  FakeActors actors;
  actors.steps_per_read = 100;
  LearnerLoopOptions o = SmallOptions(ReplayPlacement::kBuffer);
  o.duration = absl::Milliseconds(200);
  o.snapshot_interval = absl::Milliseconds(50);
  o.eval_interval = absl::Milliseconds(100);
  std::vector<SnapshotRecord> records;
  LearnerIo io{&batches, nullptr, nullptr, &actors, {}, {}};
  io.on_snapshot = [&](const SnapshotRecord& r, absl::Span<const uint8_t>) {
    records.push_back(r);
    return absl::OkStatus();
  };
  auto loop = LearnerLoop::Create(o, io);
  ASSERT_TRUE(loop.ok()) << loop.status();
  const std::atomic<bool> stop{false};
  ASSERT_TRUE((*loop)->Run(stop).ok());
  ASSERT_FALSE(records.empty());
  EXPECT_GT(records.back().env_steps, 0u);
  EXPECT_EQ(records.back().env_steps, (*loop)->Summary().env_steps);
}

TEST(LearnerLoopTest, RefusesStopWhenSolvedWithoutEvaluationsAndSnapshotsWithoutASink) {
  FakeBatches batches(1);
  LearnerLoopOptions o = SmallOptions(ReplayPlacement::kBuffer);
  o.stop_when_solved = true;
  o.eval_interval = absl::InfiniteDuration();
  EXPECT_EQ(o.Validate().code(), absl::StatusCode::kInvalidArgument);
  o = SmallOptions(ReplayPlacement::kBuffer);
  o.snapshot_interval = absl::Seconds(1);
  EXPECT_EQ(LearnerLoop::Create(o, {&batches, nullptr, nullptr, nullptr, {}, {}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(LearnerLoopTest, StopsAtTheFirstEvaluationThatSolves) {
  FakeBatches batches(0);  // nothing to train on: the evaluation decides
  FakeActors actors;
  actors.totals.env_steps = 1234;
  LearnerLoopOptions o = SmallOptions(ReplayPlacement::kBuffer);
  o.stop_when_solved = true;
  o.solve_return = 1.0;  // any episode reaches it
  o.eval_interval = absl::Milliseconds(20);
  o.duration = absl::Seconds(60);
  auto loop = LearnerLoop::Create(o, {&batches, nullptr, nullptr, &actors, {}, {}});
  ASSERT_TRUE(loop.ok()) << loop.status();
  const std::atomic<bool> stop{false};
  const absl::Time start = absl::Now();
  ASSERT_TRUE((*loop)->Run(stop).ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  const SummaryRecord s = (*loop)->Summary();
  EXPECT_TRUE(s.solved);
  ASSERT_TRUE(s.time_to_solve_s.has_value());
  EXPECT_GE(*s.time_to_solve_s, 0.02);
  EXPECT_EQ(*s.env_steps_to_solve, 1234u);
  EXPECT_EQ(s.evaluations, 1u);
}

TEST(LearnerLoopTest, ReportsProgressEveryIntervalAndOnceAtTheEnd) {
  FakeBatches batches(0);
  FakeActors actors;
  actors.totals.env_steps = 77;
  std::vector<ProgressRecord> records;
  LearnerLoopOptions o = SmallOptions(ReplayPlacement::kBuffer);
  o.progress_interval = absl::Milliseconds(30);
  o.duration = absl::Milliseconds(200);
  o.seed = 11;
  LinkStats link;
  link.experience = 4000;
  link.params = 96;
  auto loop =
      LearnerLoop::Create(o, {&batches, nullptr, nullptr, &actors, [&] { return link; },
                              [&records](const ProgressRecord& r) { records.push_back(r); }});
  ASSERT_TRUE(loop.ok()) << loop.status();
  const std::atomic<bool> stop{false};
  ASSERT_TRUE((*loop)->Run(stop).ok());
  ASSERT_GE(records.size(), 3u);
  for (size_t i = 1; i < records.size(); ++i) {
    EXPECT_GT(records[i].wall_s, records[i - 1].wall_s);
  }
  const ProgressRecord& last = records.back();
  EXPECT_EQ(last.seed, 11u);
  EXPECT_EQ(last.env_steps, 77u);
  EXPECT_EQ(last.link_bytes_total, 4096u);
  EXPECT_EQ(last.link.experience, 4000u);
  EXPECT_EQ(last.link.params, 96u);
  EXPECT_TRUE(last.eval_return_mean.has_value());  // the final evaluation
  EXPECT_GE(last.wall_s, 0.2);
}

TEST(LearnerLoopTest, StopFlagEndsTheRun) {
  FakeBatches batches(0);
  LearnerLoopOptions o = SmallOptions(ReplayPlacement::kBuffer);
  auto loop = LearnerLoop::Create(o, {&batches, nullptr, nullptr, nullptr, {}, {}});
  ASSERT_TRUE(loop.ok()) << loop.status();
  const std::atomic<bool> stop{true};
  ASSERT_TRUE((*loop)->Run(stop).ok());
  EXPECT_EQ((*loop)->learner().train_steps(), 0);
}

// The squared/linear Huber function of the DQN loss (rl/dqn_loss.h).
double HuberOf(double x, double delta) {
  const double a = std::abs(x);
  return a <= delta ? 0.5 * x * x : delta * (a - 0.5 * delta);
}

TEST(LearnerLoopTest, TheProbeSetIsTheSameInBothPlacementsAndSoIsItsLoss) {
  FakeBatches batches(0);
  FakeStream stream(0, 1);
  LearnerLoopOptions buffer = SmallOptions(ReplayPlacement::kBuffer);
  LearnerLoopOptions learner = SmallOptions(ReplayPlacement::kLearner);
  for (LearnerLoopOptions* o : {&buffer, &learner}) {
    o->probe_size = 200;
    o->probe_seed = 77;
  }
  auto b = LearnerLoop::Create(buffer, {&batches, nullptr, nullptr, nullptr, {}, {}});
  auto l = LearnerLoop::Create(learner, {nullptr, &stream, nullptr, nullptr, {}, {}});
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE(l.ok()) << l.status();
  const rl::TransitionBatch& pb = (*b)->probe_set();
  const rl::TransitionBatch& pl = (*l)->probe_set();
  ASSERT_EQ(pb.size(), 200u);
  EXPECT_EQ(pb.observations(), pl.observations());
  EXPECT_EQ(pb.actions(), pl.actions());
  EXPECT_EQ(pb.rewards(), pl.rewards());
  EXPECT_EQ(pb.discounts(), pl.discounts());
  // n-step transitions of the options' n and gamma.
  for (float d : pb.discounts()) EXPECT_LE(d, 0.99f);
  // The unweighted mean Huber loss of the probe set's |TD errors|.
  std::vector<float> errors(pb.size());
  ASSERT_TRUE((*b)->learner().AbsTdErrors(pb, absl::MakeSpan(errors)).ok());
  double expected = 0;
  for (float e : errors) expected += HuberOf(e, buffer.dqn.huber_delta);
  expected /= static_cast<double>(errors.size());
  const absl::StatusOr<std::optional<double>> lb = (*b)->ProbeLoss();
  const absl::StatusOr<std::optional<double>> ll = (*l)->ProbeLoss();
  ASSERT_TRUE(lb.ok() && ll.ok());
  ASSERT_TRUE(lb->has_value() && ll->has_value());
  EXPECT_NEAR(**lb, expected, 1e-9);
  EXPECT_EQ(**lb, **ll);  // same networks (same seed), same probe set
  // Another seed gives other transitions.
  buffer.probe_seed = 78;
  auto other = LearnerLoop::Create(buffer, {&batches, nullptr, nullptr, nullptr, {}, {}});
  ASSERT_TRUE(other.ok());
  EXPECT_NE((*other)->probe_set().observations(), pb.observations());
}

TEST(LearnerLoopTest, ProgressReportsTheProbeLossAndNoneWithoutAProbeSet) {
  for (int size : {0, 64}) {
    FakeBatches batches(10);
    std::vector<ProgressRecord> records;
    LearnerLoopOptions o = SmallOptions(ReplayPlacement::kBuffer);
    o.max_train_steps = 10;
    o.probe_size = size;
    auto loop = LearnerLoop::Create(
        o, {&batches, nullptr, nullptr, nullptr, {}, [&](const ProgressRecord& r) {
              records.push_back(r);
            }});
    ASSERT_TRUE(loop.ok()) << loop.status();
    const std::atomic<bool> stop{false};
    ASSERT_TRUE((*loop)->Run(stop).ok());
    ASSERT_FALSE(records.empty());
    EXPECT_EQ(records.back().probe_loss.has_value(), size > 0);
    if (size > 0) {
      EXPECT_EQ(*records.back().probe_loss, *(*loop)->ProbeLoss().value());
      EXPECT_EQ((*loop)->Summary().probe_loss, records.back().probe_loss);
    }
    // The mean |TD error| of the batches trained on.
    ASSERT_TRUE(records.back().trained_abs_td_error.has_value());
    double sum = 0;
    for (const auto& p : batches.written) {
      for (float e : p) sum += e;
    }
    EXPECT_NEAR(*records.back().trained_abs_td_error, sum / (10.0 * kBatch), 1e-6);
  }
}

TEST(LearnerLoopTest, BufferPlacementSamplesPerInsertIsEntriesTrainedOnOverTheServersIngest) {
  FakeBatches batches(30);
  LearnerLoopOptions o = SmallOptions(ReplayPlacement::kBuffer);
  o.max_train_steps = 30;
  LearnerIo io{&batches, nullptr, nullptr, nullptr, {}, {}};
  int reads = 0;
  // 1000 ingested before the learner started, 120 since.
  io.server_ingested = [&]() -> absl::StatusOr<uint64_t> { return reads++ == 0 ? 1000 : 1120; };
  auto loop = LearnerLoop::Create(o, io);
  ASSERT_TRUE(loop.ok()) << loop.status();
  const std::atomic<bool> stop{false};
  ASSERT_TRUE((*loop)->Run(stop).ok());
  const SummaryRecord s = (*loop)->Summary();
  ASSERT_TRUE(s.samples_per_insert.has_value());
  EXPECT_DOUBLE_EQ(*s.samples_per_insert, 30.0 * kBatch / 120.0);
}

TEST(LearnerLoopTest, OnlyTheLastRecordReadsTheCrossingPercentile) {
  FakeBatches batches(30);
  std::vector<ProgressRecord> records;
  LearnerLoopOptions o = SmallOptions(ReplayPlacement::kBuffer);
  o.max_train_steps = 30;
  LearnerIo io{&batches, nullptr, nullptr,
               nullptr,  {},      [&](const ProgressRecord& r) { records.push_back(r); }};
  int reads = 0;
  io.crossing_percentile = [&]() -> absl::StatusOr<std::optional<double>> {
    ++reads;
    return std::optional<double>(64.0);
  };
  auto loop = LearnerLoop::Create(o, io);
  ASSERT_TRUE(loop.ok()) << loop.status();
  const std::atomic<bool> stop{false};
  ASSERT_TRUE((*loop)->Run(stop).ok());
  EXPECT_EQ(reads, 1);
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records.back().crossing_percentile, std::optional<double>(64.0));
  EXPECT_EQ((*loop)->Summary().crossing_percentile, std::optional<double>(64.0));
}

TEST(LearnerLoopTest, BufferPlacementAgesEveryEntryAndCountsOnlyTheEntriesThatCrossedTheLink) {
  constexpr uint64_t kNow = uint64_t{1'700'000'000} * 1'000'000'000;
  FakeBatches batches(4);
  batches.with_origins = true;
  batches.arrived_insert_ns = kNow - 2'000'000'000;  // 2 s old
  batches.cached_insert_ns = kNow - 10'000'000'000;
  std::vector<ProgressRecord> records;
  LearnerLoopOptions o = SmallOptions(ReplayPlacement::kBuffer);
  o.max_train_steps = 4;
  LearnerIo io{&batches, nullptr, nullptr,
               nullptr,  {},      [&](const ProgressRecord& r) { records.push_back(r); }};
  io.wall_clock_ns = [] { return kNow; };
  auto loop = LearnerLoop::Create(o, io);
  ASSERT_TRUE(loop.ok()) << loop.status();
  const std::atomic<bool> stop{false};
  ASSERT_TRUE((*loop)->Run(stop).ok());
  ASSERT_FALSE(records.empty());
  const ProgressRecord& r = records.back();
  // Ages at training time: half the entries 2 s old, half 10 s (cached).
  EXPECT_DOUBLE_EQ(*r.data_age_mean_s, 6.0);
  EXPECT_DOUBLE_EQ(*r.data_age_p95_s, 10.0);
  EXPECT_EQ(r.transferred, 4u * kBatch / 2);  // the cached half did not cross
  EXPECT_DOUBLE_EQ(*(*loop)->Summary().data_age_mean_s, 6.0);
}

TEST(LearnerLoopTest, LearnerPlacementAgesWhatItTrainsOnAndStripsThePadding) {
  constexpr uint64_t kNow = uint64_t{1'700'000'000} * 1'000'000'000;
  FakeStream stream(300, 40, /*pad=*/500);
  stream.insert_ns = kNow - 3'500'000'000;
  std::vector<ProgressRecord> records;
  LearnerLoopOptions o = SmallOptions(ReplayPlacement::kLearner);
  o.max_train_steps = 20;
  LearnerIo io{nullptr, &stream, nullptr,
               nullptr, {},      [&](const ProgressRecord& r) { records.push_back(r); }};
  io.wall_clock_ns = [] { return kNow; };
  auto loop = LearnerLoop::Create(o, io);
  ASSERT_TRUE(loop.ok()) << loop.status();
  const std::atomic<bool> stop{false};
  ASSERT_TRUE((*loop)->Run(stop).ok());
  EXPECT_EQ((*loop)->learner().train_steps(), 20);
  ASSERT_FALSE(records.empty());
  EXPECT_DOUBLE_EQ(*records.back().data_age_mean_s, 3.5);
  EXPECT_DOUBLE_EQ(*records.back().data_age_p95_s, 3.5);
}

TEST(LearnerLoopTest, LearnerPlacementLimiterHoldsSamplesPerInsertWithinItsErrorBuffer) {
  // Arrivals come slower than the learner can train: the limiter, not the
  // data, decides when it samples.
  FakeStream stream(5000, 4);
  std::vector<ProgressRecord> records;
  LearnerLoopOptions o = SmallOptions(ReplayPlacement::kLearner);
  o.samples_per_insert = 2;
  o.spi_error_buffer = 2 * kBatch;
  o.max_train_steps = 200;
  auto loop =
      LearnerLoop::Create(o, {nullptr, &stream, nullptr, nullptr, {}, [&](const ProgressRecord& r) {
                                records.push_back(r);
                              }});
  ASSERT_TRUE(loop.ok()) << loop.status();
  const std::atomic<bool> stop{false};
  ASSERT_TRUE((*loop)->Run(stop).ok());
  const replay::RateLimiter* limiter = (*loop)->rate_limiter();
  ASSERT_NE(limiter, nullptr);
  EXPECT_EQ(limiter->sampled(), 200u * kBatch);
  EXPECT_EQ(limiter->inserted(), stream.next_sequence);  // every arrival
  const double budget =
      2.0 * (static_cast<double>(limiter->inserted()) - static_cast<double>(o.min_replay_size));
  EXPECT_LE(static_cast<double>(limiter->sampled()), budget + o.spi_error_buffer);
  EXPECT_GE(static_cast<double>(limiter->sampled()), budget - o.spi_error_buffer - kBatch);
  ASSERT_FALSE(records.empty());
  EXPECT_DOUBLE_EQ(*records.back().samples_per_insert, limiter->achieved_samples_per_insert());
}

TEST(LearnerLoopTest, LearnerPlacementRefusesALimitWhoseBufferCannotHoldABatch) {
  LearnerLoopOptions o = SmallOptions(ReplayPlacement::kLearner);
  o.samples_per_insert = 4;
  o.spi_error_buffer = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(o.Validate()));
}

TEST(LearnerLoopTest, RejectsAPlacementWithoutItsSource) {
  EXPECT_TRUE(absl::IsInvalidArgument(
      LearnerLoop::Create(SmallOptions(ReplayPlacement::kBuffer), {}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      LearnerLoop::Create(SmallOptions(ReplayPlacement::kLearner), {}).status()));
}

TEST(LearnerLoopTest, ParsesPlacementNames) {
  EXPECT_EQ(*ParseReplayPlacement("buffer"), ReplayPlacement::kBuffer);
  EXPECT_EQ(*ParseReplayPlacement("learner"), ReplayPlacement::kLearner);
  EXPECT_TRUE(absl::IsInvalidArgument(ParseReplayPlacement("cloud").status()));
}

}  // namespace
}  // namespace dreplay::learner
