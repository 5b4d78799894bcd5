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

namespace {

void SealPayload(const server::ReplayRegions& regions, uint32_t lease, uint64_t sequence,
                 float priority, absl::Span<const uint8_t> payload, uint32_t actor_id,
                 uint64_t insert_time_ns) {
  const protocol::LayoutConfig& c = regions.config();
  std::vector<uint8_t> image(c.slot_size, 0);
  CHECK(protocol::SealSlot(image.data(), c.slot_size, sequence, actor_id, priority, insert_time_ns,
                           payload.data(), static_cast<uint32_t>(payload.size()))
            .ok());
  CopyToShared(regions.slot(protocol::LeaseSlotIndex(c, lease, sequence)), image.data(),
               c.slot_size);
}

void Seal(const server::ReplayRegions& regions, uint32_t lease, uint64_t sequence, float priority,
          uint32_t payload_length, uint32_t actor_id, uint64_t insert_time_ns) {
  SealPayload(regions, lease, sequence, priority, PayloadFor(sequence, payload_length), actor_id,
              insert_time_ns);
}

}  // namespace

void WriteSlot(const server::ReplayRegions& regions, uint64_t sequence, float priority,
               uint32_t payload_length, uint32_t actor_id, uint64_t insert_time_ns) {
  Seal(regions, 0, sequence, priority, payload_length, actor_id, insert_time_ns);
}

void WriteLeaseSlot(const server::ReplayRegions& regions, uint32_t lease, uint64_t sequence,
                    float priority, uint32_t payload_length) {
  Seal(regions, lease, sequence, priority, payload_length, lease, 0);
}

void WriteLeaseSlotPayload(const server::ReplayRegions& regions, uint32_t lease, uint64_t sequence,
                           float priority, absl::Span<const uint8_t> payload) {
  SealPayload(regions, lease, sequence, priority, payload, lease, 0);
}

void Commit(const server::ReplayRegions& regions, uint64_t sequence) {
  CommitLease(regions, 0, sequence);
}

void CommitLease(const server::ReplayRegions& regions, uint32_t lease, uint64_t sequence) {
  StoreRelease(&regions.commits()[protocol::LeaseSlotIndex(regions.config(), lease, sequence)],
               protocol::CommitValue(sequence));
}

uint64_t Reserve(const server::ReplayRegions& regions, uint64_t count) {
  return ReserveLease(regions, 0, count);
}

uint64_t ReserveLease(const server::ReplayRegions& regions, uint32_t lease, uint64_t count) {
  const protocol::LayoutConfig& c = regions.config();
  auto header = [&](uint64_t q) {
    return reinterpret_cast<protocol::SlotHeader*>(
        regions.slot(protocol::LeaseSlotIndex(c, lease, q)));
  };
  // Taken: the slot names q and is not fresh memory (checksum 0).
  auto taken = [&](uint64_t q) {
    return LoadRelaxed(&header(q)->sequence) == q && LoadRelaxed(&header(q)->checksum) != 0;
  };
  const uint64_t cursor = LoadAcquire(&regions.lease_line(lease)->ingest_cursor);
  uint64_t first = cursor;
  while (first < cursor + protocol::LeaseSlots(c) && taken(first)) ++first;
  for (uint64_t q = first; q < first + count; ++q) {
    StoreRelaxed(&header(q)->sequence, q);
    if (LoadRelaxed(&header(q)->checksum) == 0) StoreRelaxed(&header(q)->checksum, ~uint64_t{0});
  }
  return first;
}

uint64_t Insert(const server::ReplayRegions& regions, float priority, uint32_t payload_length) {
  return InsertLease(regions, 0, priority, payload_length);
}

uint64_t InsertLease(const server::ReplayRegions& regions, uint32_t lease, float priority,
                     uint32_t payload_length) {
  const uint64_t q = ReserveLease(regions, lease, 1);
  Seal(regions, lease, q, priority, payload_length, lease, 0);
  CommitLease(regions, lease, q);
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
