// Copyright dreplay authors.

#include "testing/in_memory_peers.h"

#include "common/shared_words.h"
#include "glog/logging.h"

namespace dreplay::testing {

protocol::LayoutConfig SmallConfig() {
  protocol::LayoutConfig c;
  c.capacity = 64;
  c.slot_size = 168;
  c.batch_size = 8;
  c.staging_depth = 2;
  c.param_bytes = 256;
  c.observation_size = 4;
  c.num_actions = 2;
  CHECK(c.set_spec("test f32").ok());
  return c;
}

std::vector<uint8_t> PayloadFor(uint64_t sequence, uint32_t length) {
  std::vector<uint8_t> payload(length);
  for (uint32_t i = 0; i < length; ++i) {
    payload[i] = static_cast<uint8_t>(sequence * 131 + i * 7 + 1);
  }
  return payload;
}

void WriteSlot(const server::ReplayRegions& regions, uint64_t sequence, float priority,
               uint32_t payload_length, uint32_t actor_id, uint64_t insert_time_ns) {
  const protocol::LayoutConfig& c = regions.config();
  std::vector<uint8_t> image(c.slot_size, 0);
  const std::vector<uint8_t> payload = PayloadFor(sequence, payload_length);
  CHECK(protocol::SealSlot(image.data(), c.slot_size, sequence, actor_id, priority, insert_time_ns,
                           payload.data(), payload_length)
            .ok());
  CopyToShared(regions.slot(protocol::SlotIndex(c, sequence)), image.data(), c.slot_size);
}

void Commit(const server::ReplayRegions& regions, uint64_t sequence) {
  StoreRelease(&regions.commits()[protocol::SlotIndex(regions.config(), sequence)],
               protocol::CommitValue(sequence));
}

uint64_t Reserve(const server::ReplayRegions& regions, uint64_t count) {
  return FetchAdd(regions.tail_word(), count);
}

uint64_t Insert(const server::ReplayRegions& regions, float priority, uint32_t payload_length) {
  const uint64_t q = Reserve(regions, 1);
  WriteSlot(regions, q, priority, payload_length);
  Commit(regions, q);
  return q;
}

std::vector<uint8_t> ReadStagingSlot(const server::ReplayRegions& regions, uint64_t batch_number) {
  std::vector<uint8_t> image(protocol::StagingSlotStride(regions.config()));
  CopyFromShared(image.data(), regions.staging_slot(batch_number), image.size());
  return image;
}

void WriteUpdate(const server::ReplayRegions& regions, uint64_t batch_number, uint64_t epoch,
                 absl::Span<const protocol::PriorityRecord> records) {
  WriteUpdate(regions, batch_number, epoch, LoadAcquire(&regions.control()->server.incarnation),
              records);
}

void WriteUpdate(const server::ReplayRegions& regions, uint64_t batch_number, uint64_t epoch,
                 uint64_t incarnation, absl::Span<const protocol::PriorityRecord> records) {
  const protocol::LayoutConfig& c = regions.config();
  std::vector<uint8_t> entry(protocol::MailboxEntryStride(c));
  CHECK(protocol::EncodePriorityUpdate(c, batch_number, epoch, incarnation, records,
                                       absl::MakeSpan(entry))
            .ok());
  uint8_t* target = regions.mailbox_entry(batch_number);
  CopyToShared(target, entry.data(), protocol::MailboxCommitOffset(c));
  StoreRelease(reinterpret_cast<uint64_t*>(target + protocol::MailboxCommitOffset(c)),
               protocol::BatchCommitValue(batch_number));
}

}  // namespace dreplay::testing
