// Copyright dreplay authors.
//
// The replay sources on their own (the loop's tests run them through the
// loop): what each gives to train on, the priorities it writes back, the
// metrics it records, and the ratio it reports.

#include "learner_client/replay_source.h"

#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "learner_client/buffer_replay_source.h"
#include "learner_client/frame_stream_testing.h"
#include "learner_client/learner_loop.h"
#include "learner_client/local_replay_source.h"
#include "rl/dqn.h"
#include "rl/transition.h"

namespace dreplay::learner {
namespace {

constexpr int kObservation = 4;  // CartPole: 4 floats, 2 actions
constexpr uint64_t kNow = 5'000'000'000;

rl::Transition MakeTransition(int k) {
  rl::Transition t;
  for (int i = 0; i < kObservation; ++i) {
    t.observation.push_back(0.01f * static_cast<float>(k + i));
    t.next_observation.push_back(0.01f * static_cast<float>(k - i));
  }
  t.action = k % 2;
  t.reward = 1.0f;
  t.discount = 0.97f;
  t.steps = 1;
  return t;
}

std::vector<uint8_t> Encode(const rl::Transition& t) {
  std::vector<uint8_t> out(rl::EncodedTransitionSize(kObservation));
  EXPECT_TRUE(rl::EncodeTransition(t, absl::MakeSpan(out)).ok());
  return out;
}

// One batch of four: entries 0 and 2 crossed the link (sealed 1 s and 3 s
// before kNow), 1 and 3 the learner held; entry 3's action is out of range
// when `spoil` is set.
class OneBatch : public BatchSource {
 public:
  explicit OneBatch(bool spoil) : spoil_(spoil) {}
  absl::StatusOr<bool> Next(absl::Duration, rl::TransitionBatch* batch, std::vector<float>* weights,
                            std::vector<EntryOrigin>* origins) override {
    if (given_) return false;
    given_ = true;
    batch->Clear();
    weights->clear();
    origins->clear();
    for (int k = 0; k < 4; ++k) {
      rl::Transition t = MakeTransition(k);
      if (spoil_ && k == 3) t.action = 7;
      if (absl::Status s = batch->Add(t); !s.ok()) return s;
      weights->push_back(0.25f * static_cast<float>(k + 1));
      origins->push_back({kNow - static_cast<uint64_t>(k + 1) * 1'000'000'000, k % 2 == 0});
    }
    return true;
  }
  absl::Status WritePriorities(absl::Span<const float> priorities) override {
    written.emplace_back(priorities.begin(), priorities.end());
    return absl::OkStatus();
  }
  std::vector<std::vector<float>> written;

 private:
  const bool spoil_;
  bool given_ = false;
};

// Hands out `per_call` transitions per Next(), numbered 0, stride,
// 2 * stride, ... (the numbers between were lost on the way); a payload of
// 3 bytes for sequence `short_sequence`.
class Forwarder : public TransitionStream {
 public:
  Forwarder(int per_call, uint64_t short_sequence, uint64_t stride = 1)
      : per_call_(per_call), short_sequence_(short_sequence), stride_(stride) {}
  absl::Status Next(absl::Duration, std::vector<ForwardedItem>* out) override {
    out->clear();
    payloads_.clear();
    sequences_.clear();
    for (int i = 0; i < per_call_; ++i, next_ += stride_) {
      sequences_.push_back(next_);
      payloads_.push_back(next_ == short_sequence_
                              ? std::vector<uint8_t>(3, 0)
                              : Encode(MakeTransition(static_cast<int>(next_))));
    }
    for (int i = 0; i < per_call_; ++i) {
      ForwardedItem item;
      item.sequence = sequences_[i];
      item.initial_priority = 1.0f;
      item.insert_time_ns = kNow - 2'000'000'000;
      item.payload = payloads_[i];
      out->push_back(item);
    }
    return absl::OkStatus();
  }
  // The server ingested every number handed out so far, and those between.
  std::optional<uint64_t> generated() const override { return next_; }

 private:
  const int per_call_;
  const uint64_t short_sequence_;
  const uint64_t stride_;
  uint64_t next_ = 0;
  std::vector<uint64_t> sequences_;
  std::vector<std::vector<uint8_t>> payloads_;
};

class ReplaySourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    context_.metrics = &metrics_;
    context_.observation_size = kObservation;
    context_.action_count = 2;
    context_.max_priority = 10.0f;
    context_.wall_clock_ns = [] { return kNow; };
  }
  LearnerLoopOptions LocalOptions() const {
    LearnerLoopOptions o;
    o.placement = ReplayPlacement::kLearner;
    o.memory.capacity = 64;
    o.batch_size = 8;
    o.min_replay_size = 16;
    o.samples_per_insert = 1;
    o.spi_error_buffer = 8;
    return o;
  }

