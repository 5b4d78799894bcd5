// Copyright dreplay authors.

#include "actor_client/actor_loop.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "rl/dqn.h"
#include "rl/policy.h"
#include "rl/transition.h"

#include "protocol/frame_record.h"
#include "rl/frame_stacks.h"

namespace dreplay::actor {
namespace {

constexpr int kCartPoleObservation = 4;

class FakeSink : public ExperienceSink {
 public:
  absl::Status Append(absl::Span<const uint8_t> payload, float priority) override {
    payloads.emplace_back(payload.begin(), payload.end());
    priorities.push_back(priority);
    ++pending;
    return absl::OkStatus();
  }
  absl::Status Flush() override {
    ++flushes;
    flushed_sizes.push_back(pending);
    committed_ += pending;
    pending = 0;
    return absl::OkStatus();
  }
  uint64_t committed() const override { return committed_; }

  std::vector<std::vector<uint8_t>> payloads;
  std::vector<float> priorities;
  std::vector<int> flushed_sizes;
  int pending = 0;
  int flushes = 0;
  uint64_t committed_ = 0;
};

// Hands out `params` (once) as version 1.
class FakeParams : public ParamsSource {
 public:
  absl::StatusOr<bool> Refresh(rl::QNetwork* network) override {
    ++calls;
    if (version_ == 1 || params.empty()) return false;
    const absl::Status status = network->SetParameters(params);
    if (!status.ok()) return status;
    version_ = 1;
    return true;
  }
  uint64_t version() const override { return version_; }

