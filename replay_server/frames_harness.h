// Copyright dreplay authors.
//
// frames_harness.h: the model the frames tests (frames_test.cc) check a
// ReplayCore with frames stored once against; see frames_test.cc.

#ifndef DREPLAY_REPLAY_SERVER_FRAMES_HARNESS_H_
#define DREPLAY_REPLAY_SERVER_FRAMES_HARNESS_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <initializer_list>
#include <map>
#include <memory>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/shared_words.h"
#include "gtest/gtest.h"
#include "protocol/frame_record.h"
#include "protocol/layout.h"
#include "replay_server/regions.h"
#include "replay_server/replay_core.h"
#include "rl/frame_recorder.h"
#include "rl/frame_stacks.h"
#include "testing/in_memory_peers.h"

namespace dreplay::server::frames_testing {

using protocol::BatchEntry;
using protocol::BatchHeader;
using protocol::LayoutConfig;

constexpr int kActions = 4;
constexpr uint64_t kEpoch = 1;  // a fresh core's
constexpr uint64_t kIncarnation = 0x5eed;

// One run's stream and layout.
struct Shape {
  int depth = 4;
  size_t frame_bytes = 16;
  int n = 3;
  int environments = 1;  // sharing each lease
  uint32_t leases = 1;
  uint64_t capacity = 256;
  uint32_t batch_size = 8;
  int episode_steps = 12;  // mean episode length
  uint32_t seed = 1;
};

inline std::string Describe(const Shape& s) {
  return absl::StrCat("depth ", s.depth, ", frames of ", s.frame_bytes, " bytes, n ", s.n, ", ",
                      s.environments, " environments, ", s.leases, " leases of ",
                      s.capacity / s.leases, " slots, seed ", s.seed);
}

inline void PrintTo(const Shape& s, std::ostream* os) { *os << Describe(s); }

inline std::string U8Spec(const Shape& s) {
  return absl::StrCat("env=Frames obs=", s.depth * s.frame_bytes, "u8 act=", kActions,
                      " nstep=", s.n, " gamma=0.9");
}

inline LayoutConfig FramesConfig(const Shape& s) {
  LayoutConfig c;
  c.capacity = s.capacity;
  c.leases = s.leases;
  c.slot_size = static_cast<uint32_t>(protocol::RoundUp(
      sizeof(protocol::SlotHeader) + protocol::FrameRecordBytes(s.depth, s.frame_bytes),
      protocol::kSlotAlignment));
  c.batch_size = s.batch_size;
  c.staging_depth = 2;
  c.param_bytes = 256;
  c.observation_size = static_cast<uint32_t>(s.depth * s.frame_bytes);
  c.num_actions = kActions;
  c.frame_stack = static_cast<uint32_t>(s.depth);
  EXPECT_TRUE(c.set_spec(U8Spec(s)).ok());
  return c;
}

inline ReplayCoreOptions CoreOptions(uint64_t seed) {
  ReplayCoreOptions o;
  o.memory.alpha = 0.6;
  o.memory.seed = seed;
  o.sampler.rate_limiter.min_size_to_sample = 1;
  o.sampler.beta = replay::BetaSchedule{0.4, 1.0, 1000};
  o.incarnation = kIncarnation;
  return o;
}

// What the model needs of one record.
struct RecordFacts {
  bool has_frame = false;
  bool has_transition = false;
  std::vector<uint16_t> refs;  // observation's then next observation's
};

inline RecordFacts FactsOf(absl::Span<const uint8_t> bytes, size_t frame_bytes) {
  protocol::FrameRecordView view;
  const absl::Status s = protocol::DecodeFrameRecord(bytes, frame_bytes, &view);
  EXPECT_TRUE(s.ok()) << s;
  RecordFacts f;
  f.has_frame = view.has_frame();
  f.has_transition = view.has_transition();
  if (f.has_transition) {
    f.refs.assign(view.observation_refs, view.observation_refs + view.header.depth);
    f.refs.insert(f.refs.end(), view.next_refs, view.next_refs + view.header.depth);
  }
  return f;
}

// How a record was stored.
enum class Fate {
  kWritten,
  // Never written: its slot's commit word was set to the sequence a lap
  // later, as an actor that skipped it would leave it.
  kSkipped,
};

// Plays a ReplayCore's actors (one FrameRecorder per lease) and learner,
// and keeps the model the core is checked against after every step. With
// `forward` (the hybrid placement) each staged transition leaves the
// memory, and the learner answers every batch with an update of no records.
class FramesHarness {
 public:
  explicit FramesHarness(const Shape& shape, bool learner_cache = false,
                         protocol::ForwardMode forward = protocol::ForwardMode::kForwardOff)
      : shape_(shape), forward_(forward), random_(shape.seed) {
    regions_ = ReplayRegions::Create(FramesConfig(shape)).value();
    ReplayCoreOptions options = CoreOptions(shape.seed);
    options.sampler.forward = forward;
    auto core = ReplayCore::Create(regions_.get(), options, &clock_);
    EXPECT_TRUE(core.ok()) << core.status();
    core_ = std::move(core).value();
    lease_slots_ = protocol::LeaseSlots(config());
    for (uint32_t l = 0; l < shape.leases; ++l) {
      leases_.push_back(std::make_unique<Lease>(shape));
    }
    if (learner_cache) core_->NoteLearnerConnected(true);
  }

