// Copyright dreplay authors.

#include "rl/frame_recorder.h"

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "protocol/frame_record.h"
#include "rl/frame_stacks.h"
#include "rl/make_environment.h"
#include "rl/minatar/render.h"
#include "rl/nstep.h"
#include "rl/transition.h"

namespace dreplay::rl {
namespace {

using protocol::FrameRecordView;
using Records = std::vector<FrameRecorder::Record>;

FrameRecordView DecodeRecord(const FrameRecorder::Record& r, size_t frame_bytes) {
  FrameRecordView view;
  const absl::Status s = protocol::DecodeFrameRecord(r.bytes, frame_bytes, &view);
  EXPECT_TRUE(s.ok()) << s;
  return view;
}

std::vector<uint16_t> Refs(const uint16_t* refs, int depth) {
  return std::vector<uint16_t>(refs, refs + depth);
}

TEST(FrameRecorderTest, OneEpisodeGivesTheHandWorkedRecords) {
  FrameRecorder recorder({{/*n=*/2, /*discount=*/0.5}, /*depth=*/3, /*frame_bytes=*/2});
  Records out;
  const uint8_t f[4][2] = {{0, 0}, {1, 1}, {2, 2}, {3, 3}};
  ASSERT_TRUE(recorder.BeginEpisode(0, f[0], &out).ok());
  ASSERT_TRUE(recorder.AddStep(0, 1, 1.0, f[1], false, false, &out).ok());
  ASSERT_TRUE(recorder.AddStep(0, 2, 2.0, f[2], false, false, &out).ok());
  ASSERT_TRUE(recorder.AddStep(0, 0, 4.0, f[3], /*terminated=*/true, false, &out).ok());
  ASSERT_EQ(out.size(), 5u);
  for (uint64_t q = 0; q < out.size(); ++q) EXPECT_EQ(out[q].sequence, q);
  EXPECT_EQ(recorder.next_sequence(), 5u);

  const FrameRecordView start = DecodeRecord(out[0], 2);
  EXPECT_TRUE(start.episode_start() && start.has_frame() && !start.has_transition());
  const FrameRecordView waiting = DecodeRecord(out[1], 2);
  EXPECT_TRUE(waiting.has_frame() && !waiting.has_transition() && !waiting.episode_start());

  // Step 0's transition completes with frame 2: 1 + 0.5 * 2.
  const FrameRecordView t0 = DecodeRecord(out[2], 2);
  EXPECT_TRUE(t0.has_frame() && t0.has_transition());
  EXPECT_EQ(t0.header.action, 1);
  EXPECT_EQ(t0.header.reward, 2.0f);
  EXPECT_EQ(t0.header.discount, 0.25f);
  EXPECT_EQ(t0.header.steps, 2);
  EXPECT_EQ(t0.header.done, 0);
  EXPECT_EQ(Refs(t0.observation_refs, 3), (std::vector<uint16_t>{2, 2, 2}));
  EXPECT_EQ(Refs(t0.next_refs, 3), (std::vector<uint16_t>{2, 1, 0}));

  // The end completes steps 1 and 2: one with the last frame, one without.
  const FrameRecordView t1 = DecodeRecord(out[3], 2);
  EXPECT_TRUE(t1.has_frame());
  EXPECT_EQ(t1.header.reward, 4.0f);  // 2 + 0.5 * 4
  EXPECT_EQ(t1.header.done, 1);
  EXPECT_EQ(Refs(t1.observation_refs, 3), (std::vector<uint16_t>{3, 3, 2}));
  EXPECT_EQ(Refs(t1.next_refs, 3), (std::vector<uint16_t>{2, 1, 0}));
  const FrameRecordView t2 = DecodeRecord(out[4], 2);
  EXPECT_FALSE(t2.has_frame());
  EXPECT_EQ(t2.header.action, 0);
  EXPECT_EQ(t2.header.reward, 4.0f);
  EXPECT_EQ(t2.header.discount, 0.5f);
  EXPECT_EQ(t2.header.steps, 1);
  EXPECT_EQ(Refs(t2.observation_refs, 3), (std::vector<uint16_t>{4, 3, 2}));
  EXPECT_EQ(Refs(t2.next_refs, 3), (std::vector<uint16_t>{3, 2, 1}));
  EXPECT_EQ(recorder.longest_reference(), 4u);
}

// Checks each transition the reference accumulator emits against the one
// assembled from the records, field by field and byte by byte.
class Checker {
 public:
  Checker(size_t frame_bytes, int depth) : frame_bytes_(frame_bytes), depth_(depth) {}