  std::vector<float> params;
  int calls = 0;
  uint64_t version_ = 0;
};

class FakeStats : public EpisodeStatsSink {
 public:
  void RecordSteps(uint64_t n) override { steps += n; }
  void RecordEpisode(double r) override { returns.push_back(r); }
  absl::Status Publish(uint64_t transitions) override {
    ++publishes;
    last_transitions = transitions;
    return absl::OkStatus();
  }
  uint64_t steps = 0;
  std::vector<double> returns;
  int publishes = 0;
  uint64_t last_transitions = 0;
};

ActorLoopOptions SmallOptions() {
  ActorLoopOptions o;
  o.env = "CartPole-v1";
  o.num_envs = 2;
  o.actor_index = 0;
  o.num_actors = 1;
  o.hidden_sizes = {16};
  o.seed = 7;
  o.network_seed = 3;
  o.flush_batch = 8;
  o.param_refresh_steps = 10;
  return o;
}

TEST(ActorLoopTest, EpsilonsFollowTheApeXLadderOverAllEnvironmentsOfAllActors) {
  FakeSink sink;
  ActorLoopOptions o = SmallOptions();
  o.num_actors = 3;
  o.actor_index = 1;
  o.num_envs = 2;
  auto loop = ActorLoop::Create(o, {&sink, nullptr, nullptr});
  ASSERT_TRUE(loop.ok()) << loop.status();
  ASSERT_EQ((*loop)->epsilons().size(), 2u);
  EXPECT_DOUBLE_EQ((*loop)->epsilons()[0], rl::ApeXEpsilon(2, 6));
  EXPECT_DOUBLE_EQ((*loop)->epsilons()[1], rl::ApeXEpsilon(3, 6));
}

TEST(ActorLoopTest, OneActorWithOneEnvironmentUsesTheBaseEpsilon) {
  FakeSink sink;
  ActorLoopOptions o = SmallOptions();
  o.num_envs = 1;
  auto loop = ActorLoop::Create(o, {&sink, nullptr, nullptr});
  ASSERT_TRUE(loop.ok()) << loop.status();
  EXPECT_DOUBLE_EQ((*loop)->epsilons()[0], 0.4);
}

TEST(ActorLoopTest, AppendsDecodableTransitionsWithTheirTdErrorsAsPriorities) {
  FakeSink sink;
  auto loop = ActorLoop::Create(SmallOptions(), {&sink, nullptr, nullptr});
  ASSERT_TRUE(loop.ok()) << loop.status();
  for (int i = 0; i < 200; ++i) ASSERT_TRUE((*loop)->Step().ok());
  ASSERT_GE(sink.payloads.size(), 100u);
  rl::TransitionBatch batch(kCartPoleObservation);
  for (const auto& payload : sink.payloads) {
    ASSERT_TRUE(batch.AddEncoded(payload).ok());
  }
  std::vector<float> expected(batch.size());
  const rl::QNetwork& net = (*loop)->network();
  ASSERT_TRUE(rl::ComputeAbsTdErrors(net, net, batch, true, absl::MakeSpan(expected)).ok());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_FLOAT_EQ(sink.priorities[i], expected[i]) << "transition " << i;
    EXPECT_GT(sink.priorities[i], 0.0f);
  }
  EXPECT_EQ((*loop)->stats().transitions, sink.payloads.size());
}

// The records a frames-stored-once loop appends hold, byte for byte, the
// transitions the same loop appends without it, with the same priorities.
TEST(ActorLoopTest, FrameRecordsCarryTheSameTransitionsAndPriorities) {
  ActorLoopOptions o = SmallOptions();
  o.env = "MinAtar/Breakout";
  o.observation = rl::ObservationMode::kPixels84;
  o.flush_batch = 4;
  FakeSink plain_sink, frames_sink;
  auto plain = ActorLoop::Create(o, {&plain_sink, nullptr, nullptr});
  ASSERT_TRUE(plain.ok()) << plain.status();
  o.frame_stack = 4;
  auto frames = ActorLoop::Create(o, {&frames_sink, nullptr, nullptr});
  ASSERT_TRUE(frames.ok()) << frames.status();
  for (int i = 0; i < 60; ++i) {
    ASSERT_TRUE((*plain)->Step().ok());
    ASSERT_TRUE((*frames)->Step().ok());
  }
  ASSERT_GE((*plain)->stats().episodes, 1u) << "the run must cross an episode boundary";
  const size_t frame_bytes = 84 * 84;
  const size_t stack = 4 * frame_bytes;
  std::vector<uint8_t> observation(stack), next(stack);
  auto lookup = [&](uint64_t q) -> absl::Span<const uint8_t> {
    if (q >= frames_sink.payloads.size()) return {};
    return frames_sink.payloads[q];
  };
  size_t t = 0;
  for (uint64_t q = 0; q < frames_sink.payloads.size(); ++q) {
    protocol::FrameRecordView view;
    ASSERT_TRUE(protocol::DecodeFrameRecord(frames_sink.payloads[q], frame_bytes, &view).ok());
    if (!view.has_transition()) continue;
    ASSERT_LT(t, plain_sink.payloads.size());
    auto stacked = rl::AssembleStacks(q, frame_bytes, lookup, absl::MakeSpan(observation),
                                      absl::MakeSpan(next));
    ASSERT_TRUE(stacked.ok()) << stacked.status();
    auto expected =
        rl::DecodeTransition(plain_sink.payloads[t], stack, rl::ObservationType::kUint8);
    ASSERT_TRUE(expected.ok()) << expected.status();
    EXPECT_EQ(std::vector<float>(observation.begin(), observation.end()), expected->observation)
        << "transition " << t;
    EXPECT_EQ(std::vector<float>(next.begin(), next.end()), expected->next_observation);
    EXPECT_EQ(stacked->action, expected->action);
    EXPECT_FLOAT_EQ(stacked->reward, expected->reward);
    EXPECT_FLOAT_EQ(stacked->discount, expected->discount);
    EXPECT_EQ(stacked->done, expected->done);
    EXPECT_FLOAT_EQ(frames_sink.priorities[q], plain_sink.priorities[t]);
    ++t;
  }
  EXPECT_EQ(t, plain_sink.payloads.size());
  EXPECT_EQ((*frames)->stats().transitions, t);
  EXPECT_EQ((*frames)->stats().records, frames_sink.payloads.size());
  // About one frame per step, not two stacks.
  EXPECT_LT(frames_sink.payloads.size() * (frame_bytes + 64), t * 2 * stack / 4);
}

TEST(ActorLoopTest, RefusesAFrameStackTheObservationDoesNotHave) {
  FakeSink sink;
  ActorLoopOptions o = SmallOptions();
  o.frame_stack = 4;  // CartPole observes no frames
  auto loop = ActorLoop::Create(o, {&sink, nullptr, nullptr});
  ASSERT_FALSE(loop.ok());
  EXPECT_NE(loop.status().message().find("frame_stack=4"), std::string::npos) << loop.status();
}

TEST(ActorLoopTest, InitialPrioritiesAreClampedToMaxPriority) {
  FakeSink unclamped, clamped;
  ActorLoopOptions o = SmallOptions();
  auto loop_a = ActorLoop::Create(o, {&unclamped, nullptr, nullptr});
  // Between the smallest and the largest of what the network gives.
  ASSERT_TRUE(loop_a.ok()) << loop_a.status();
  for (int i = 0; i < 200; ++i) ASSERT_TRUE((*loop_a)->Step().ok());
  ASSERT_FALSE(unclamped.priorities.empty());
  std::vector<float> sorted = unclamped.priorities;
  std::sort(sorted.begin(), sorted.end());
  const float median = sorted[sorted.size() / 2];
  ASSERT_LT(median, sorted.back());
  o.max_priority = median;
  auto loop_b = ActorLoop::Create(o, {&clamped, nullptr, nullptr});
  ASSERT_TRUE(loop_b.ok()) << loop_b.status();
  for (int i = 0; i < 200; ++i) ASSERT_TRUE((*loop_b)->Step().ok());
  ASSERT_EQ(clamped.priorities.size(), unclamped.priorities.size());
  for (size_t i = 0; i < clamped.priorities.size(); ++i) {
    EXPECT_EQ(clamped.priorities[i], std::min(unclamped.priorities[i], median)) << i;
  }
}

TEST(ActorLoopTest, RefusesAMaxPriorityThatIsNotFiniteAndPositive) {
  ActorLoopOptions o = SmallOptions();
  for (float bad : {0.0f, -1.0f, std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
    o.max_priority = bad;
    EXPECT_TRUE(absl::IsInvalidArgument(o.Validate())) << bad;
  }
}

TEST(ActorLoopTest, PadsEveryPayloadWithZerosAfterItsEncoding) {
  FakeSink sink;
  ActorLoopOptions o = SmallOptions();
  o.payload_pad_bytes = 300;
  auto loop = ActorLoop::Create(o, {&sink, nullptr, nullptr});
  ASSERT_TRUE(loop.ok()) << loop.status();
  for (int i = 0; i < 100; ++i) ASSERT_TRUE((*loop)->Step().ok());
  ASSERT_FALSE(sink.payloads.empty());
  const size_t encoded = rl::EncodedTransitionSize(kCartPoleObservation);
  rl::TransitionBatch batch(kCartPoleObservation);
  for (const auto& payload : sink.payloads) {
    ASSERT_EQ(payload.size(), encoded + 300);
    EXPECT_TRUE(
        std::all_of(payload.begin() + encoded, payload.end(), [](uint8_t b) { return b == 0; }));
    absl::StatusOr<absl::Span<const uint8_t>> prefix = rl::EncodedTransitionPrefix(payload);
    ASSERT_TRUE(prefix.ok()) << prefix.status();
    EXPECT_TRUE(batch.AddEncoded(*prefix).ok());
  }
}

TEST(ActorLoopTest, RefusesPaddingAboveTheLimit) {
  ActorLoopOptions o = SmallOptions();
  o.payload_pad_bytes = kMaxPayloadPadBytes + 1;
  EXPECT_FALSE(o.Validate().ok());
}

TEST(ActorLoopTest, FlushesOnceAFullBatchIsPending) {
  FakeSink sink;
  auto loop = ActorLoop::Create(SmallOptions(), {&sink, nullptr, nullptr});
  ASSERT_TRUE(loop.ok()) << loop.status();
  for (int i = 0; i < 100; ++i) ASSERT_TRUE((*loop)->Step().ok());
  ASSERT_GT(sink.flushes, 0);
  // A flush happens at the first step that brings the pending count to at
  // least flush_batch; one step of two environments adds at most 2 * n.
  for (int size : sink.flushed_sizes) {
    EXPECT_GE(size, 8);
    EXPECT_LE(size, 8 + 2 * 3);
  }
}

TEST(ActorLoopTest, CountsStepsEpisodesAndTheirReturns) {
  FakeSink sink;
  FakeStats stats;
  auto loop = ActorLoop::Create(SmallOptions(), {&sink, nullptr, &stats});
  ASSERT_TRUE(loop.ok()) << loop.status();
  for (int i = 0; i < 300; ++i) ASSERT_TRUE((*loop)->Step().ok());
  EXPECT_EQ((*loop)->stats().env_steps, 600u);
  EXPECT_EQ(stats.steps, 600u);
  EXPECT_EQ(stats.returns.size(), (*loop)->stats().episodes);
  ASSERT_GT(stats.returns.size(), 0u);
  double sum = 0;
  for (double r : stats.returns) {
    EXPECT_GE(r, 1.0);
    EXPECT_LE(r, 500.0);
    sum += r;
  }
  // CartPole pays 1 per step: finished episodes cannot exceed the steps.
  EXPECT_LE(sum, 600.0);
  ASSERT_TRUE((*loop)->Finish().ok());
  EXPECT_EQ(stats.publishes, 1);
  EXPECT_EQ(stats.last_transitions, sink.committed());
}

TEST(ActorLoopTest, RefreshesParametersEveryRefreshPeriodAndActsWithThem) {
  FakeSink sink;
  FakeParams params;
  auto loop = ActorLoop::Create(SmallOptions(), {&sink, &params, nullptr});
  ASSERT_TRUE(loop.ok()) << loop.status();
  params.params.assign((*loop)->network().parameter_count(), 0.0f);
  // 2 environments: 10 steps each refresh period = 5 calls of Step().
  for (int i = 0; i < 50; ++i) ASSERT_TRUE((*loop)->Step().ok());
  EXPECT_EQ(params.calls, 10);
  EXPECT_EQ((*loop)->stats().param_refreshes, 1u);
  for (float v : (*loop)->network().GetParameters()) EXPECT_EQ(v, 0.0f);
}

TEST(ActorLoopTest, SameSeedsGiveTheSameTransitions) {
  FakeSink a, b;
  auto loop_a = ActorLoop::Create(SmallOptions(), {&a, nullptr, nullptr});
  auto loop_b = ActorLoop::Create(SmallOptions(), {&b, nullptr, nullptr});
  ASSERT_TRUE(loop_a.ok() && loop_b.ok());
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE((*loop_a)->Step().ok());
    ASSERT_TRUE((*loop_b)->Step().ok());
  }
  EXPECT_EQ(a.payloads, b.payloads);
  EXPECT_EQ(a.priorities, b.priorities);
}

TEST(ActorLoopTest, RunStopsAfterMaxEnvStepsAndFlushesWhatIsPending) {
  FakeSink sink;
  FakeStats stats;
  ActorLoopOptions o = SmallOptions();
  o.max_env_steps = 101;  // rounded up to whole steps of both environments
  auto loop = ActorLoop::Create(o, {&sink, nullptr, &stats});
  ASSERT_TRUE(loop.ok()) << loop.status();
  const std::atomic<bool> stop{false};
  ASSERT_TRUE((*loop)->Run(stop).ok());
  EXPECT_EQ((*loop)->stats().env_steps, 102u);
  EXPECT_EQ(sink.pending, 0);
  EXPECT_EQ(sink.committed(), (*loop)->stats().transitions);
  EXPECT_GE(stats.publishes, 2);  // at the start and at the end
}

TEST(ActorLoopTest, RunReturnsAtOnceWhenStopIsSet) {
  FakeSink sink;
  auto loop = ActorLoop::Create(SmallOptions(), {&sink, nullptr, nullptr});
  ASSERT_TRUE(loop.ok()) << loop.status();
  const std::atomic<bool> stop{true};
  ASSERT_TRUE((*loop)->Run(stop).ok());
  EXPECT_EQ((*loop)->stats().env_steps, 0u);
}

TEST(ActorLoopTest, RunKeepsToTheStepRateCap) {
  FakeSink sink;
  ActorLoopOptions o = SmallOptions();
  o.max_env_steps = 100;      // 50 steps of 2 environments
  o.max_steps_per_s = 500.0;  // 250 steps of the pair per second: >= 0.196 s
  auto loop = ActorLoop::Create(o, {&sink, nullptr, nullptr});
  ASSERT_TRUE(loop.ok()) << loop.status();
  const std::atomic<bool> stop{false};
  const absl::Time start = absl::Now();
  ASSERT_TRUE((*loop)->Run(stop).ok());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(190));
}

TEST(ActorLoopTest, RejectsBadOptionsNamingTheValue) {
  FakeSink sink;
  ActorLoopOptions o = SmallOptions();
  o.actor_index = 1;
  absl::Status s = ActorLoop::Create(o, {&sink, nullptr, nullptr}).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("actor_index=1"), absl::string_view::npos) << s;

  o = SmallOptions();
  o.env = "Pong-v5";
  s = ActorLoop::Create(o, {&sink, nullptr, nullptr}).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("Pong-v5"), absl::string_view::npos) << s;

  EXPECT_TRUE(absl::IsInvalidArgument(
      ActorLoop::Create(SmallOptions(), {nullptr, nullptr, nullptr}).status()));
}

}  // namespace
}  // namespace dreplay::actor
