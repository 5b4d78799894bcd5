// Copyright dreplay authors.
//
// regions.h: the memory of every replay region, allocated for one
// LayoutConfig.
//
// ReplayRegions owns one page-aligned, zero-filled buffer per region (see
// protocol/layout.h) and writes the control block's header (magic, version, config).
// It knows nothing of RDMA: the server binary registers these buffers with
// verbs (region(kind) / region_bytes(kind)); the learner placement can
// use a ReplayRegions as its local mirror of the slot ring.
//
// The buffers are shareable memory (verbs/shareable_memory.h), cut where a
// client's window ends, so that the soft provider's same-host transport can
// hand a client on this host exactly its windows: the slot ring in one
// segment per lease, the commit words likewise when a lease's words fill
// whole pages (else one segment: those windows stay on TCP); the control
// block, the leases region, the staging ring and the stats region, which
// every role only READs (protocol::RoleAccess), sealed read-only for peers;
// every other region one segment.
//
// Thread safety: the accessors are const and thread-safe; what is done with
// the memory is governed by the protocols of protocol/README.md.

#ifndef DREPLAY_REPLAY_SERVER_REGIONS_H_
#define DREPLAY_REPLAY_SERVER_REGIONS_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "protocol/layout.h"
#include "verbs/shareable_memory.h"

namespace dreplay::server {

class ReplayRegions {
 public:
  // Validates `config` (InvalidArgument) and allocates every region
  // (ResourceExhausted when the memory cannot be mapped).
  static absl::StatusOr<std::unique_ptr<ReplayRegions>> Create(
      const protocol::LayoutConfig& config);
  // Unmaps the buffers (a same-host peer that mapped some keeps its pages).
  // REQUIRES: nothing (no NIC registration, no thread) uses them any more.
  ~ReplayRegions();
  ReplayRegions(const ReplayRegions&) = delete;
  ReplayRegions& operator=(const ReplayRegions&) = delete;

  const protocol::LayoutConfig& config() const { return config_; }

  // The buffer a region kind is registered from, and its length in bytes.
  // kActors is null / 0 when config.max_actors is 0.
  void* region(protocol::RegionKind kind) const;
  uint64_t region_bytes(protocol::RegionKind kind) const;

  protocol::ControlBlock* control() const {
    return reinterpret_cast<protocol::ControlBlock*>(control_.data);
  }
  // REQUIRES: lease < config.leases.
  protocol::LeaseLine* lease_line(uint32_t lease) const {
    return reinterpret_cast<protocol::LeaseLine*>(leases_.data + protocol::LeaseLineOffset(lease));
  }
  protocol::JournalEntry* journal_entry(uint64_t number) const {
    return reinterpret_cast<protocol::JournalEntry*>(leases_.data +
                                                     protocol::JournalEntryOffset(config_, number));
  }
  uint8_t* slots() const { return slots_.data; }
  uint64_t* commits() const { return reinterpret_cast<uint64_t*>(commits_.data); }
  uint8_t* staging() const { return staging_.data; }
  uint8_t* mailbox() const { return mailbox_.data; }
  uint8_t* params() const { return params_.data; }
  protocol::StatsBlock* stats() const {
    return reinterpret_cast<protocol::StatsBlock*>(stats_.data);
  }
  // Null when config.max_actors is 0.
  uint8_t* actors() const { return actors_.data; }

  // REQUIRES: index < capacity (use SlotIndex() for a sequence number).
  uint8_t* slot(uint64_t index) const { return slots_.data + index * config_.slot_size; }
  uint8_t* staging_slot(uint64_t batch_number) const {
    return staging_.data + protocol::StagingSlotOffset(config_, batch_number);
  }
  uint8_t* mailbox_entry(uint64_t batch_number) const {
    return mailbox_.data + protocol::MailboxEntryOffset(config_, batch_number);
  }

 private:
  struct Buffer {
    verbs::ShareableMemory memory;
    uint8_t* data = nullptr;
    uint64_t bytes = 0;  // the region's length
  };
  // `segment_bytes`: 0 for one segment, else a multiple of the page.
  static absl::Status Map(uint64_t bytes, uint64_t segment_bytes, bool remote_read_only,
                          const char* what, Buffer* out);
  // The buffer a region kind lives in; null for a value outside the enum.
  const Buffer* BufferOf(protocol::RegionKind kind) const;

  explicit ReplayRegions(const protocol::LayoutConfig& config) : config_(config) {}

  const protocol::LayoutConfig config_;
  Buffer control_, leases_, slots_, commits_, staging_, mailbox_, params_, stats_, actors_;
};

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_REGIONS_H_
