// Copyright dreplay authors.
//
// replay_core_benchmark: throughput of the replay core on plain memory, no
// network. Three phases:
//
//   ingest      the core alone ingests a ring pre-filled with committed slots
//   sample      the core alone stages batches; each batch is answered with a
//               priority update as soon as it is staged (an instant learner)
//   end_to_end  --actors threads insert, one lease each with its own sequence
//               numbers (write the slots, then their commit words, never
//               past the lease's ingest cursor plus the actor window) while
//               the core runs on its own thread and a learner thread reads
//               every batch and answers it; the threads take the
//               --transitions budget from a shared counter, --reserve_chunk
//               at a time
//
//   bazel run -c opt //replay_server:replay_core_benchmark -- --actors=4

#include <atomic>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/shared_words.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "replay_server/regions.h"
#include "replay_server/replay_core.h"

DEFINE_uint64(capacity, 1 << 20, "slots in the ring (power of two)");
DEFINE_uint64(actor_window, 0, "sequences actors may run ahead of ingest (0: capacity / 4)");
DEFINE_uint32(payload, 128, "bytes per transition");
DEFINE_uint32(batch, 256, "batch size");
DEFINE_uint32(depth, 8, "staging depth");
DEFINE_int32(actors, 4, "actor threads in the end-to-end phase");
DEFINE_uint64(transitions, 4'000'000, "transitions inserted in the end-to-end phase");
DEFINE_uint32(reserve_chunk, 32, "sequences an actor writes per share of the budget it takes");
DEFINE_int32(seconds, 2, "length of the sample phase");

