// Copyright dreplay authors.
//
// Bad data never ends the learner's run nor reaches its parameters: entries
// that do not decode or cannot be trained on are dropped and counted, and
// parameters that are not finite are not published.

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "gtest/gtest.h"
#include "learner_client/learner_loop.h"
#include "rl/params_format.h"
#include "rl/random.h"
#include "rl/transition.h"

namespace dreplay::learner {
namespace {

constexpr int kObservation = 4;  // CartPole: 4 floats, 2 actions
constexpr int kBatch = 8;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

rl::Transition GoodTransition(rl::Random& random) {
  rl::Transition t;
  for (int i = 0; i < kObservation; ++i) {
    t.observation.push_back(static_cast<float>(random.Uniform(-0.2, 0.2)));
    t.next_observation.push_back(static_cast<float>(random.Uniform(-0.2, 0.2)));
  }
  t.action = static_cast<int32_t>(random.UniformInt(2));
  t.reward = 1.0f;
  t.discount = 0.97f;
  t.steps = 3;
  return t;
}

std::vector<uint8_t> Encode(const rl::Transition& t) {
  std::vector<uint8_t> out(rl::EncodedTransitionSize(kObservation));
  EXPECT_TRUE(rl::EncodeTransition(t, absl::MakeSpan(out)).ok());
  return out;
}

// Entry i of every batch is made bad by `spoil(i, &t)` (returns false to
// leave it good).
class SpoiledBatches : public BatchSource {
 public:
  using Spoil = bool (*)(int, rl::Transition*);
  SpoiledBatches(int batches, Spoil spoil) : remaining(batches), spoil(spoil) {}
  absl::StatusOr<bool> Next(absl::Duration, rl::TransitionBatch* batch, std::vector<float>* weights,
                            std::vector<EntryOrigin>* origins) override {
    if (remaining == 0) return false;
    --remaining;
    batch->Clear();
    weights->clear();
    origins->clear();
    for (int i = 0; i < kBatch; ++i) {
      rl::Transition t = GoodTransition(random);
      spoil(i, &t);
      const absl::Status s = batch->Add(t);
      if (!s.ok()) return s;
      weights->push_back(0.5f);
    }
    return true;
  }
  absl::Status WritePriorities(absl::Span<const float> priorities) override {
    written.emplace_back(priorities.begin(), priorities.end());
    return absl::OkStatus();
  }
  int remaining;
  Spoil spoil;
  rl::Random random{11};
  std::vector<std::vector<float>> written;
};

bool SpoilFirstThree(int i, rl::Transition* t) {
  if (i == 0) t->reward = kNaN;
  if (i == 1) t->action = 2;
  if (i == 2) t->next_observation[3] = std::numeric_limits<float>::infinity();
  return i < 3;
}

class FakeParams : public ParamsSink {
 public:
  absl::Status Publish(absl::Span<const uint8_t> params) override {
    published.emplace_back(params.begin(), params.end());
    return absl::OkStatus();
  }
  std::vector<std::vector<uint8_t>> published;
};

LearnerLoopOptions SmallOptions(ReplayPlacement placement) {
  LearnerLoopOptions o;
  o.placement = placement;
  o.env = "CartPole-v1";
  o.dqn.network.hidden_sizes = {16};
  o.dqn.seed = 3;
  o.memory.capacity = 256;
  o.batch_size = kBatch;
  o.min_replay_size = 16;
  o.probe_size = 0;
  o.eval_interval = absl::InfiniteDuration();
  o.progress_interval = absl::Hours(1);
  o.wait_timeout = absl::Milliseconds(1);
  o.publish_every = 0;
  return o;
}

// The parameters of `loop`'s online network are all finite.
bool ParamsFinite(const LearnerLoop& loop) {
  std::vector<uint8_t> buffer(loop.learner().online().SerializedSize());
  EXPECT_TRUE(loop.learner().online().Serialize(1, absl::MakeSpan(buffer)).ok());
  return rl::CheckParamsFinite(buffer).ok();
}

TEST(LearnerLoopBadDataTest, BufferPlacementTrainsOnTheRestAndGivesDroppedEntriesPriorityZero) {
  SpoiledBatches batches(6, SpoilFirstThree);
  LearnerLoopOptions o = SmallOptions(ReplayPlacement::kBuffer);
  o.max_train_steps = 6;
  LearnerIo io{&batches, nullptr, nullptr, nullptr, {}, {}};
  std::optional<ProgressRecord> last;
  io.on_progress = [&last](const ProgressRecord& r) { last = r; };
  auto loop = LearnerLoop::Create(o, io);
  ASSERT_TRUE(loop.ok()) << loop.status();
  const std::atomic<bool> stop{false};
  ASSERT_TRUE((*loop)->Run(stop).ok());
  EXPECT_EQ((*loop)->learner().train_steps(), 6);
  ASSERT_EQ(batches.written.size(), 6u);
  for (const std::vector<float>& priorities : batches.written) {
    ASSERT_EQ(priorities.size(), static_cast<size_t>(kBatch));
    for (int i = 0; i < 3; ++i) EXPECT_EQ(priorities[i], 0.0f) << i;
    for (int i = 3; i < kBatch; ++i) EXPECT_TRUE(std::isfinite(priorities[i])) << i;
  }
  EXPECT_TRUE(ParamsFinite(**loop));
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->transitions_dropped, 6u * 3u);
}

TEST(LearnerLoopBadDataTest, ABatchWithNothingTrainableIsAnsweredAndTheRunGoesOn) {
  SpoiledBatches bad(2, [](int, rl::Transition* t) {
    t->reward = kNaN;
    return true;
  });
  LearnerLoopOptions o = SmallOptions(ReplayPlacement::kBuffer);
  o.max_train_steps = 1;
  // Two batches with nothing to train on, then good ones.
  class Then : public BatchSource {
   public:
    explicit Then(SpoiledBatches* first) : first_(first) {}
    absl::StatusOr<bool> Next(absl::Duration timeout, rl::TransitionBatch* batch,
                              std::vector<float>* weights,
                              std::vector<EntryOrigin>* origins) override {
      if (first_->remaining > 0) return first_->Next(timeout, batch, weights, origins);
      return good_.Next(timeout, batch, weights, origins);
    }
    absl::Status WritePriorities(absl::Span<const float> priorities) override {
      written.emplace_back(priorities.begin(), priorities.end());
      return absl::OkStatus();
    }
    SpoiledBatches* first_;
    SpoiledBatches good_{100, [](int, rl::Transition*) { return false; }};
    std::vector<std::vector<float>> written;
  } batches(&bad);
  auto loop = LearnerLoop::Create(o, {&batches, nullptr, nullptr, nullptr, {}, {}});
  ASSERT_TRUE(loop.ok()) << loop.status();
  const std::atomic<bool> stop{false};
  ASSERT_TRUE((*loop)->Run(stop).ok());
  EXPECT_EQ((*loop)->learner().train_steps(), 1);
  ASSERT_EQ(batches.written.size(), 3u);
  EXPECT_EQ(batches.written[0], std::vector<float>(kBatch, 0.0f));
  EXPECT_EQ(batches.written[1], std::vector<float>(kBatch, 0.0f));
  EXPECT_TRUE(ParamsFinite(**loop));
}

// Forwards `good` valid transitions, after each one a bad one of three kinds
// in turn (too short, NaN reward, action past the network's outputs).
class MixedStream : public TransitionStream {
 public:
  explicit MixedStream(int good) : remaining(good) {}
  absl::Status Next(absl::Duration, std::vector<ForwardedItem>* out) override {
    out->clear();
    payloads.clear();
    for (int k = 0; k < 8 && remaining > 0; ++k, --remaining) {
      payloads.push_back(Encode(GoodTransition(random)));
      rl::Transition bad = GoodTransition(random);
      switch (next_sequence % 3) {
        case 0:
          payloads.push_back(std::vector<uint8_t>(12, 0));
          break;
        case 1:
          bad.reward = kNaN;
          payloads.push_back(Encode(bad));
          break;
        default:
          bad.action = 5;
          payloads.push_back(Encode(bad));
      }
    }
    for (const std::vector<uint8_t>& payload : payloads) {
      ForwardedItem item;
      item.sequence = next_sequence++;
      item.initial_priority = 1.0f;
      item.payload = payload;
      out->push_back(item);
    }
    return absl::OkStatus();
  }
  int remaining;
  uint64_t next_sequence = 0;
  std::vector<std::vector<uint8_t>> payloads;
  rl::Random random{12};
};

TEST(LearnerLoopBadDataTest, LearnerPlacementStoresOnlyTrainableArrivalsAndKeepsTraining) {
  MixedStream stream(40);
  LearnerLoopOptions o = SmallOptions(ReplayPlacement::kLearner);
  o.max_train_steps = 3;
  LearnerIo io{nullptr, &stream, nullptr, nullptr, {}, {}};
  std::optional<ProgressRecord> last;
  io.on_progress = [&last](const ProgressRecord& r) { last = r; };
  auto loop = LearnerLoop::Create(o, io);
  ASSERT_TRUE(loop.ok()) << loop.status();
  const std::atomic<bool> stop{false};
  ASSERT_TRUE((*loop)->Run(stop).ok());
  EXPECT_EQ((*loop)->learner().train_steps(), 3);
  EXPECT_EQ((*loop)->local_replay_size(), 40u - static_cast<uint64_t>(stream.remaining));
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->transitions_dropped, (*loop)->local_replay_size());
  EXPECT_TRUE(ParamsFinite(**loop));
}