  const LayoutConfig& config() const { return regions_->config(); }
  ReplayCore& core() { return *core_; }
  uint64_t lease_slots() const { return lease_slots_; }
  // The records lease `l` has written or skipped: its next sequence.
  uint64_t next_sequence(uint32_t l) const { return leases_[l]->next_write; }
  // The next record lease `l` will store, made if need be.
  const RecordFacts& upcoming(uint32_t l) {
    Lease& lease = *leases_[l];
    MakeUntil(lease, lease.next_write + 1);
    return lease.facts[lease.next_write];
  }
  // Lease `l`'s next records come from stepping `environments`, in order
  // (an episode's start where one is not in an episode).
  void Schedule(uint32_t l, std::initializer_list<int> environments) {
    leases_[l]->schedule.insert(leases_[l]->schedule.end(), environments);
  }
  // Room left in lease `l`'s window (the whole lease).
  uint64_t room(uint32_t l) const {
    const uint64_t cursor = LoadAcquire(&regions_->lease_line(l)->ingest_cursor);
    return cursor + lease_slots_ - leases_[l]->next_write;
  }

  // Writes the next `count` records of lease `l` into their slots and
  // commits them. REQUIRES: count <= room(l).
  void Write(uint32_t l, uint64_t count) {
    Lease& lease = *leases_[l];
    ASSERT_LE(count, room(l));
    MakeUntil(lease, lease.next_write + count);
    ASSERT_GE(lease.bytes.size(), lease.next_write + count);
    for (uint64_t k = 0; k < count; ++k) Store(l, lease.bytes[lease.next_write]);
  }

  // The next record of lease `l` is not written: the commit word of its
  // slot names the sequence a lap later.
  void Skip(uint32_t l) {
    Lease& lease = *leases_[l];
    ASSERT_GE(room(l), 1u);
    MakeUntil(lease, lease.next_write + 1);
    const uint64_t q = lease.next_write++;
    lease.fate[q] = Fate::kSkipped;
    StoreRelease(&regions_->commits()[protocol::LeaseSlotIndex(config(), l, q)],
                 protocol::CommitValue(q + lease_slots_));
    ++skipped_;
  }

