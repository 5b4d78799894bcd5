// Copyright dreplay authors.
//
// shared_path.h: the same-host transport of one soft queue pair
// (provider.h, "Same-host transport"). Both halves of it live here:
//
//  * As requester, it keeps mappings of the peer's memory that the peer
//    granted for keys this side uses, and executes a WRITE or READ that
//    falls wholly inside one of them itself (memcpy), with no responder
//    CPU. The first WRITE or READ with an unknown key asks the peer for it
//    (kShareAsk, wire.h) and goes over TCP meanwhile; a denied key is not
//    asked again. Its completion is held until the link model says the
//    request and its answer would have crossed the link, and completions
//    leave in posting order with those of the TCP path (Poll).
//  * As responder, it answers the peer's asks: a key of this queue pair's
//    windows or of a registered region is granted when its range is made
//    of whole memfd segments (verbs/shareable_memory.h) and the rights fit
//    them (WRITE: any segments; READ only: sealed segments only); the fds
//    go over the Unix socket (shm_link.h), then a kShareGrant frame.
//    Anything else is denied and stays on TCP, where the responder checks
//    every request as before. When a region is deregistered the keys
//    granted under it are revoked (kShareRevoke).
//
// Revocation, so that a same-host peer loses its access exactly when a
// device's peer would: a memory window of a device dies with its queue
// pair, and nothing its peer sends is placed after the queue pair failed
// or was destroyed. Here a peer keeps what it mapped, so the responder
// takes back its own side instead: it grants a segment writable only
// while no other queue pair holds it writable
// (ShareableMemory::ClaimWritable), and when its queue pair fails or is
// destroyed (Revoke) it renews those segments
// (ShareableMemory::RenewClaimed): this process's memory then lies in
// fresh memfds, and whatever the peer still writes through its old
// mappings reaches nobody. Read-only grants cover sealed segments, which
// no peer can write, and are not renewed. And the requester stops using
// its mappings as soon as the peer marks its side closed on the shared
// usage page (ShmLink::MarkClosed, before its TCP close is sent), so a READ
// posted after the peer's queue pair went does not read the old memory.
//
// As requester it maps only what it asked for: a grant for a key with no
// ask outstanding, one that does not cover the request that asked, or one
// larger than kMaxGrantBytes (or past kMaxMappedBytes in all) is ignored,
// and a grant's fds must already be there (the responder passes them
// before it sends the grant): nothing waits for them.
//
// What the shared path never takes: atomics, WRITE_WITH_IMM, an operation
// posted while an earlier one of the queue pair is outstanding on TCP (RC
// order: it goes over TCP behind it), one whose local buffer fails its
// check, and everything on a queue pair in the error state.
//
// Thread safety: the methods marked "under the channel's lock" are called
// with the channel's mutex held (from the application or the NIC thread);
// Poll and has_pending only from the application's thread (which also
// posts, under the lock).

#ifndef DREPLAY_VERBS_SOFT_SHARED_PATH_H_
#define DREPLAY_VERBS_SOFT_SHARED_PATH_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/types/span.h"
#include "verbs/options.h"
#include "verbs/soft/completion_queue.h"
#include "verbs/soft/frame_writer.h"
#include "verbs/soft/link.h"
#include "verbs/soft/link_table.h"
#include "verbs/soft/shm_link.h"
#include "verbs/soft/wire.h"
#include "verbs/verbs.h"

namespace dreplay::verbs::soft {

// The most address space one grant may map, and all of one queue pair's
// mappings together.
inline constexpr uint64_t kMaxGrantBytes = uint64_t{1} << 36;   // 64 GiB
inline constexpr uint64_t kMaxMappedBytes = uint64_t{1} << 38;  // 256 GiB
static_assert(kMaxGrantBytes <= kMaxMappedBytes, "one grant must fit the total");

class SharedPath {
 public:
  // `link_out`: this side's direction of the emulated link (null: none),
  // `model` its model; `max_rd_atomic`: the READs that may be in flight on
  // the modelled link at once (a READ beyond them leaves when the oldest
  // answer is back, as with the TCP path's credits). The pointers must
  // outlive the object.
  SharedPath(std::unique_ptr<ShmLink> link, const LinkModel& model,
             std::shared_ptr<SharedLink> link_out, int max_rd_atomic, FrameWriter* writer);
  ~SharedPath();
  SharedPath(const SharedPath&) = delete;
  SharedPath& operator=(const SharedPath&) = delete;