  void Append(const Records& records) {
    for (const FrameRecorder::Record& r : records) {
      ASSERT_EQ(r.sequence, store_.size());
      store_.push_back(r.bytes);
    }
  }

  // `records` were just appended; `expected` are the reference's new transitions.
  void Compare(const Records& records, const std::vector<Transition>& expected) {
    std::vector<uint64_t> with_transition;
    for (const FrameRecorder::Record& r : records) {
      FrameRecordView view;
      ASSERT_TRUE(protocol::DecodeFrameRecord(r.bytes, frame_bytes_, &view).ok());
      if (view.has_transition()) with_transition.push_back(r.sequence);
    }
    ASSERT_EQ(with_transition.size(), expected.size());
    std::vector<uint8_t> obs(depth_ * frame_bytes_), next(depth_ * frame_bytes_);
    for (size_t i = 0; i < expected.size(); ++i) {
      absl::StatusOr<StackedTransition> t = AssembleStacks(
          with_transition[i], frame_bytes_, Lookup(), absl::MakeSpan(obs), absl::MakeSpan(next));
      ASSERT_TRUE(t.ok()) << t.status();
      const Transition& e = expected[i];
      EXPECT_EQ(t->action, e.action);
      EXPECT_EQ(t->reward, e.reward);
      EXPECT_EQ(t->discount, e.discount);
      EXPECT_EQ(t->done, e.done);
      EXPECT_EQ(t->steps, e.steps);
      ASSERT_EQ(std::vector<float>(obs.begin(), obs.end()), e.observation);
      ASSERT_EQ(std::vector<float>(next.begin(), next.end()), e.next_observation);
      ++compared_;
    }
  }

  // Records older than `ring` behind the newest are not held.
  std::function<absl::Span<const uint8_t>(uint64_t)> Lookup(uint64_t ring = UINT64_MAX) const {
    return [this, ring](uint64_t q) -> absl::Span<const uint8_t> {
      if (q >= store_.size() || store_.size() - q > ring) return {};
      return store_[q];
    };
  }

  size_t compared() const { return compared_; }
  size_t records() const { return store_.size(); }