  // Writes the next record of lease `l`, which carries a transition, with
  // reference `k` (of its 2D) changed to `distance`.
  void WriteWithReference(uint32_t l, int k, uint16_t distance) {
    Lease& lease = *leases_[l];
    ASSERT_GE(room(l), 1u);
    MakeUntil(lease, lease.next_write + 1);
    const uint64_t q = lease.next_write;
    ASSERT_TRUE(lease.facts[q].has_transition);
    std::vector<uint8_t> bytes = lease.bytes[q];
    std::memcpy(&bytes[protocol::kFrameRecordHeaderBytes + 2 * k], &distance, sizeof(distance));
    lease.bytes[q] = bytes;
    lease.facts[q] = FactsOf(bytes, shape_.frame_bytes);
    Store(l, bytes);
  }

  // Writes up to `count` more records of every lease, a random number each
  // (within its window).
  void WriteSome(uint64_t count) {
    for (uint32_t l = 0; l < shape_.leases; ++l) {
      const uint64_t most = std::min(count, room(l));
      if (most > 0) Write(l, 1 + random_() % most);
    }
  }

  // Steps the core once, as its loop does, then checks that it handled
  // every sequence written or skipped, that the memory and the counters are
  // the model's, and every batch it staged; answers each batch with a
  // priority update, so the next step can stage in its place.
  void Step() {
    uint64_t expected_handled = 0;
    for (uint32_t l = 0; l < shape_.leases; ++l) expected_handled += Admit(l);
    const StepResult r = core_->Step();
    EXPECT_EQ(r.ingested, expected_handled);
    for (uint32_t l = 0; l < shape_.leases; ++l) {
      EXPECT_EQ(LoadAcquire(&regions_->lease_line(l)->ingest_cursor), leases_[l]->next_write);
    }
    // The batches first: a forwarded transition left the memory when staged.
    CheckBatches();
    CheckMemory();
    CheckCounters();
  }

  // Saves a checkpoint at `path` and restores it into the core, as a
  // restarted server would: a new epoch whose batches count from 0 again,
  // and a learner that holds nothing. The model is unchanged.
  void SaveAndRestore(const std::string& path) {
    ASSERT_TRUE(core_->SaveCheckpoint(path).ok());
    ASSERT_TRUE(core_->RestoreCheckpoint(path).ok());
    epoch_ = core_->epoch();
    next_batch_ = 0;
    learner_holds_.clear();
  }

  // Counts over the run.
  uint64_t inserted() const { return inserted_; }
  uint64_t missing() const { return missing_; }
  uint64_t frame_only() const { return frame_only_; }
  uint64_t batches_checked() const { return batches_checked_; }
  uint64_t transitions_staged() const { return transitions_staged_; }
  uint64_t records_staged() const { return records_staged_; }
  uint64_t references_staged() const { return references_staged_; }
  // Transitions forwarded (staged once each), and the most times any one
  // record's slot was copied into a batch.
  uint64_t forwarded() const { return forwarded_.size(); }
  int most_copies() const { return most_copies_; }
  uint64_t frames_evicted() const { return Stats().frames_evicted; }

  protocol::StatsBlock Stats() const {
    core_->PublishStats();
    protocol::StatsBlock s;
    CopyFromShared(&s, regions_->stats(), sizeof(s));
    return s;
  }

  // True when the memory holds (lease l, sequence q) now, by the model.
  bool ModelHolds(uint32_t l, uint64_t q) const {
    const Lease& lease = *leases_[l];
    const uint64_t end = lease.next_write;
    const uint64_t tail = end > lease_slots_ ? end - lease_slots_ : 0;
    if (q < tail || q >= end || !lease.accepted[q]) return false;
    if (forwarded_.count({l, q}) > 0) return false;  // left when forwarded
    for (const uint16_t d : lease.facts[q].refs) {
      if (q - d < tail) return false;  // overwritten since
    }
    return true;
  }