namespace dreplay::server {
namespace {

protocol::LayoutConfig Config() {
  protocol::LayoutConfig c;
  c.capacity = FLAGS_capacity;
  c.slot_size = static_cast<uint32_t>(
      protocol::RoundUp(sizeof(protocol::SlotHeader) + FLAGS_payload, protocol::kSlotAlignment));
  c.batch_size = FLAGS_batch;
  c.staging_depth = FLAGS_depth;
  c.param_bytes = 4096;
  c.leases = static_cast<uint32_t>(FLAGS_actors);  // one lease per actor thread
  c.actor_window = FLAGS_actor_window != 0 ? FLAGS_actor_window : FLAGS_capacity / 4;
  return c;
}

// An actor's slot write: seal in a private buffer, copy into the ring.
void WriteSlot(const ReplayRegions& r, uint32_t lease, uint64_t q, std::vector<uint8_t>* image,
               const std::vector<uint8_t>& payload) {
  const protocol::LayoutConfig& c = r.config();
  CHECK(protocol::SealSlot(image->data(), c.slot_size, q, 0, static_cast<float>(q % 17) + 0.5f, 0,
                           payload.data(), FLAGS_payload)
            .ok());
  CopyToShared(r.slot(protocol::LeaseSlotIndex(c, lease, q)), image->data(), c.slot_size);
}

void AnswerBatch(const ReplayRegions& r, uint64_t n, uint64_t epoch, std::vector<uint8_t>* image,
                 std::vector<uint8_t>* entry, std::vector<protocol::PriorityRecord>* records) {
  const protocol::LayoutConfig& c = r.config();
  protocol::BatchHeader header;
  std::memcpy(&header, image->data(), sizeof(header));
  records->resize(header.count);
  for (uint32_t k = 0; k < header.count; ++k) {
    protocol::BatchEntry e;
    std::memcpy(
        &e, image->data() + protocol::StagingEntriesOffset(c) + k * sizeof(protocol::BatchEntry),
        sizeof(e));
    (*records)[k] = protocol::PriorityRecord{e.slot_sequence, e.slot_index, 1.0f + (k % 5)};
  }
  // The learner echoes the staged batch's epoch and incarnation.
  CHECK(protocol::EncodePriorityUpdate(c, n, epoch, header.incarnation, *records,
                                       absl::MakeSpan(*entry))
            .ok());
  uint8_t* target = r.mailbox_entry(n);
  CopyToShared(target, entry->data(), protocol::MailboxCommitOffset(c));
  StoreRelease(reinterpret_cast<uint64_t*>(target + protocol::MailboxCommitOffset(c)),
               protocol::BatchCommitValue(n));
}

void IngestPhase() {
  auto regions = ReplayRegions::Create(Config()).value();
  ReplayCoreOptions options;
  options.sampler.rate_limiter.min_size_to_sample = ~uint64_t{0};  // ingest only
  auto core = ReplayCore::Create(regions.get(), options).value();
  const protocol::LayoutConfig& c = regions->config();
  const uint64_t per_lease = protocol::LeaseSlots(c);
  const uint64_t n = per_lease * c.leases;
  std::vector<uint8_t> image(c.slot_size);
  std::vector<uint8_t> payload(FLAGS_payload, 7);
  for (uint32_t l = 0; l < c.leases; ++l) {
    for (uint64_t q = 0; q < per_lease; ++q) {
      WriteSlot(*regions, l, q, &image, payload);
      StoreRelease(&regions->commits()[protocol::LeaseSlotIndex(c, l, q)],
                   protocol::CommitValue(q));
    }
  }
  const absl::Time start = absl::Now();
  while (core->ingest_cursor() < n) core->Step();
  const double s = absl::ToDoubleSeconds(absl::Now() - start);
  std::printf("ingest:     %llu transitions of %u B in %.3f s = %.2f M inserts/s (core alone)\n",
              static_cast<unsigned long long>(n), FLAGS_payload, s, n / s / 1e6);
}

void SamplePhase() {
  auto regions = ReplayRegions::Create(Config()).value();
  ReplayCoreOptions options;
  options.max_batches_per_step = FLAGS_depth;
  auto core = ReplayCore::Create(regions.get(), options).value();
  const protocol::LayoutConfig& c = regions->config();
  std::vector<uint8_t> image(c.slot_size);
  std::vector<uint8_t> payload(FLAGS_payload, 7);
  const uint64_t per_lease = protocol::LeaseSlots(c);
  for (uint32_t l = 0; l < c.leases; ++l) {
    for (uint64_t q = 0; q < per_lease; ++q) {
      WriteSlot(*regions, l, q, &image, payload);
      StoreRelease(&regions->commits()[protocol::LeaseSlotIndex(c, l, q)],
                   protocol::CommitValue(q));
    }
  }
  while (core->ingest_cursor() < per_lease * c.leases) core->Step();
  std::vector<uint8_t> batch(protocol::StagingSlotStride(c));
  std::vector<uint8_t> entry(protocol::MailboxEntryStride(c));
  std::vector<protocol::PriorityRecord> records;
  uint64_t answered = core->sampler().released();
  const uint64_t first_sampled = core->counters().sampled;
  const absl::Time start = absl::Now();
  const absl::Time end = start + absl::Seconds(FLAGS_seconds);
  while (absl::Now() < end) {
    core->Step();
    for (; answered < core->sampler().next_batch(); ++answered) {
      CopyFromShared(batch.data(), regions->staging_slot(answered), batch.size());
      AnswerBatch(*regions, answered, core->epoch(), &batch, &entry, &records);
    }
  }
  const double s = absl::ToDoubleSeconds(absl::Now() - start);
  const uint64_t sampled = core->counters().sampled - first_sampled;
  std::printf(
      "sample:     %.2f M sampled transitions/s at batch %u (core + instant learner, "
      "one thread; %.0f batches/s)\n",
      sampled / s / 1e6, FLAGS_batch, sampled / s / FLAGS_batch);
}

void EndToEndPhase() {
  auto regions = ReplayRegions::Create(Config()).value();
  ReplayCoreOptions options;
  options.max_batches_per_step = FLAGS_depth;
  options.sampler.rate_limiter.min_size_to_sample = FLAGS_batch;
  auto core = ReplayCore::Create(regions.get(), options).value();
  const protocol::LayoutConfig& c = regions->config();
  const uint64_t total = FLAGS_transitions;
  std::atomic<bool> stop_core{false}, stop_learner{false};
  std::atomic<uint64_t> learner_batches{0}, learner_bytes{0};
  std::thread core_thread([&] { core->Run(stop_core); });
  std::thread learner([&] {
    std::vector<uint8_t> batch(protocol::StagingSlotStride(c));
    std::vector<uint8_t> entry(protocol::MailboxEntryStride(c));
    std::vector<protocol::PriorityRecord> records;
    for (uint64_t n = 0; !stop_learner.load(std::memory_order_relaxed);) {
      CopyFromShared(batch.data(), regions->staging_slot(n), batch.size());
      if (!protocol::CheckStagedBatch(c, batch.data(), n, 1).ok()) continue;
      AnswerBatch(*regions, n, 1, &batch, &entry, &records);
      learner_bytes += batch.size();
      ++learner_batches;
      ++n;
    }
  });
  std::atomic<uint64_t> next{0};
  std::atomic<uint64_t> written{0};
  std::vector<std::thread> actors;
  const absl::Time start = absl::Now();
  for (int a = 0; a < FLAGS_actors; ++a) {
    actors.emplace_back([&, a] {
      const auto lease = static_cast<uint32_t>(a);
      std::vector<uint8_t> image(c.slot_size);
      std::vector<uint8_t> payload(FLAGS_payload, 3);
      uint64_t own = 0;  // the lease's next sequence
      while (next.fetch_add(FLAGS_reserve_chunk) < total) {
        const uint64_t first = own;
        own += FLAGS_reserve_chunk;
        for (uint64_t q = first; q < first + FLAGS_reserve_chunk; ++q) {
          while (!protocol::SequenceWritable(
              c, q, LoadAcquire(&regions->lease_line(lease)->ingest_cursor))) {
            std::this_thread::yield();
          }
          WriteSlot(*regions, lease, q, &image, payload);
        }
        for (uint64_t q = first; q < first + FLAGS_reserve_chunk; ++q) {
          StoreRelease(&regions->commits()[protocol::LeaseSlotIndex(c, lease, q)],
                       protocol::CommitValue(q));
        }
      }
      written += own;
    });
  }
  for (std::thread& t : actors) t.join();
  const uint64_t reserved = written.load();
  while (LoadAcquire(&regions->control()->server.ingest_cursor) < reserved) {
    std::this_thread::yield();
  }
  const double s = absl::ToDoubleSeconds(absl::Now() - start);
  const uint64_t batches = learner_batches.load();
  stop_learner = true;
  learner.join();
  stop_core = true;
  core_thread.join();
  const ReplayCounters& k = core->counters();
  std::printf(
      "end_to_end: %d actors, %llu transitions in %.3f s = %.2f M inserts/s; "
      "learner %.2f M sampled transitions/s (%llu batches); torn %llu "
      "overrun %llu copy rejects %llu; %u hardware threads\n",
      FLAGS_actors, static_cast<unsigned long long>(reserved), s, reserved / s / 1e6,
      batches * FLAGS_batch / s / 1e6, static_cast<unsigned long long>(batches),
      static_cast<unsigned long long>(k.torn_slots),
      static_cast<unsigned long long>(k.overrun_slots),
      static_cast<unsigned long long>(k.sample_copy_rejects), std::thread::hardware_concurrency());
}

}  // namespace
}  // namespace dreplay::server

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  dreplay::server::IngestPhase();
  dreplay::server::SamplePhase();
  dreplay::server::EndToEndPhase();
  return 0;
}