  // ---- Requester (under the channel's lock). ----
  // Executes `wr` on a mapping of the peer's memory when it may (see
  // above; `local_ok`: its local buffer passed its check) and queues its
  // completion; false: it goes over TCP (and its key is asked for when
  // unknown). `barrier`: the completions pushed to the TCP path's queue so
  // far, which leave before this one.
  bool TryExecute(const WorkRequest& wr, bool local_ok, int64_t now, uint64_t barrier);
  // Asks for the key of a WRITE or READ that goes over TCP, when unknown.
  void NoteKey(const WorkRequest& wr);
  // The peer's grant, deny or revoke frame.
  void OnFrame(const FrameHeader& header, const char* payload);
  // The queue pair failed or is going: every mapping of the peer's memory
  // is dropped.
  void DropMappings();

  // ---- Responder (under the channel's lock). ----
  // What the peer's ask needs to know about `rkey`: found is false when it
  // names neither a window of this queue pair nor a region.
  struct KeyRange {
    bool found = false;
    char* addr = nullptr;
    uint64_t length = 0;
    uint32_t access = 0;
    uint32_t region_key = 0;
  };
  // Answers an ask for `rkey`, which the responder resolved to `range`.
  void OnAsk(uint32_t rkey, const KeyRange& range);
  // The region registered as `region_key` is going: revokes the keys
  // granted under it.
  void RevokeRegion(uint32_t region_key);
  // The queue pair failed or is being destroyed: marks this side closed
  // on the usage page (the peer's next operation goes over TCP, where it
  // fails) and renews every segment granted writable on it (see above),
  // so the peer's mappings reach nothing here any more. Idempotent. REQUIRES: no other queue pair
  // WRITEs those segments over TCP meanwhile (their owner's threads may
  // read them).
  void Revoke();

  // ---- Completions (application thread). ----
  // Shared-path completions waiting for their time.
  size_t pending() const { return pending_.size(); }
  // Moves completions of both paths into `out`, in posting order.
  int Poll(CompletionQueue* tcp, absl::Span<Completion> out);
  void ClearPending() { pending_.clear(); }

  // What the peer moved on this side's memory through its mappings.
  QueuePairTraffic PeerShared() const { return link_->PeerShared(); }

 private:
  struct Mapping {
    uint64_t remote_addr;
    uint64_t length;
    uint32_t access;
    char* base;
    size_t mapped;
  };
  struct Pending {
    Completion completion;
    uint64_t barrier;
    int64_t due_ns;
  };

  // The request a key was asked for by, until the grant or denial.
  struct Ask {
    uint64_t remote_addr;
    uint64_t length;
  };

  void OnGrant(const FrameHeader& h, const ShareGrant& grant);
  // Whether a grant for an outstanding `ask` is within bounds.
  bool GrantAcceptable(const FrameHeader& h, const ShareGrant& grant, const Ask& ask) const;
  void Unmap(uint32_t rkey);
  void QueueControl(FrameType type, uint32_t rkey);
  // When the completion of an operation posted at `now` may be released.
  int64_t DueTime(const WorkRequest& wr, int64_t now);

  const std::unique_ptr<ShmLink> link_;
  const std::shared_ptr<SharedLink> link_out_;  // null: no link model
  const int64_t host_path_ns_;                  // what the emulator subtracted from the delay
  LinkEmulator reverse_;                        // the answer's direction, for timing only
  const size_t max_rd_atomic_;
  FrameWriter* const writer_;
  // When the READs still in flight on the modelled link complete, oldest
  // first (non-decreasing).
  std::deque<int64_t> reads_due_;

  // This queue pair's identity as a holder of writable segments
  // (ShareableMemory::ClaimWritable); unique in the process.
  const uint64_t holder_;

  absl::flat_hash_map<uint32_t, Mapping> mappings_;
  uint64_t mapped_bytes_ = 0;                       // of mappings_
  absl::flat_hash_set<uint32_t> asked_;             // asked, denied or revoked
  absl::flat_hash_map<uint32_t, Ask> outstanding_;  // asked, not answered yet
  // Grants refused (not asked for, malformed, oversized, unsafe). A peer
  // may send them at any rate, so their warnings are logged at most once
  // per kIgnoredGrantLogInterval_s for each kind, with this count.
  static constexpr double kIgnoredGrantLogInterval_s = 10;
  uint64_t grants_ignored_ = 0;
  absl::flat_hash_map<uint32_t, uint32_t> granted_;  // key -> its region's key
  std::deque<Pending> pending_;
};

}  // namespace dreplay::verbs::soft

#endif  // DREPLAY_VERBS_SOFT_SHARED_PATH_H_