 private:
  struct Lease {
    explicit Lease(const Shape& s)
        : recorder(rl::FrameRecorderOptions{{s.n, 0.9}, s.depth, s.frame_bytes, s.environments}),
          in_episode(s.environments, false) {}
    rl::FrameRecorder recorder;
    std::vector<bool> in_episode;
    // Every record made, by sequence, as stored (changed references
    // included), its facts and its fate; whether ingest inserted it.
    std::vector<std::vector<uint8_t>> bytes;
    std::vector<RecordFacts> facts;
    std::vector<Fate> fate;
    std::vector<bool> accepted;
    // The environments to step next, in order; then random ones.
    std::deque<int> schedule;
    uint64_t next_write = 0;  // written or skipped below
    uint64_t handled = 0;     // the model's ingest cursor
  };

  // One environment step (or an episode's start) of a random environment
  // of `lease`, until `count` records are made.
  void MakeUntil(Lease& lease, uint64_t count) {
    std::vector<uint8_t> frame(shape_.frame_bytes);
    while (lease.bytes.size() < count) {
      int e = static_cast<int>(random_() % shape_.environments);
      if (!lease.schedule.empty()) {
        e = lease.schedule.front();
        lease.schedule.pop_front();
      }
      for (uint8_t& b : frame) b = static_cast<uint8_t>(random_());
      std::vector<rl::FrameRecorder::Record> out;
      if (!lease.in_episode[e]) {
        ASSERT_TRUE(lease.recorder.BeginEpisode(e, frame, &out).ok());
        lease.in_episode[e] = true;
      } else {
        const int action = static_cast<int>(random_() % kActions);
        const double reward = static_cast<double>(random_() % 41) / 4.0 - 5.0;
        const uint32_t end = random_() % (2 * shape_.episode_steps);
        const bool terminated = end == 0, truncated = end == 1;
        ASSERT_TRUE(
            lease.recorder.AddStep(e, action, reward, frame, terminated, truncated, &out).ok());
        if (terminated || truncated) lease.in_episode[e] = false;
      }
      for (rl::FrameRecorder::Record& r : out) {
        ASSERT_EQ(r.sequence, lease.bytes.size());
        lease.facts.push_back(FactsOf(r.bytes, shape_.frame_bytes));
        lease.bytes.push_back(std::move(r.bytes));
        lease.fate.push_back(Fate::kWritten);
        lease.accepted.push_back(false);
      }
    }
  }

  // Seals `bytes` into the slot of lease l's next sequence and commits it.
  void Store(uint32_t l, const std::vector<uint8_t>& bytes) {
    Lease& lease = *leases_[l];
    const uint64_t q = lease.next_write++;
    const float priority = 0.5f + static_cast<float>(random_() % 8) / 4.0f;
    testing::WriteLeaseSlotPayload(*regions_, l, q, priority, bytes);
    testing::CommitLease(*regions_, l, q);
  }

  // The model of one ingest walk of lease `l` over what was written since
  // the last: first the slots whose new sequence is being written are
  // evicted ahead (every one written from the cursor up to the first
  // skipped), then handling sequence q overwrites q - L. A transition is
  // inserted when every record it refers to is written, has a frame and is
  // not overwritten yet. Returns the sequences handled.
  uint64_t Admit(uint32_t l) {
    Lease& lease = *leases_[l];
    const uint64_t first = lease.handled, end = lease.next_write;
    uint64_t evicted_end = first;
    while (evicted_end < end && lease.fate[evicted_end] == Fate::kWritten) ++evicted_end;
    for (uint64_t q = first; q < end; ++q) {
      if (lease.fate[q] != Fate::kWritten) continue;  // overrun
      const RecordFacts& f = lease.facts[q];
      if (!f.has_transition) {
        ++frame_only_;
        continue;
      }
      // Records below this are overwritten (or evicted ahead) by now.
      const uint64_t overwritten = std::max(evicted_end, q + 1);
      const uint64_t tail = overwritten > lease_slots_ ? overwritten - lease_slots_ : 0;
      bool held = true;
      for (const uint16_t d : f.refs) {
        if (d > q) {
          held = false;
          break;
        }
        const uint64_t s = q - d;
        held = s >= tail && lease.fate[s] == Fate::kWritten && lease.facts[s].has_frame;
        if (!held) break;
      }
      lease.accepted[q] = held;
      ++(held ? inserted_ : missing_);
    }
    lease.handled = end;
    return end - first;
  }