TEST(LearnerLoopBadDataTest, ParametersThatAreNotFiniteAreNotPublished) {
  // Finite but enormous rewards and steps overflow the network within a few
  // train steps.
  SpoiledBatches batches(50, [](int, rl::Transition* t) {
    t->reward = 1e30f;
    return false;
  });
  FakeParams params;
  LearnerLoopOptions o = SmallOptions(ReplayPlacement::kBuffer);
  o.dqn.learning_rate = 1e20;
  o.dqn.max_gradient_norm = 0;
  o.publish_every = 1;
  o.max_train_steps = 50;
  LearnerIo io{&batches, nullptr, &params, nullptr, {}, {}};
  std::optional<ProgressRecord> last;
  io.on_progress = [&last](const ProgressRecord& r) { last = r; };
  auto loop = LearnerLoop::Create(o, io);
  ASSERT_TRUE(loop.ok()) << loop.status();
  const std::atomic<bool> stop{false};
  ASSERT_TRUE((*loop)->Run(stop).ok());
  ASSERT_FALSE(ParamsFinite(**loop)) << "the test needs a network that diverged";
  ASSERT_FALSE(params.published.empty());
  for (const std::vector<uint8_t>& published : params.published) {
    EXPECT_TRUE(rl::CheckParamsFinite(published).ok());
  }
  ASSERT_TRUE(last.has_value());
  EXPECT_GT(last->params_withheld, 0u);
  EXPECT_EQ(params.published.size() + last->params_withheld, 51u);  // the first, then one a step
}

