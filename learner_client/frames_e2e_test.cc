// Copyright dreplay authors.
//
// Frames stored once, end to end over the soft provider: an actor writes
// frame records (rl::FrameRecorder) of several environments with episodes
// of random lengths into a lease it laps many times, while a learner READs
// staged batches (with and without the transfer-once cache, raw and
// compressed on the link with zstd), assembles each
// transition's stacks (FrameBatchAssembler) and answers with priorities;
// or keeps its own replay of what the server forwards (the learner and
// hybrid placements) and samples from it.
// Every transition that reaches the learner must equal, byte for byte, the
// one the actor built from its own frame stacks (an n-step accumulator over
// the stacked observations), whatever was overwritten meanwhile.

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "actor_client/experience_writer.h"
#include "client/session.h"
#include "common/frame_codec.h"
#include "glog/logging.h"
#include "gtest/gtest.h"
#include "learner_client/batch_reader.h"
#include "learner_client/frame_batch.h"
#include "learner_client/frame_stream_testing.h"
#include "learner_client/local_replay_source.h"
#include "learner_client/metrics.h"
#include "learner_client/priority_writer.h"
#include "learner_client/service_io.h"
#include "protocol/frame_record.h"
#include "replay_server/server.h"
#include "rl/frame_recorder.h"
#include "rl/nstep.h"
#include "rl/transition.h"
#include "testing/in_process_service.h"

namespace dreplay::learner {
namespace {

using protocol::Role;

using frame_stream_testing::kActions;
using frame_stream_testing::kDepth;
using frame_stream_testing::kFrameBytes;
using frame_stream_testing::kStackBytes;
using frame_stream_testing::MakeStream;
using frame_stream_testing::Stream;

server::ReplayServerOptions FramesServerOptions(bool link_codec) {
  server::ReplayServerOptions o = testing::SmallServerOptions();
  if (link_codec) o.core.sampler.link_codec = CodecOptions{CodecKind::kZstd, 1};
  protocol::LayoutConfig& l = o.layout;
  l.capacity = 256;
  l.leases = 1;
  l.max_actors = 1;
  l.batch_size = 8;
  l.staging_depth = 4;
  l.frame_stack = kDepth;
  l.observation_size = kStackBytes;
  l.num_actions = kActions;
  l.slot_size =
      static_cast<uint32_t>(protocol::SlotSizeFor(protocol::FrameRecordBytes(kDepth, kFrameBytes)));
  CHECK(l.set_spec(absl::StrCat("env=Synthetic obs=", kStackBytes, "u8 act=", kActions,
                                " nstep=3 gamma=0.9"))
            .ok());
  return o;
}

// Writes a stream's records in flushes of 16, as an actor, on a thread of
// its own; after each flush it waits until `may_go_on(flushes)` holds.
struct StreamWriter {
  StreamWriter(verbs::Provider* host, const server::ReplayServer& server, const Stream& stream,
               std::function<bool(uint64_t)> may_go_on)
      : thread([&, host, may_go_on] {
          auto session =
              client::ClientSession::Connect(host, testing::SessionOptions(server, Role::kActor));
          if (!session.ok()) {
            status = session.status();
          } else {
            actor::ExperienceWriterOptions o;
            o.max_batch = 16;
            auto writer = actor::ExperienceWriter::Create(session->get(), o);
            status = writer.status();
            for (size_t q = 0; writer.ok() && status.ok() && q < stream.records.size(); ++q) {
              status = (*writer)->Append(stream.records[q], 1.0f + q % 7);
              if (q % 16 == 15 && status.ok()) {
                status = (*writer)->Flush();
                const uint64_t flushes = q / 16;
                testing::WaitFor([&] { return may_go_on(flushes); });
              }
            }
            if (writer.ok() && status.ok()) status = (*writer)->Flush();
          }
          done = true;
        }) {}
  void Join() { thread.join(); }