 private:
  const size_t frame_bytes_;
  const int depth_;
  std::vector<std::vector<uint8_t>> store_;
  size_t compared_ = 0;
};

std::vector<float> AsFloats(absl::Span<const uint8_t> bytes) {
  return std::vector<float>(bytes.begin(), bytes.end());
}

struct Mix {
  int n;
  int depth;
  int environments;
  uint32_t seed;
};

// Random frames, random episode ends (terminated or truncated), the
// environments stepped in a random order; the reference stacks frames
// itself (FrameStack) and accumulates n-step transitions (NStepAccumulator).
void RunMix(const Mix& mix, Checker& checker, FrameRecorder& recorder, int steps) {
  constexpr size_t kFrameBytes = 16;
  std::mt19937 random(mix.seed);
  const NStepOptions nstep{mix.n, 0.9};
  std::vector<minatar::FrameStack> stacks(mix.environments,
                                          minatar::FrameStack(mix.depth, kFrameBytes));
  std::vector<NStepAccumulator> reference(mix.environments,
                                          NStepAccumulator(nstep, mix.depth * kFrameBytes));
  std::vector<uint8_t> frame(kFrameBytes);
  const auto draw_frame = [&] {
    for (uint8_t& b : frame) b = static_cast<uint8_t>(random());
  };
  for (int e = 0; e < mix.environments; ++e) {
    draw_frame();
    stacks[e].Reset(frame);
    ASSERT_TRUE(reference[e].BeginEpisode(AsFloats(stacks[e].frames())).ok());
    Records records;
    ASSERT_TRUE(recorder.BeginEpisode(e, frame, &records).ok());
    checker.Append(records);
  }
  for (int step = 0; step < steps; ++step) {
    const int e = static_cast<int>(random() % mix.environments);
    const int action = static_cast<int>(random() % 6);
    const double reward = static_cast<double>(random() % 200) / 8.0 - 10.0;
    const uint32_t end = random() % 100;
    const bool terminated = end < 4, truncated = end >= 4 && end < 7;
    draw_frame();
    stacks[e].Push(frame);
    std::vector<Transition> expected;
    ASSERT_TRUE(
        reference[e]
            .AddStep(action, reward, AsFloats(stacks[e].frames()), terminated, truncated, &expected)
            .ok());
    Records records;
    ASSERT_TRUE(recorder.AddStep(e, action, reward, frame, terminated, truncated, &records).ok());
    checker.Append(records);
    checker.Compare(records, expected);
    if (terminated || truncated) {
      draw_frame();
      stacks[e].Reset(frame);
      ASSERT_TRUE(reference[e].BeginEpisode(AsFloats(stacks[e].frames())).ok());
      Records begin;
      ASSERT_TRUE(recorder.BeginEpisode(e, frame, &begin).ok());
      checker.Append(begin);
    }
  }
}

TEST(FrameRecorderTest, StacksMatchTheActorsOwnAcrossEnvironmentsAndEpisodeEnds) {
  for (const Mix& mix : {Mix{1, 1, 1, 1}, Mix{3, 4, 1, 2}, Mix{3, 4, 3, 3}, Mix{5, 4, 4, 4},
                         Mix{1, 4, 2, 5}, Mix{2, 2, 3, 6}}) {
    SCOPED_TRACE(testing::Message() << "n " << mix.n << ", depth " << mix.depth << ", "
                                    << mix.environments << " environments");
    Checker checker(16, mix.depth);
    FrameRecorder recorder({{mix.n, 0.9}, mix.depth, 16, mix.environments});
    RunMix(mix, checker, recorder, 3000);
    EXPECT_GT(checker.compared(), 2000u);
  }
}

TEST(FrameRecorderTest, ATransitionIsNotFoundOnceARecordItNeedsIsOverwritten) {
  const Mix mix{3, 4, 3, 7};
  Checker checker(16, mix.depth);
  FrameRecorder recorder({{mix.n, 0.9}, mix.depth, 16, mix.environments});
  RunMix(mix, checker, recorder, 2000);
  constexpr uint64_t kRing = 500;  // a lease of 500 slots, wrapped
  const uint64_t newest = checker.records() - 1;
  int found = 0, lost = 0;
  std::vector<uint8_t> obs(4 * 16), next(4 * 16);
  for (uint64_t q = newest + 1 - kRing; q <= newest; ++q) {
    FrameRecordView view;
    const absl::Span<const uint8_t> bytes = checker.Lookup(kRing)(q);
    ASSERT_FALSE(bytes.empty());
    ASSERT_TRUE(protocol::DecodeFrameRecord(bytes, 16, &view).ok());
    if (!view.has_transition()) continue;
    bool held = true;
    for (uint64_t s : protocol::FrameRecordSequences(view, q)) held = held && newest - s < kRing;
    absl::StatusOr<StackedTransition> t =
        AssembleStacks(q, 16, checker.Lookup(kRing), absl::MakeSpan(obs), absl::MakeSpan(next));
    if (held) {
      EXPECT_TRUE(t.ok()) << q << ": " << t.status();
      ++found;
    } else {
      EXPECT_TRUE(absl::IsNotFound(t.status())) << q << ": " << t.status();
      ++lost;
    }
  }
  EXPECT_GT(found, 300);
  EXPECT_GT(lost, 0);  // the ring's oldest transitions refer past its tail
  EXPECT_LE(lost, static_cast<int>(recorder.longest_reference()));
}

// The stacks MinAtar's pixels84 environments build themselves, two games
// interleaved, through their episodes' ends.
TEST(FrameRecorderTest, MinAtarPixelStacksArriveByteForByte) {
  constexpr size_t kFrame = minatar::kPixels84Size;
  constexpr int kDepth = minatar::kFrameStackDepth;
  const char* games[] = {"MinAtar/Breakout", "MinAtar/SpaceInvaders"};
  std::vector<std::unique_ptr<Environment>> envs;
  std::vector<NStepAccumulator> reference;
  FrameRecorder recorder({{3, 0.99}, kDepth, kFrame, 2});
  Checker checker(kFrame, kDepth);
  std::mt19937 policy(11);
  std::vector<float> observation;
  const auto newest = [&](const std::vector<float>& stack) {
    std::vector<uint8_t> frame(stack.end() - kFrame, stack.end());
    return frame;
  };
  for (int e = 0; e < 2; ++e) {
    absl::StatusOr<std::unique_ptr<Environment>> env =
        MakeEnvironment(games[e], ObservationMode::kPixels84);
    ASSERT_TRUE(env.ok()) << env.status();
    envs.push_back(*std::move(env));
    reference.emplace_back(NStepOptions{3, 0.99}, kDepth * kFrame);
    observation = envs[e]->Reset(100 + e);
    ASSERT_TRUE(reference[e].BeginEpisode(observation).ok());
    Records records;
    ASSERT_TRUE(recorder.BeginEpisode(e, newest(observation), &records).ok());
    checker.Append(records);
  }
  int episodes = 0;
  for (int step = 0; step < 1200; ++step) {
    const int e = step % 2;
    const int action = static_cast<int>(policy() % envs[e]->spec().action_count);
    absl::StatusOr<StepResult> result = envs[e]->Step(action);
    ASSERT_TRUE(result.ok()) << result.status();
    std::vector<Transition> expected;
    ASSERT_TRUE(reference[e]
                    .AddStep(action, result->reward, result->observation, result->terminated,
                             result->truncated, &expected)
                    .ok());
    Records records;
    ASSERT_TRUE(recorder
                    .AddStep(e, action, result->reward, newest(result->observation),
                             result->terminated, result->truncated, &records)
                    .ok());
    checker.Append(records);
    checker.Compare(records, expected);
    if (result->done()) {
      ++episodes;
      observation = envs[e]->Reset();
      ASSERT_TRUE(reference[e].BeginEpisode(observation).ok());
      Records begin;
      ASSERT_TRUE(recorder.BeginEpisode(e, newest(observation), &begin).ok());
      checker.Append(begin);
    }
  }
  EXPECT_GT(episodes, 3);
  EXPECT_GT(checker.compared(), 1000u);
}

TEST(FrameRecorderTest, RefusesBadCallsAndReferencesTooLong) {
  FrameRecorder recorder({{1, 0.9}, 2, 1, 2});
  Records out;
  const uint8_t frame[1] = {7};
  EXPECT_TRUE(absl::IsFailedPrecondition(recorder.AddStep(0, 0, 0.0, frame, false, false, &out)));
  EXPECT_TRUE(absl::IsInvalidArgument(recorder.BeginEpisode(2, frame, &out)));
  const uint8_t two[2] = {1, 2};
  EXPECT_TRUE(absl::IsInvalidArgument(recorder.BeginEpisode(0, two, &out)));
  ASSERT_TRUE(recorder.BeginEpisode(0, frame, &out).ok());
  ASSERT_TRUE(recorder.BeginEpisode(1, frame, &out).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(recorder.AddStep(0, -1, 0.0, frame, false, false, &out)));
  // Environment 1 idles while environment 0 writes past the longest reference.
  for (uint32_t i = 0; i < protocol::kMaxFrameReference; ++i) {
    ASSERT_TRUE(recorder.AddStep(0, 0, 0.0, frame, false, false, &out).ok());
  }
  const uint64_t next = recorder.next_sequence();
  const size_t emitted = out.size();
  EXPECT_TRUE(absl::IsOutOfRange(recorder.AddStep(1, 0, 0.0, frame, false, false, &out)));
  EXPECT_EQ(recorder.next_sequence(), next);
  EXPECT_EQ(out.size(), emitted);
  const auto valid = [](int n, int depth, size_t frame_bytes, int environments) {
    return FrameRecorderOptions{{n, 0.9}, depth, frame_bytes, environments}.Validate().ok();
  };
  EXPECT_TRUE(valid(1, 4, 1, 1));
  EXPECT_FALSE(valid(1, 0, 1, 1));
  EXPECT_FALSE(valid(1, 17, 1, 1));
  EXPECT_FALSE(valid(1, 4, 0, 1));
  EXPECT_FALSE(valid(1, 4, 1, 0));
  EXPECT_FALSE(valid(0, 4, 1, 1));
}

}  // namespace
}  // namespace dreplay::rl