TEST(LearnerLoopBadDataTest, WrittenPrioritiesAreClampedToMaxPriority) {
  SpoiledBatches batches(4, [](int, rl::Transition* t) {
    t->reward = 50.0f;  // |TD errors| far above the bound
    return false;
  });
  LearnerLoopOptions o = SmallOptions(ReplayPlacement::kBuffer);
  o.max_train_steps = 4;
  o.max_priority = 2.0f;
  auto loop = LearnerLoop::Create(o, {&batches, nullptr, nullptr, nullptr, {}, {}});
  ASSERT_TRUE(loop.ok()) << loop.status();
  const std::atomic<bool> stop{false};
  ASSERT_TRUE((*loop)->Run(stop).ok());
  ASSERT_EQ(batches.written.size(), 4u);
  for (const std::vector<float>& priorities : batches.written) {
    for (float p : priorities) EXPECT_EQ(p, 2.0f);
  }
}

TEST(LearnerLoopBadDataTest, RefusesAMaxPriorityThatIsNotFiniteAndPositive) {
  LearnerLoopOptions o = SmallOptions(ReplayPlacement::kBuffer);
  for (float bad : {0.0f, -1.0f, std::numeric_limits<float>::infinity(), kNaN}) {
    o.max_priority = bad;
    EXPECT_TRUE(absl::IsInvalidArgument(o.Validate())) << bad;
  }
}

}  // namespace
}  // namespace dreplay::learner
