// Copyright dreplay authors.
//
// The server with frames stored once (LayoutConfig::frame_stack): records an
// rl::FrameRecorder makes of a synthetic frame stream, written into their
// lease's slots in sequence order as an actor writes them (SealSlot, then
// the commit word), ingested and staged by a ReplayCore.
//
// A model of the lease (every record made, whether it was written, and when
// its slot was overwritten) says after each step which transitions the
// memory holds and what the frame counters read; every staged batch is
// taken apart as a learner would and each transition's stacks, assembled
// from the batch's slots alone, are compared byte for byte with those the
// writer's own records give.

#include <cstdlib>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "replay_server/frames_harness.h"

namespace dreplay::server::frames_testing {
namespace {

TEST(FramesTest, InsertsEveryTransitionWhoseRecordsAreHeldAndNoFrameOnlyRecord) {
  Shape shape;
  shape.depth = 4;
  shape.frame_bytes = 8;
  shape.n = 3;
  shape.environments = 3;
  shape.capacity = 1024;  // no lap: every record stays held
  shape.seed = 3;
  FramesHarness h(shape);
  for (int step = 0; step < 40 && h.room(0) > 0; ++step) {
    h.WriteSome(24);
    h.Step();
  }
  ASSERT_LT(h.next_sequence(0), h.lease_slots());
  const protocol::StatsBlock stats = h.Stats();
  EXPECT_GT(h.inserted(), 300u);
  EXPECT_GT(h.frame_only(), 10u);
  EXPECT_EQ(h.missing(), 0u);
  // Every record is a transition to sample or a frame only.
  EXPECT_EQ(stats.inserted + stats.frame_only_records, h.next_sequence(0));
  EXPECT_EQ(h.core().memory().size(), stats.inserted);
  EXPECT_EQ(stats.frames_missing, 0u);
  EXPECT_EQ(stats.frames_evicted, 0u);
  EXPECT_GT(h.batches_checked(), 20u);
}

class StagedBatchTest : public ::testing::TestWithParam<Shape> {};

TEST_P(StagedBatchTest, CarryEachRecordTheirTransitionsNeedOnceAndAssembleTheWritersStacks) {
  const Shape& shape = GetParam();
  SCOPED_TRACE(Describe(shape));
  FramesHarness h(shape);
  for (int step = 0; step < 300; ++step) {
    h.WriteSome(shape.capacity / shape.leases / 3);
    h.Step();
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_GT(h.batches_checked(), 200u);
  EXPECT_GT(h.records_staged(), h.transitions_staged() / 2);
  EXPECT_EQ(h.references_staged(), 0u);  // no learner cache
  EXPECT_GT(h.frames_evicted(), 0u);     // the leases lapped
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, StagedBatchTest,
    ::testing::Values(Shape{/*depth=*/4, /*frame_bytes=*/16, /*n=*/3, /*environments=*/1,
                            /*leases=*/1, /*capacity=*/256, /*batch_size=*/8,
                            /*episode_steps=*/12, /*seed=*/1},
                      Shape{2, 4, 2, 2, 2, 256, 8, 20, 2}, Shape{4, 12, 3, 3, 2, 512, 16, 9, 3},
                      Shape{2, 8, 3, 4, 1, 256, 4, 30, 4}, Shape{1, 5, 2, 2, 1, 128, 8, 6, 5}));

TEST(FramesTest, WithTheLearnerCacheRecordsItHoldsAreStagedAsReferences) {
  Shape shape;
  shape.depth = 4;
  shape.frame_bytes = 16;
  shape.n = 3;
  shape.environments = 2;
  shape.leases = 2;
  shape.capacity = 256;
  shape.seed = 6;
  FramesHarness h(shape, /*learner_cache=*/true);
  for (int step = 0; step < 300; ++step) {
    h.WriteSome(20);
    h.Step();
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_GT(h.batches_checked(), 200u);
  EXPECT_GT(h.references_staged(), 100u);
  EXPECT_GT(h.records_staged(), 0u);
}

TEST(FramesTest, AfterTheRingLapsNoTransitionWithAnOverwrittenRecordIsStaged) {
  Shape shape;
  shape.depth = 4;
  shape.frame_bytes = 6;
  shape.n = 3;
  shape.environments = 3;
  shape.capacity = 64;  // one lease of 64 slots; references reach about 21 back
  shape.batch_size = 8;
  shape.seed = 7;
  FramesHarness h(shape);
  for (int step = 0; step < 400; ++step) {
    h.WriteSome(h.lease_slots());
    h.Step();
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_GT(h.next_sequence(0), 50 * h.lease_slots());
  EXPECT_GT(h.frames_evicted(), 1000u);
  EXPECT_GT(h.missing(), 0u);  // a few reach past a whole lease
  EXPECT_GT(h.batches_checked(), 300u);
}

// Lease 0 with one environment of depth 2, n 1: from its third record on,
// every record holds a frame and the transition whose next observation
// ends with it.
Shape OneEnvironment() {
  Shape shape;
  shape.depth = 2;
  shape.frame_bytes = 4;
  shape.n = 1;
  shape.environments = 1;
  shape.capacity = 64;
  shape.episode_steps = 1000;  // one long episode
  shape.seed = 8;
  return shape;
}

TEST(FramesTest, ATransitionWhoseRecordWasNeverWrittenIsNotInsertedAndCountedMissing) {
  FramesHarness h(OneEnvironment());
  h.Write(0, 10);
  h.Step();
  ASSERT_EQ(h.missing(), 0u);
  const uint64_t inserted = h.inserted();
  const uint64_t skipped = h.next_sequence(0);
  h.Skip(0);
  h.Write(0, 10);
  h.Step();
  // The two transitions whose stacks hold the skipped frame (depth 2).
  EXPECT_EQ(h.Stats().frames_missing, 2u);
  EXPECT_EQ(h.inserted(), inserted + 8);
  EXPECT_FALSE(h.core().memory().valid(protocol::LeaseSlotIndex(h.config(), 0, skipped + 1)));
  EXPECT_FALSE(h.core().memory().valid(protocol::LeaseSlotIndex(h.config(), 0, skipped + 2)));
  EXPECT_EQ(h.core().memory().sequence(protocol::LeaseSlotIndex(h.config(), 0, skipped + 3)),
            skipped + 3);
  EXPECT_EQ(h.Stats().overrun_slots, 1u);
}

TEST(FramesTest, ATransitionWithAReferenceToNoHeldFrameIsNotInsertedAndCountedMissing) {
  FramesHarness h(OneEnvironment());
  for (int k = 0; k < 2; ++k) {
    h.Write(0, 40);  // past a whole lease
    h.Step();
  }
  ASSERT_EQ(h.missing(), 0u);
  const uint64_t lease_slots = h.lease_slots();
  // Before the stream's start; a whole lease back (that slot holds the
  // record itself now); further back than the lease.
  for (const uint16_t distance :
       {static_cast<uint16_t>(h.next_sequence(0) + 1), static_cast<uint16_t>(lease_slots),
        static_cast<uint16_t>(lease_slots + 3)}) {
    SCOPED_TRACE(absl::StrCat("reference ", distance, " back"));
    const uint64_t missing = h.Stats().frames_missing;
    ASSERT_TRUE(h.upcoming(0).has_transition);
    const uint64_t q = h.next_sequence(0);
    h.WriteWithReference(0, /*k=*/0, distance);
    h.Write(0, 1);
    h.Step();
    EXPECT_EQ(h.Stats().frames_missing, missing + 1);
    EXPECT_FALSE(h.core().memory().valid(protocol::LeaseSlotIndex(h.config(), 0, q)));
    // The next transition, which refers to the corrupted record's frame,
    // is whole.
    EXPECT_EQ(h.core().memory().sequence(protocol::LeaseSlotIndex(h.config(), 0, q + 1)), q + 1);
  }
}

TEST(FramesTest, ATransitionReferringToARecordWithoutAFrameIsNotInserted) {
  Shape shape = OneEnvironment();
  shape.n = 3;
  shape.episode_steps = 4;
  FramesHarness h(shape);
  // Find a record without a frame (an episode's end completing its last
  // steps), then the first transition of the next episode to point at it
  // (as its oldest frame: references stay oldest first).
  uint64_t frameless = 0;
  for (;;) {
    ASSERT_GT(h.room(0), 0u);
    const bool has_frame = h.upcoming(0).has_frame;
    const uint64_t q = h.next_sequence(0);
    h.Write(0, 1);
    if (!has_frame) {
      frameless = q;
      break;
    }
  }
  while (!(h.upcoming(0).has_transition && h.upcoming(0).has_frame)) h.Write(0, 1);
  const uint64_t q = h.next_sequence(0);
  const uint64_t missing = h.missing();
  h.WriteWithReference(0, /*k=*/0, static_cast<uint16_t>(q - frameless));
  h.Step();
  EXPECT_EQ(h.missing(), missing + 1);
  EXPECT_EQ(h.Stats().frames_missing, h.missing());
  EXPECT_FALSE(h.core().memory().valid(protocol::LeaseSlotIndex(h.config(), 0, q)));
}

// A transition whose oldest record is overwritten later in the same ingest
// walk that inserts it, with nothing else leaving the memory in between:
// B's steps after its start are skipped, so the records A's walk overwrites
// before that one hold no transition's oldest frame. (A slot the walk
// overwrites is one it could not evict ahead: here, after a skipped one;
// with a live actor, one written after the step began.)
TEST(FramesTest, ATransitionWhoseRecordIsOverwrittenInTheWalkThatInsertsItIsNotHeld) {
  Shape shape;
  shape.depth = 1;
  shape.frame_bytes = 4;
  shape.n = 1;
  shape.environments = 2;
  shape.capacity = 8;
  shape.episode_steps = 1 << 20;  // no episode ends
  shape.seed = 9;
  FramesHarness h(shape);
  constexpr int kA = 0, kB = 1;
  h.Schedule(0, {kB, kB, kB, kB, kB, kB, kA, kB, kA, kA, kA, kA, kA, kA, kA});
  h.Write(0, 1);                          // 0: B's start
  for (int k = 0; k < 5; ++k) h.Skip(0);  // 1..5: B's steps
  h.Write(0, 1);                          // 6: A's start
  h.Step();
  ASSERT_EQ(h.room(0), h.lease_slots());
  h.Skip(0);      // 7: B's step
  h.Write(0, 7);  // 8..14: A's steps; 8 needs 6, which 14 overwrites
  h.Step();
  EXPECT_FALSE(h.ModelHolds(0, 8));
  EXPECT_FALSE(h.core().memory().valid(protocol::LeaseSlotIndex(h.config(), 0, 8)))
      << "transition 8 is held though record 6, whose frame it needs, was overwritten by 14";
}

TEST(FramesTest, SkippedSequencesAcrossManyLapsLeaveTheMemoryAsTheModelSays) {
  for (uint32_t seed = 20; seed < 24; ++seed) {
    Shape shape;
    shape.depth = 2;
    shape.frame_bytes = 4;
    shape.n = 2;
    shape.environments = 2;
    shape.leases = 2;
    shape.capacity = 64;  // 32 slots a lease
    shape.episode_steps = 40;
    shape.seed = seed;
    SCOPED_TRACE(Describe(shape));
    FramesHarness h(shape);
    std::mt19937 random(seed);
    for (int step = 0; step < 300; ++step) {
      for (uint32_t l = 0; l < shape.leases; ++l) {
        if (random() % 4 == 0 && h.room(l) > 0) h.Skip(l);
      }
      h.WriteSome(h.lease_slots());
      h.Step();
      if (::testing::Test::HasFailure()) return;
    }
    EXPECT_GT(h.missing(), 0u);
    EXPECT_GT(h.frames_evicted(), 0u);
  }
}

// A checkpoint keeps frames stored once: the restored core holds the same
// transitions, rebuilds which records each needs, releases them as new
// records overwrite theirs, and stages stacks that are still the writer's.
TEST(FramesTest, ACheckpointRestoreKeepsEveryTransitionAndItsRecords) {
  Shape shape;
  shape.environments = 3;
  shape.capacity = 256;
  shape.seed = 7;
  FramesHarness h(shape, /*learner_cache=*/true);
  for (int i = 0; i < 60; ++i) {
    h.WriteSome(24);
    h.Step();
  }
  const uint64_t held = h.core().memory().size();
  ASSERT_GT(held, 0u);
  h.SaveAndRestore(std::string(getenv("TEST_TMPDIR")) + "/frames.ckpt");
  EXPECT_EQ(h.core().epoch(), 2u);
  EXPECT_EQ(h.core().memory().size(), held);
  const uint64_t batches_before = h.batches_checked();
  // Laps of the ring after the restore: the model's checks hold at every
  // step (memory, counters, every staged batch's stacks).
  for (int i = 0; i < 60; ++i) {
    h.WriteSome(24);
    h.Step();
  }
  EXPECT_GT(h.batches_checked(), batches_before + 10);
  EXPECT_GT(h.next_sequence(0), 2 * h.lease_slots());
}

// The hybrid placement: each transition is forwarded once, with the
// records its stacks need; the learner keeps what it receives, so no
// record's slot crosses twice, and one that a later forwarded transition
// needs as its own record is staged as a reference.
class ForwardedFramesTest : public ::testing::TestWithParam<protocol::ForwardMode> {};

TEST_P(ForwardedFramesTest, EachTransitionOnceAndEachRecordAtMostOnce) {
  Shape shape;
  shape.depth = 4;
  shape.frame_bytes = 16;
  shape.n = 3;
  shape.environments = 2;
  shape.leases = 2;
  shape.capacity = 256;
  shape.seed = 12;
  FramesHarness h(shape, /*learner_cache=*/true, GetParam());
  for (int step = 0; step < 300; ++step) {
    h.WriteSome(20);
    h.Step();
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_GT(h.batches_checked(), 100u);
  EXPECT_EQ(h.forwarded(), h.transitions_staged());
  EXPECT_GT(h.forwarded(), h.inserted() / 2);
  EXPECT_GT(h.records_staged(), 0u);
  EXPECT_EQ(h.most_copies(), 1);
  EXPECT_GT(h.next_sequence(0), 2 * h.lease_slots());  // the leases lapped
}

TEST_P(ForwardedFramesTest, WithoutTheLearnerCacheEveryNeededRecordIsStagedAgain) {
  Shape shape;
  shape.depth = 4;
  shape.frame_bytes = 16;
  shape.capacity = 256;
  shape.seed = 13;
  FramesHarness h(shape, /*learner_cache=*/false, GetParam());
  for (int step = 0; step < 200; ++step) {
    h.WriteSome(20);
    h.Step();
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_GT(h.batches_checked(), 50u);
  EXPECT_EQ(h.references_staged(), 0u);
  EXPECT_GT(h.most_copies(), 1);
}

INSTANTIATE_TEST_SUITE_P(Modes, ForwardedFramesTest,
                         ::testing::Values(protocol::ForwardMode::kForwardPriority,
                                           protocol::ForwardMode::kForwardFifo));

TEST(FramesTest, CreateRefusesFrameStackWithoutASpecOfU8Stacks) {
  const Shape shape;
  const std::string stack = std::to_string(shape.depth * shape.frame_bytes);
  for (const std::string& spec :
       {absl::StrCat("env=Frames obs=", stack, " act=4 nstep=3 gamma=0.9"),     // f32
        absl::StrCat("env=Frames obs=", stack, "f32 act=4 nstep=3 gamma=0.9"),  // f32
        std::string("env=Frames obs=8u8 act=4 nstep=3 gamma=0.9"),              // one frame
        std::string("test u8"),                                                 // free-form
        std::string()}) {
    SCOPED_TRACE(spec);
    LayoutConfig config = FramesConfig(shape);
    ASSERT_TRUE(config.set_spec(spec).ok());
    std::unique_ptr<ReplayRegions> regions = ReplayRegions::Create(config).value();
    FakeClock clock;
    const auto core = ReplayCore::Create(regions.get(), CoreOptions(1), &clock);
    EXPECT_TRUE(absl::IsInvalidArgument(core.status())) << core.status();
    EXPECT_NE(core.status().message().find("frame_stack"), std::string::npos) << core.status();
  }
}

}  // namespace
}  // namespace dreplay::server::frames_testing
