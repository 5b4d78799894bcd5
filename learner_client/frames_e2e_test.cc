// Copyright dreplay authors.
//
// Frames stored once, end to end over the soft provider: an actor writes
// frame records (rl::FrameRecorder) of several environments with episodes
// of random lengths into a lease it laps many times, while a learner READs
// staged batches (with and without the transfer-once cache, raw and
// compressed on the link with zstd), assembles each
// transition's stacks (FrameBatchAssembler) and answers with priorities.
// Every transition that reaches the learner must equal, byte for byte, the
// one the actor built from its own frame stacks (an n-step accumulator over
// the stacked observations), whatever was overwritten meanwhile.

#include <atomic>
#include <cstdint>
#include <deque>
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
#include "learner_client/priority_writer.h"
#include "protocol/frame_record.h"
#include "replay_server/server.h"
#include "rl/frame_recorder.h"
#include "rl/nstep.h"
#include "rl/transition.h"
#include "testing/in_process_service.h"

namespace dreplay::learner {
namespace {

using protocol::Role;

constexpr int kDepth = 4;
constexpr size_t kFrameBytes = 24;
constexpr size_t kStackBytes = kDepth * kFrameBytes;
constexpr int kEnvironments = 3;
constexpr int kActions = 4;
constexpr int kRecords = 4000;  // about 16 laps of the 256-slot lease

// The stream an actor writes: records in sequence order, and the
// transition each record that carries one stands for, as the actor built
// it from its own stacks.
struct Stream {
  std::vector<std::vector<uint8_t>> records;
  std::map<uint64_t, rl::Transition> transitions;  // by record sequence
};

Stream MakeStream(uint32_t seed) {
  std::mt19937 random(seed);
  const rl::NStepOptions nstep{/*n=*/3, /*discount=*/0.9};
  rl::FrameRecorder recorder({nstep, kDepth, kFrameBytes, kEnvironments});
  struct Env {
    std::deque<std::vector<uint8_t>> stack;
    std::unique_ptr<rl::NStepAccumulator> nstep;
    int steps_left = 0;
  };
  std::vector<Env> envs(kEnvironments);
  Stream stream;
  std::vector<rl::FrameRecorder::Record> records;
  std::vector<rl::Transition> completed;
  auto frame = [&] {
    std::vector<uint8_t> f(kFrameBytes);
    for (uint8_t& b : f) b = static_cast<uint8_t>(random());
    return f;
  };
  auto stacked = [](const Env& env) {
    std::vector<float> out;
    for (const auto& f : env.stack) out.insert(out.end(), f.begin(), f.end());
    return out;
  };
  // Appends `records`, pairing those with a transition with `completed`.
  auto append = [&] {
    size_t t = 0;
    for (rl::FrameRecorder::Record& r : records) {
      protocol::FrameRecordView view;
      CHECK(protocol::DecodeFrameRecord(r.bytes, kFrameBytes, &view).ok());
      const uint64_t q = stream.records.size();
      CHECK_EQ(r.sequence, q);
      if (view.has_transition()) stream.transitions[q] = completed.at(t++);
      stream.records.push_back(std::move(r.bytes));
    }
    CHECK_EQ(t, completed.size());
    records.clear();
    completed.clear();
  };
  auto begin = [&](int e) {
    Env& env = envs[e];
    const std::vector<uint8_t> first = frame();
    env.stack.assign(kDepth, first);
    env.nstep = std::make_unique<rl::NStepAccumulator>(nstep, kStackBytes);
    CHECK(env.nstep->BeginEpisode(stacked(env)).ok());
    env.steps_left = 1 + static_cast<int>(random() % 12);
    CHECK(recorder.BeginEpisode(e, first, &records).ok());
    append();
  };
  for (int e = 0; e < kEnvironments; ++e) begin(e);
  while (stream.records.size() < kRecords) {
    // Environments step in a random order, so references reach back unevenly.
    const int e = static_cast<int>(random() % kEnvironments);
    Env& env = envs[e];
    const int action = static_cast<int>(random() % kActions);
    const double reward = static_cast<int>(random() % 5) - 2;
    const std::vector<uint8_t> next = frame();
    env.stack.pop_front();
    env.stack.push_back(next);
    const bool end = --env.steps_left == 0;
    const bool terminated = end && random() % 2 == 0;
    const bool truncated = end && !terminated;
    CHECK(env.nstep->AddStep(action, reward, stacked(env), terminated, truncated, &completed).ok());
    CHECK(recorder.AddStep(e, action, reward, next, terminated, truncated, &records).ok());
    append();
    if (end) begin(e);
  }
  return stream;
}

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

  // The actor writes the whole stream in flushes of 16 records, while the
  // learner trains; it runs at most 2 flushes ahead of the learner's
  // batches, so that both move through the stream together (and the ring
  // is lapped under the sampler many times).
  std::atomic<bool> actor_done{false};
  std::atomic<uint64_t> batches_read{0};
  absl::Status actor_status;
  std::thread actor([&] {
    auto session = client::ClientSession::Connect(actor_host.get(),
                                                  testing::SessionOptions(*server, Role::kActor));
    if (!session.ok()) {
      actor_status = session.status();
    } else {
      actor::ExperienceWriterOptions o;
      o.max_batch = 16;
      auto writer = actor::ExperienceWriter::Create(session->get(), o);
      actor_status = writer.status();
      for (size_t q = 0; writer.ok() && actor_status.ok() && q < stream.records.size(); ++q) {
        actor_status = (*writer)->Append(stream.records[q], 1.0f + q % 7);
        if (q % 16 == 15 && actor_status.ok()) {
          actor_status = (*writer)->Flush();
          const uint64_t flushes = q / 16;
          testing::WaitFor([&] { return 2 * batches_read.load() + 2 >= flushes; });
        }
      }
      if (writer.ok() && actor_status.ok()) actor_status = (*writer)->Flush();
    }
    actor_done = true;
  });

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
  actor.join();
  ASSERT_TRUE(actor_status.ok()) << actor_status;
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

}  // namespace
}  // namespace dreplay::learner