  std::atomic<bool> done{false};
  absl::Status status;
  std::thread thread;  // last: starts once the others are made
};

// (learner cache, link compression)
class FramesEndToEndTest : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(FramesEndToEndTest, EveryTransitionTheLearnerGetsIsTheOneTheActorBuilt) {
  const auto [learner_cache, link_codec] = GetParam();
  const Stream stream = MakeStream((learner_cache ? 11 : 12) + (link_codec ? 2 : 0));
  auto server_host = testing::SoftProvider();
  auto actor_host = testing::SoftProvider();
  auto learner_host = testing::SoftProvider();
  auto server = testing::StartServer(server_host.get(), FramesServerOptions(link_codec));
  const protocol::LayoutConfig& config = server->config();

  client::ClientSessionOptions learner_options = testing::SessionOptions(*server, Role::kLearner);
  learner_options.learner_cache = learner_cache;
  auto learner = client::ClientSession::Connect(learner_host.get(), learner_options);
  ASSERT_TRUE(learner.ok()) << learner.status();
  BatchReaderOptions reader_options;
  reader_options.learner_cache = learner_cache;
  auto reader = BatchReader::Create(learner->get(), reader_options);
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto priorities = PriorityWriter::Create(learner->get());
  ASSERT_TRUE(priorities.ok()) << priorities.status();
  FrameBatchAssembler assembler(config);

  // The actor runs at most 2 flushes ahead of the learner's batches, so
  // that both move through the stream together (and the ring is lapped
  // under the sampler many times).
  std::atomic<uint64_t> batches_read{0};
  StreamWriter actor(actor_host.get(), *server, stream,
                     [&](uint64_t flushes) { return 2 * batches_read.load() + 2 >= flushes; });
  const std::atomic<bool>& actor_done = actor.done;