  void CheckMemory() {
    const replay::ReplayMemory& memory = core_->memory();
    uint64_t held = 0;
    for (uint32_t l = 0; l < shape_.leases; ++l) {
      const Lease& lease = *leases_[l];
      const uint64_t end = lease.next_write;
      for (uint64_t q = end > lease_slots_ ? end - lease_slots_ : 0; q < end; ++q) {
        const uint64_t index = protocol::LeaseSlotIndex(config(), l, q);
        if (ModelHolds(l, q)) {
          ++held;
          EXPECT_EQ(memory.sequence(index), q) << "lease " << l << " sequence " << q;
        } else {
          EXPECT_FALSE(memory.valid(index))
              << "lease " << l << " slot " << index << " holds sequence " << memory.sequence(index)
              << "; the model has sequence " << q << " there, not a transition to hold";
        }
      }
    }
    EXPECT_EQ(memory.size(), held);
  }

  void CheckCounters() {
    const protocol::StatsBlock s = Stats();
    EXPECT_EQ(s.inserted, inserted_);
    EXPECT_EQ(s.frames_missing, missing_);
    EXPECT_EQ(s.frame_only_records, frame_only_);
    // Every inserted transition that is gone was forwarded or left when a
    // record it needs was overwritten: its oldest record goes before its
    // own slot does.
    EXPECT_EQ(s.frames_evicted, inserted_ - core_->memory().size() - forwarded_.size());
    EXPECT_EQ(s.transitions_invalid, 0u);
    EXPECT_EQ(s.torn_slots, 0u);
    EXPECT_EQ(s.overrun_slots, skipped_);
    EXPECT_EQ(s.sample_copy_rejects, 0u);
  }

  // The record of (lease, sequence) in the writer's own store: empty when
  // it was never written.
  absl::Span<const uint8_t> Written(uint32_t l, uint64_t q) const {
    const Lease& lease = *leases_[l];
    if (q >= lease.next_write || lease.fate[q] != Fate::kWritten) return {};
    return lease.bytes[q];
  }

  void CheckBatches() {
    const uint64_t staged = LoadAcquire(&regions_->control()->server.batches_staged);
    for (; next_batch_ < staged; ++next_batch_) {
      SCOPED_TRACE(absl::StrCat("batch ", next_batch_));
      CheckBatch(next_batch_);
      ++batches_checked_;
    }
  }