  MetricsRecorder metrics_{"test", 0, 1.0};
  ReplaySourceContext context_;
  rl::TransitionBatch batch_{kObservation};
  std::vector<float> weights_;
};

TEST_F(ReplaySourceTest, MakeReplaySourceNamesWhatThePlacementLacks) {
  LearnerLoopOptions o = LocalOptions();
  LearnerIo io;
  o.placement = ReplayPlacement::kBuffer;
  absl::Status s = MakeReplaySource(o, io, context_).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("batch source"), absl::string_view::npos) << s;
  o.placement = ReplayPlacement::kLearner;
  s = MakeReplaySource(o, io, context_).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("transition stream"), absl::string_view::npos) << s;
}

TEST_F(ReplaySourceTest, BufferSourceMeasuresArrivalsAndWritesBoundedPriorities) {
  OneBatch batches(/*spoil=*/false);
  uint64_t ingested = 100;
  BufferReplaySource source(
      &batches, [&]() -> absl::StatusOr<uint64_t> { return ingested; }, context_);
  ASSERT_TRUE(source.Start().ok());
  ASSERT_TRUE(*source.SamplesPerInsert() == std::nullopt);
  ASSERT_TRUE(source.Next(absl::ZeroDuration(), &batch_, &weights_).value());
  EXPECT_EQ(batch_.size(), 4u);
  EXPECT_EQ(weights_, (std::vector<float>{0.25f, 0.5f, 0.75f, 1.0f}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(source.Trained({1.0f, 2.0f}).code(), absl::StatusCode::kInternal);
  ASSERT_TRUE(source.Trained({1.0f, 3.0f, 1e9f, nan}).ok());
  ASSERT_EQ(batches.written.size(), 1u);  // the refused call wrote nothing
  const std::vector<float>& p = batches.written.back();
  EXPECT_EQ(p[0], 1.0f);
  EXPECT_EQ(p[1], 3.0f);
  EXPECT_EQ(p[2], 10.0f);  // bounded
  EXPECT_TRUE(std::isnan(p[3]));
  // Only entries 0 and 2 crossed: their |TD errors|; every entry's age
  // (1 s to 4 s) when the batch was given.
  const SummaryRecord summary = metrics_.Summary(1.0);
  EXPECT_EQ(metrics_.link_transitions_total(), 2u);
  ASSERT_TRUE(summary.data_age_mean_s.has_value());
  EXPECT_NEAR(*summary.data_age_mean_s, 2.5, 1e-9);
  ingested = 108;  // 4 trained on per 8 ingested
  EXPECT_DOUBLE_EQ(source.SamplesPerInsert().value().value(), 0.5);
  EXPECT_FALSE(source.Next(absl::ZeroDuration(), &batch_, &weights_).value());
}

TEST_F(ReplaySourceTest, BufferSourceLeavesOutBadRowsAndGivesThemPriorityZero) {
  OneBatch batches(/*spoil=*/true);
  BufferReplaySource source(&batches, nullptr, context_);
  ASSERT_TRUE(source.Next(absl::ZeroDuration(), &batch_, &weights_).value());
  EXPECT_EQ(batch_.size(), 3u);
  EXPECT_EQ(weights_, (std::vector<float>{0.25f, 0.5f, 0.75f}));
  EXPECT_EQ(source.transitions_dropped(), 1u);
  ASSERT_TRUE(source.Trained({2.0f, 4.0f, 6.0f}).ok());
  ASSERT_EQ(batches.written.size(), 1u);
  EXPECT_EQ(batches.written[0], (std::vector<float>{2.0f, 4.0f, 6.0f, 0.0f}));
  EXPECT_TRUE(*source.SamplesPerInsert() == std::nullopt);  // no server count
}

TEST_F(ReplaySourceTest, LocalSourceWaitsForTheMinimumSizeAndHoldsTheRatio) {
  Forwarder stream(/*per_call=*/4, /*short_sequence=*/5);
  LearnerLoopOptions o = LocalOptions();
  o.min_replay_size = 15;
  std::unique_ptr<LocalReplaySource> source =
      LocalReplaySource::Create(o, &stream, context_).value();
  // 4 arrive per call and sequence 5 is too short: 4, 7, 11, then 15 kept.
  for (int call = 1; call <= 3; ++call) {
    ASSERT_FALSE(source->Next(absl::ZeroDuration(), &batch_, &weights_).value()) << call;
  }
  ASSERT_TRUE(source->Next(absl::ZeroDuration(), &batch_, &weights_).value());
  EXPECT_EQ(source->local_size(), 15u);
  EXPECT_EQ(source->transitions_dropped(), 1u);
  EXPECT_EQ(metrics_.link_transitions_total(), 15u);  // measured on arrival
  ASSERT_TRUE(metrics_.Summary(1.0).data_age_mean_s.has_value());
  EXPECT_NEAR(*metrics_.Summary(1.0).data_age_mean_s, 2.0, 1e-9);
  EXPECT_EQ(batch_.size(), 8u);
  EXPECT_EQ(weights_.size(), 8u);
  EXPECT_EQ(source->Trained({1.0f}).code(), absl::StatusCode::kInternal);
  ASSERT_TRUE(source->Trained(std::vector<float>(8, 20.0f)).ok());
  EXPECT_EQ(source->rate_limiter()->sampled(), 8u);
  EXPECT_EQ(source->rate_limiter()->inserted(), 16u);  // generated: 5 counts too
  EXPECT_DOUBLE_EQ(source->SamplesPerInsert().value().value(), 0.5);
  // Budget 1 * (generated - 15) + 8: the next batch needs 8 more.
  EXPECT_FALSE(source->Next(absl::ZeroDuration(), &batch_, &weights_).value());  // 20 generated
  ASSERT_TRUE(source->Next(absl::ZeroDuration(), &batch_, &weights_).value());   // 24 generated
  ASSERT_TRUE(source->Trained(std::vector<float>(8, 1.0f)).ok());
  EXPECT_FALSE(source->Next(absl::ZeroDuration(), &batch_, &weights_).value());  // 28 generated
  EXPECT_EQ(source->rate_limiter()->sampled(), 16u);
  EXPECT_EQ(source->rate_limiter()->inserted(), 28u);
}

// The transitions a batch of MakeTransition()s holds, by their k.
std::set<int> Rows(const rl::TransitionBatch& batch) {
  std::set<int> rows;
  for (size_t r = 0; r < batch.size(); ++r) {
    rows.insert(static_cast<int>(std::lround(batch.observations()[r * kObservation] / 0.01f)));
  }
  return rows;
}

TEST_F(ReplaySourceTest, LocalSourceTakesTheTransferredPriorityAtFirstUse) {
  Forwarder stream(/*per_call=*/8, /*short_sequence=*/~uint64_t{0});
  LearnerLoopOptions o = LocalOptions();
  o.min_replay_size = 8;
  o.samples_per_insert = 0;
  o.spi_error_buffer = 0;
  std::unique_ptr<LocalReplaySource> source =
      LocalReplaySource::Create(o, &stream, context_).value();
  ASSERT_TRUE(source->Next(absl::ZeroDuration(), &batch_, &weights_).value());
  EXPECT_EQ(metrics_.link_transitions_total(), 8u);  // arrivals, counted as they arrive
  EXPECT_EQ(metrics_.first_uses_total(), 0u);        // nothing trained on yet
  const std::set<int> first = Rows(batch_);
  ASSERT_TRUE(source->Trained(std::vector<float>(batch_.size(), 2.0f)).ok());
  // Each distinct transition once, however often the batch drew it.
  EXPECT_EQ(metrics_.first_uses_total(), first.size());
  const ProgressRecord r = metrics_.Progress(1.0);
  EXPECT_EQ(r.transferred, 8u);
  ASSERT_TRUE(r.transferred_priority.has_value());
  EXPECT_DOUBLE_EQ(*r.transferred_priority, 2.0);
  // The next batch: 8 more arrived; what the first batch used is not new.
  ASSERT_TRUE(source->Next(absl::ZeroDuration(), &batch_, &weights_).value());
  std::set<int> fresh;
  for (int k : Rows(batch_)) {
    if (first.count(k) == 0) fresh.insert(k);
  }
  ASSERT_TRUE(source->Trained(std::vector<float>(batch_.size(), 4.0f)).ok());
  EXPECT_EQ(metrics_.first_uses_total(), first.size() + fresh.size());
  EXPECT_EQ(metrics_.link_transitions_total(), 16u);
}

TEST_F(ReplaySourceTest, LocalSourceCountsGeneratedTransitionsNotArrivals) {
  // Every other transition is lost on the way (sequences 0, 2, 4, ...): the
  // limiter counts what the actors generated, as the buffer node's does.
  Forwarder stream(/*per_call=*/4, /*short_sequence=*/~uint64_t{0}, /*stride=*/2);
  LearnerLoopOptions o = LocalOptions();
  o.min_replay_size = 8;
  std::unique_ptr<LocalReplaySource> source =
      LocalReplaySource::Create(o, &stream, context_).value();
  EXPECT_FALSE(source->Next(absl::ZeroDuration(), &batch_, &weights_).value());
  ASSERT_TRUE(source->Next(absl::ZeroDuration(), &batch_, &weights_).value());
  EXPECT_EQ(source->local_size(), 8u);
  EXPECT_EQ(source->rate_limiter()->inserted(), 16u);  // 0..15, 8 of them lost
  ASSERT_TRUE(source->Trained(std::vector<float>(8, 1.0f)).ok());
  EXPECT_DOUBLE_EQ(source->SamplesPerInsert().value().value(), 0.5);
}

// Frame records handed over in order, numbered with gaps (journal entries
// that were lost, torn or overwritten are never handed over), some records
// themselves lost: the local ring must still be overwritten in arrival
// order, so every transition sampled assembles to the actor's own stacks.
class GappedRecords : public TransitionStream {
 public:
  explicit GappedRecords(const frame_stream_testing::Stream& stream) : stream_(stream) {}
  absl::Status Next(absl::Duration, std::vector<ForwardedItem>* out) override {
    out->clear();
    for (int i = 0; i < 16 && next_ < stream_.records.size(); ++i, ++next_) {
      number_ += 1 + random_() % 5;       // numbers lost on the way
      if (random_() % 40 == 0) continue;  // and a record itself
      ForwardedItem item;
      item.sequence = number_;
      item.lease = 0;
      item.lease_sequence = next_;
      item.initial_priority = 1.0f;
      item.insert_time_ns = kNow - 1'000'000'000;
      item.payload = stream_.records[next_];
      out->push_back(item);
    }
    return absl::OkStatus();
  }
  std::optional<uint64_t> generated() const override { return std::nullopt; }
  bool done() const { return next_ == stream_.records.size(); }

 private:
  const frame_stream_testing::Stream& stream_;
  std::mt19937 random_{5};
  uint64_t next_ = 0;
  uint64_t number_ = 0;
};

TEST_F(ReplaySourceTest, LocalFramesSurviveNumbersAndRecordsLostOnTheWay) {
  using frame_stream_testing::kStackBytes;
  const frame_stream_testing::Stream stream = frame_stream_testing::MakeStream(23);
  std::multimap<std::vector<float>, const rl::Transition*> by_observation;
  for (const auto& [q, t] : stream.transitions) by_observation.emplace(t.observation, &t);
  GappedRecords forwarder(stream);
  LearnerLoopOptions o = LocalOptions();
  o.memory.capacity = 64;
  o.min_replay_size = 16;
  o.samples_per_insert = 4;
  context_.observation_size = kStackBytes;
  context_.observation_type = rl::ObservationType::kUint8;
  context_.action_count = frame_stream_testing::kActions;
  context_.frame_stack = frame_stream_testing::kDepth;
  std::unique_ptr<LocalReplaySource> source =
      LocalReplaySource::Create(o, &forwarder, context_).value();
  rl::TransitionBatch batch(kStackBytes, rl::ObservationType::kUint8);
  uint64_t checked = 0;
  while (!forwarder.done()) {
    absl::StatusOr<bool> ready = source->Next(absl::ZeroDuration(), &batch, &weights_);
    ASSERT_TRUE(ready.ok()) << ready.status();
    if (!*ready) continue;
    for (size_t i = 0; i < batch.size(); ++i) {
      const auto row = [&](absl::Span<const float> all) {
        return std::vector<float>(all.begin() + i * kStackBytes,
                                  all.begin() + (i + 1) * kStackBytes);
      };
      const std::vector<float> next = row(batch.next_observations());
      bool found = false;
      auto [first, last] = by_observation.equal_range(row(batch.observations()));
      for (auto it = first; it != last && !found; ++it) {
        found = it->second->next_observation == next && it->second->action == batch.actions()[i];
      }
      ASSERT_TRUE(found) << "row " << i << ": no transition of the actor's has these stacks";
      ++checked;
    }
    ASSERT_TRUE(source->Trained(std::vector<float>(batch.size(), 0.5f)).ok());
  }
  EXPECT_GT(checked, 1000u);
}

}  // namespace
}  // namespace dreplay::learner