  std::mt19937 random(5);
  rl::TransitionBatch batch(kStackBytes, rl::ObservationType::kUint8);
  uint64_t checked = 0, batches = 0, after_actor = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  while (after_actor < 40 && absl::Now() < deadline) {
    if (actor_done) ++after_actor;
    absl::StatusOr<StagedBatch> staged = (*reader)->Next(absl::Milliseconds(200));
    if (absl::IsDeadlineExceeded(staged.status())) continue;
    ASSERT_TRUE(staged.ok()) << staged.status();
    ++batches;
    ++batches_read;
    assembler.Index(*staged);
    for (uint32_t i = 0; i < staged->size(); ++i) {
      const uint64_t q = staged->entry(i).slot_sequence;
      batch.Clear();
      const absl::Status added = assembler.Add(*staged, i, &batch);
      if (absl::IsNotFound(added)) {
        // A record the cache could not serve (counted): left out, never
        // wrong. Without the cache every record arrives.
        EXPECT_TRUE(learner_cache) << "batch " << staged->batch_number() << ": " << added;
        continue;
      }
      ASSERT_TRUE(added.ok()) << added;
      const auto expected = stream.transitions.find(q);
      ASSERT_NE(expected, stream.transitions.end()) << "record " << q << " carries none";
      const rl::Transition& t = expected->second;
      ASSERT_EQ(batch.observations(), t.observation) << "record " << q;
      ASSERT_EQ(batch.next_observations(), t.next_observation) << "record " << q;
      ASSERT_EQ(batch.actions()[0], t.action);
      ASSERT_FLOAT_EQ(batch.rewards()[0], t.reward);
      ASSERT_FLOAT_EQ(batch.discounts()[0], t.discount);
      ASSERT_EQ(batch.dones()[0], t.done ? 1.0f : 0.0f);
      ++checked;
    }
    std::vector<float> update(staged->size());
    for (float& p : update) p = 0.1f + static_cast<float>(random() % 20);
    ASSERT_TRUE((*priorities)->Write(*staged, update).ok());
  }
  actor.Join();
  ASSERT_TRUE(actor.status.ok()) << actor.status;
  ASSERT_TRUE(actor_done) << "the actor did not finish in time";
  const protocol::StatsBlock stats = server->ReadStats();
  const BatchReaderStats& read = (*reader)->stats();
  LOG(INFO) << "checked " << checked << " transitions in " << batches << " batches; inserted "
            << stats.inserted << " of " << stream.transitions.size() << "; records fetched "
            << read.records_fetched << ", transitions fetched " << read.transitions_fetched
            << ", cache hits " << read.cache_hits << ", misses " << read.cache_misses
            << ", copy rejects " << stats.sample_copy_rejects << ", unpacked "
            << read.unpacked_bytes << " bytes";
  // Enough of the stream crossed, records with the transitions, and the
  // ring was lapped many times over.
  EXPECT_GE(checked, 800u) << batches << " batches";
  EXPECT_GT(read.records_fetched, 0u);
  EXPECT_GE(stats.inserted, stream.transitions.size() / 2);
  EXPECT_LE(stats.inserted, stream.transitions.size());
  // Episode starts are frames only; transitions left as their records were
  // overwritten, lap after lap.
  EXPECT_EQ(stats.frame_only_records + stream.transitions.size(), stream.records.size());
  EXPECT_GT(stats.frames_evicted, stream.transitions.size() / 2);
  EXPECT_EQ(stats.inserted + stats.frames_missing, stream.transitions.size());
  if (link_codec) {
    // Batches crossed packed (their headers and padding shrink) and were
    // unpacked before any stack above was assembled from them.
    EXPECT_GT(read.unpacked_bytes, 0u);
  } else {
    EXPECT_EQ(read.unpacked_bytes, 0u);
  }
  if (learner_cache) {
    EXPECT_GT(read.cache_hits, 0u) << "records the learner held never crossed again";
  } else {
    EXPECT_EQ(read.cache_misses, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(WithAndWithoutTheLearnerCacheAndLinkCompression, FramesEndToEndTest,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<bool, bool>>& info) {
                           return absl::StrCat(std::get<0>(info.param) ? "LearnerCache" : "NoCache",
                                               std::get<1>(info.param) ? "Zstd" : "Raw");
                         });

// A learner that keeps its own replay (LocalReplaySource).
struct LocalReplayCase {
  const char* name;
  ReplayPlacement placement;
  protocol::ForwardMode forward;  // hybrid: the server's forwarder
  bool learner_cache;             // hybrid: records held are not sent again
  bool link_codec;
};

class FramesLocalReplayTest : public ::testing::TestWithParam<LocalReplayCase> {};

// The learner placement: every record is forwarded in order and kept in
// the learner's own replay (a LocalFrameStore). The hybrid placement: the
// server forwards transitions by priority (or oldest first), each once,
// with the records their stacks need; the learner keeps every record by
// its server slot, and its replay (a ForwardedFrameIndex, twice the
// server's ring here) copies from there the records its transitions need.
// Either way every transition it samples to train on is one the actor
// built, byte for byte (looked up by its observation stack, which the
// random frames make unique), and none is lost.
TEST_P(FramesLocalReplayTest, EveryTransitionSampledIsOneTheActorBuilt) {
  const LocalReplayCase& c = GetParam();
  const Stream stream = MakeStream(17);
  std::multimap<std::vector<float>, const rl::Transition*> by_observation;
  for (const auto& [q, t] : stream.transitions) by_observation.emplace(t.observation, &t);
  auto server_host = testing::SoftProvider();
  auto actor_host = testing::SoftProvider();
  auto learner_host = testing::SoftProvider();
  server::ReplayServerOptions server_options = FramesServerOptions(c.link_codec);
  server_options.core.sampler.forward = c.forward;
  auto server = testing::StartServer(server_host.get(), server_options);
  client::ClientSessionOptions learner_options = testing::SessionOptions(*server, Role::kLearner);
  learner_options.learner_placement = c.placement == ReplayPlacement::kLearner;
  learner_options.learner_cache = c.learner_cache;
  auto learner = client::ClientSession::Connect(learner_host.get(), learner_options);
  ASSERT_TRUE(learner.ok()) << learner.status();
  LearnerServiceIoOptions io_options;
  io_options.placement = c.placement;
  auto io = LearnerServiceIo::Create(learner->get(), io_options);
  ASSERT_TRUE(io.ok()) << io.status();
  LearnerLoopOptions loop;
  loop.placement = c.placement;
  loop.memory.capacity = 512;
  loop.batch_size = 8;
  loop.min_replay_size = 64;
  loop.samples_per_insert = 1;
  loop.spi_error_buffer = 64;
  MetricsRecorder metrics("test", 0, 1.0);
  ReplaySourceContext context;
  context.metrics = &metrics;
  context.observation_size = kStackBytes;
  context.observation_type = rl::ObservationType::kUint8;
  context.action_count = kActions;
  context.frame_stack = kDepth;
  context.wall_clock_ns = [] { return static_cast<uint64_t>(absl::ToUnixNanos(absl::Now())); };
  auto source = LocalReplaySource::Create(loop, io->get(), context);
  ASSERT_TRUE(source.ok()) << source.status();

  std::atomic<uint64_t> batches{0};
  StreamWriter actor(actor_host.get(), *server, stream,
                     [&](uint64_t flushes) { return batches.load() + 8 >= flushes; });
  rl::TransitionBatch batch(kStackBytes, rl::ObservationType::kUint8);
  std::vector<float> weights;
  uint64_t checked = 0, after_actor = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  while (after_actor < 40 && absl::Now() < deadline) {
    if (actor.done) ++after_actor;
    absl::StatusOr<bool> ready = (*source)->Next(absl::Milliseconds(100), &batch, &weights);
    ASSERT_TRUE(ready.ok()) << ready.status();
    if (!*ready) continue;
    const size_t m = kStackBytes;
    for (size_t i = 0; i < batch.size(); ++i) {
      const std::vector<float> observation(batch.observations().begin() + i * m,
                                           batch.observations().begin() + (i + 1) * m);
      const std::vector<float> next(batch.next_observations().begin() + i * m,
                                    batch.next_observations().begin() + (i + 1) * m);
      bool found = false;
      auto [first, last] = by_observation.equal_range(observation);
      for (auto it = first; it != last && !found; ++it) {
        const rl::Transition& t = *it->second;
        found = t.next_observation == next && t.action == batch.actions()[i] &&
                t.reward == batch.rewards()[i] && t.discount == batch.discounts()[i] &&
                (t.done ? 1.0f : 0.0f) == batch.dones()[i];
      }
      ASSERT_TRUE(found) << "row " << i << ": no transition of the actor's has these stacks";
      ++checked;
    }
    ASSERT_TRUE((*source)->Trained(std::vector<float>(batch.size(), 0.5f)).ok());
    ++batches;
  }
  actor.Join();
  ASSERT_TRUE(actor.status.ok()) << actor.status;
  ASSERT_TRUE(actor.done) << "the actor did not finish in time";
  const LinkStats link = (*io)->link_stats();
  LOG(INFO) << c.name << ": checked " << checked << " sampled transitions; local memory "
            << (*source)->local_size() << ", dropped " << (*source)->transitions_dropped()
            << "; transitions fetched " << link.transitions_fetched << ", experience bytes "
            << link.experience;
  EXPECT_GE(checked, 800u);
  EXPECT_GT((*source)->local_size(), 64u);
  EXPECT_EQ((*source)->transitions_dropped(), 0u);
  // Hybrid: each transition crossed once.
  if (c.placement == ReplayPlacement::kHybrid) {
    EXPECT_EQ(link.transitions_fetched, link.distinct_transitions_fetched);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Placements, FramesLocalReplayTest,
    ::testing::Values(LocalReplayCase{"Learner", ReplayPlacement::kLearner,
                                      protocol::ForwardMode::kForwardOff, false, false},
                      LocalReplayCase{"HybridPriorityCacheZstd", ReplayPlacement::kHybrid,
                                      protocol::ForwardMode::kForwardPriority, true, true},
                      LocalReplayCase{"HybridPriorityNoCache", ReplayPlacement::kHybrid,
                                      protocol::ForwardMode::kForwardPriority, false, false},
                      LocalReplayCase{"HybridFifoCache", ReplayPlacement::kHybrid,
                                      protocol::ForwardMode::kForwardFifo, true, false}),
    [](const ::testing::TestParamInfo<LocalReplayCase>& info) { return info.param.name; });

}  // namespace
}  // namespace dreplay::learner