  void CheckBatch(uint64_t n) {
    const LayoutConfig& c = config();
    const std::vector<uint8_t> image = testing::ReadStagingSlot(*regions_, n);
    ASSERT_TRUE(protocol::CheckStagedBatch(c, image.data(), n, epoch_).ok());
    BatchHeader header;
    std::memcpy(&header, image.data(), sizeof(header));
    ASSERT_GE(header.count, 1u);
    ASSERT_LE(header.count, c.batch_size);
    const uint32_t entries = header.count + header.record_count;
    ASSERT_LE(entries, protocol::StagingEntryCapacity(c));
    std::vector<BatchEntry> entry(entries);
    std::memcpy(entry.data(), image.data() + protocol::StagingEntriesOffset(c),
                entries * sizeof(BatchEntry));

    // Each entry's record: its copied slot, or the copy the learner got
    // before (a reference). Keyed by (lease, sequence), as records refer to
    // each other within their lease.
    std::map<std::pair<uint32_t, uint64_t>, std::vector<uint8_t>> in_batch;
    std::set<std::pair<uint64_t, uint64_t>> transitions;  // (index, sequence)
    uint32_t copied = 0;
    for (uint32_t k = 0; k < entries; ++k) {
      const uint64_t index = protocol::EntryIndex(entry[k]);
      const uint64_t q = entry[k].slot_sequence;
      const auto l = static_cast<uint32_t>(index / lease_slots_);
      ASSERT_LT(l, shape_.leases);
      ASSERT_EQ(protocol::LeaseSlotIndex(c, l, q), index);
      std::vector<uint8_t> record;
      if (protocol::EntryCached(entry[k])) {
        ++references_staged_;
        const auto held = learner_holds_.find(index);
        ASSERT_TRUE(held != learner_holds_.end() && held->second.first == q)
            << "entry " << k << " refers to slot " << index << " sequence " << q
            << ", which the learner never received";
        record = held->second.second;
      } else {
        ASSERT_LT(copied, header.payload_count);
        const uint8_t* slot =
            image.data() + protocol::StagingPayloadsOffset(c) + uint64_t{copied++} * c.slot_size;
        ASSERT_EQ(protocol::VerifySlot(slot, c.slot_size, q), protocol::SlotCheck::kOk);
        protocol::SlotHeader slot_header;
        std::memcpy(&slot_header, slot, sizeof(slot_header));
        const uint8_t* payload = slot + sizeof(protocol::SlotHeader);
        record.assign(payload, payload + slot_header.payload_length);
        learner_holds_[index] = {q, record};
        most_copies_ = std::max(most_copies_, ++copies_[{l, q}]);
      }
      // Byte for byte what the actor wrote there.
      const absl::Span<const uint8_t> written = Written(l, q);
      ASSERT_FALSE(written.empty()) << "lease " << l << " sequence " << q << " was never written";
      ASSERT_TRUE(std::equal(record.begin(), record.end(), written.begin(), written.end()));
      in_batch[{l, q}] = std::move(record);
      if (k < header.count) {
        EXPECT_GT(entry[k].priority_alpha, 0.0f);
        EXPECT_TRUE(ModelHolds(l, q)) << "transition " << q << " of lease " << l
                                      << " staged though a record it needs is not held";
        transitions.insert({index, q});
        if (forward_ != protocol::ForwardMode::kForwardOff) {
          EXPECT_EQ(entry[k].priority_alpha, 1.0f);
          EXPECT_TRUE(forwarded_.insert({l, q}).second)
              << "transition " << q << " of lease " << l << " forwarded twice";
        }
      } else {
        EXPECT_EQ(entry[k].priority_alpha, 0.0f);
      }
    }
    EXPECT_EQ(copied, header.payload_count);

    // The records after the transitions: exactly the distinct others they
    // need, each once.
    std::set<std::pair<uint64_t, uint64_t>> needed;
    for (uint32_t k = 0; k < header.count; ++k) {
      const uint64_t index = protocol::EntryIndex(entry[k]);
      const auto l = static_cast<uint32_t>(index / lease_slots_);
      const uint64_t q = entry[k].slot_sequence;
      for (const uint16_t d : leases_[l]->facts[q].refs) {
        if (d == 0) continue;
        const std::pair<uint64_t, uint64_t> record{protocol::LeaseSlotIndex(c, l, q - d), q - d};
        if (transitions.count(record) == 0) needed.insert(record);
      }
    }
    // Listed: needed ones, each once. Not listed: held by the learner.
    std::set<std::pair<uint64_t, uint64_t>> records;
    for (uint32_t k = header.count; k < entries; ++k) {
      const bool first =
          records.insert({protocol::EntryIndex(entry[k]), entry[k].slot_sequence}).second;
      EXPECT_TRUE(first) << "record " << entry[k].slot_sequence << " staged twice";
      EXPECT_EQ(needed.count({protocol::EntryIndex(entry[k]), entry[k].slot_sequence}), 1u)
          << "record " << entry[k].slot_sequence << " staged though no transition needs it";
    }
    for (const auto& [index, q] : needed) {
      if (records.count({index, q}) > 0) continue;
      const auto held = learner_holds_.find(index);
      EXPECT_TRUE(held != learner_holds_.end() && held->second.first == q)
          << "record " << q << " in slot " << index << " neither staged nor held by the learner";
    }
    EXPECT_EQ(header.record_count, records.size());

    // Each transition's stacks from the batch alone, against the writer's.
    const size_t stack_bytes = static_cast<size_t>(shape_.depth) * shape_.frame_bytes;
    std::vector<uint8_t> observation(stack_bytes), next(stack_bytes);
    std::vector<uint8_t> want_observation(stack_bytes), want_next(stack_bytes);
    std::vector<protocol::PriorityRecord> update;
    for (uint32_t k = 0; k < header.count; ++k) {
      const uint64_t index = protocol::EntryIndex(entry[k]);
      const auto l = static_cast<uint32_t>(index / lease_slots_);
      const uint64_t q = entry[k].slot_sequence;
      // From the batch, else from what the learner holds.
      const auto from_batch = [&](uint64_t s) -> absl::Span<const uint8_t> {
        const auto it = in_batch.find({l, s});
        if (it != in_batch.end()) return absl::MakeConstSpan(it->second);
        const auto held = learner_holds_.find(protocol::LeaseSlotIndex(c, l, s));
        if (held == learner_holds_.end() || held->second.first != s) return {};
        return absl::MakeConstSpan(held->second.second);
      };
      const auto from_writer = [&](uint64_t s) { return Written(l, s); };
      const absl::StatusOr<rl::StackedTransition> got = rl::AssembleStacks(
          q, shape_.frame_bytes, from_batch, absl::MakeSpan(observation), absl::MakeSpan(next));
      ASSERT_TRUE(got.ok()) << got.status();
      const absl::StatusOr<rl::StackedTransition> want =
          rl::AssembleStacks(q, shape_.frame_bytes, from_writer, absl::MakeSpan(want_observation),
                             absl::MakeSpan(want_next));
      ASSERT_TRUE(want.ok()) << want.status();
      EXPECT_EQ(observation, want_observation) << "transition " << q << " of lease " << l;
      EXPECT_EQ(next, want_next) << "transition " << q << " of lease " << l;
      EXPECT_EQ(got->action, want->action);
      EXPECT_EQ(got->reward, want->reward);
      EXPECT_EQ(got->discount, want->discount);
      EXPECT_EQ(got->done, want->done);
      EXPECT_EQ(got->steps, want->steps);
      update.push_back(
          {q, static_cast<uint32_t>(index), 0.25f + static_cast<float>(random_() % 16) / 4.0f});
    }
    transitions_staged_ += header.count;
    records_staged_ += header.record_count;
    if (forward_ != protocol::ForwardMode::kForwardOff) update.clear();
    testing::WriteUpdate(*regions_, n, epoch_, update);
  }

  const Shape shape_;
  const protocol::ForwardMode forward_;
  std::mt19937 random_;
  FakeClock clock_;
  std::unique_ptr<ReplayRegions> regions_;
  std::unique_ptr<ReplayCore> core_;
  uint64_t lease_slots_ = 0;
  std::vector<std::unique_ptr<Lease>> leases_;
  // The learner's copies, by slot index: (sequence, record).
  std::map<uint64_t, std::pair<uint64_t, std::vector<uint8_t>>> learner_holds_;
  uint64_t next_batch_ = 0;
  uint64_t epoch_ = kEpoch;
  uint64_t skipped_ = 0;
  uint64_t inserted_ = 0, missing_ = 0, frame_only_ = 0;
  uint64_t batches_checked_ = 0, transitions_staged_ = 0, records_staged_ = 0;
  uint64_t references_staged_ = 0;
  std::set<std::pair<uint32_t, uint64_t>> forwarded_;  // (lease, sequence)
  std::map<std::pair<uint32_t, uint64_t>, int> copies_;
  int most_copies_ = 0;
};

}  // namespace dreplay::server::frames_testing

#endif  // DREPLAY_REPLAY_SERVER_FRAMES_HARNESS_H_
