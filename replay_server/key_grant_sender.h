// Copyright dreplay authors.
//
// key_grant_sender.h: how the server binds a client's windows and WRITEs
// its key grant (protocol/key_grant.h), with one registration for every
// grant.
//
//   ASSIGN_OR_RETURN(auto sender, KeyGrantSender::Create(provider, max_clients));
//   ...at an accept, on the accept thread:
//   ASSIGN_OR_RETURN(KeyGrantSender::Slot slot, sender->Take());
//   ASSIGN_OR_RETURN(protocol::RegionDirectory granted,
//                    sender->BindWindows(qp, accepted, bind));
//   *sender->message(slot) = protocol::MakeKeyGrant(token, hello, granted);
//   RETURN_IF_ERROR(sender->Send(qp, slot, hello.grant, deadline));
//   ...when the client's queue pair is destroyed: sender->Release(slot).
//
// The grants live in one buffer of `slots` KeyGrantMessages, registered
// once at Create (a registration per client costs the provider a region
// table update, and at 1,024 clients the server's accept rate). A slot is
// the source of a client's grant WRITEs; it is released only after that
// client's queue pair is gone, so no WRITE still reads it when the next
// client's grant is written there.
//
// Bounded posting: a client's windows and the grant take up to
// kNumRegionKinds binds (ibverbs binds are send-queue entries) and two
// WRITEs. A queue pair whose send queue holds fewer is not refused: when the
// send queue is full (kResourceExhausted), BindWindows and Send poll the
// queue pair, which retires completed entries, and try again until the
// deadline. On the soft provider binds take no send-queue entry.
//
// Thread safety: none; the accept thread owns the sender. It outlives every
// queue pair that WRITEs from it (the server destroys its clients first).

#ifndef DREPLAY_REPLAY_SERVER_KEY_GRANT_SENDER_H_
#define DREPLAY_REPLAY_SERVER_KEY_GRANT_SENDER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "protocol/handshake.h"
#include "protocol/key_grant.h"
#include "verbs/verbs.h"

namespace dreplay::server {

class KeyGrantSender {
 public:
  using Slot = uint32_t;

  // One registered buffer of `slots` grants (slots >= 1); the provider's
  // status when it cannot register it.
  static absl::StatusOr<std::unique_ptr<KeyGrantSender>> Create(verbs::Provider* provider,
                                                                uint32_t slots);
  ~KeyGrantSender();
  KeyGrantSender(const KeyGrantSender&) = delete;
  KeyGrantSender& operator=(const KeyGrantSender&) = delete;

  // A free slot; kResourceExhausted when all `slots` are taken.
  absl::StatusOr<Slot> Take();
  // Returns `slot`. REQUIRES: taken, and the queue pair that WRITEs from it
  // is destroyed.
  void Release(Slot slot);
  uint32_t free_slots() const { return static_cast<uint32_t>(free_.size()); }

  // The grant message of `slot`, to be filled before Send.
  protocol::KeyGrantMessage* message(Slot slot);

  // Which region, range and rights to bind for one region kind of
  // `accepted` (the caller's registration and access rule).
  struct Bind {
    const verbs::MemoryRegion* mr = nullptr;
    uint64_t offset = 0;  // within mr
    uint32_t access = 0;
  };
  using BindFor = std::function<absl::StatusOr<Bind>(protocol::RegionKind kind)>;

  // Binds a window on `qp` for every region `accepted` has and returns
  // `accepted` with their keys. Waits for send-queue room (see the file
  // comment) until `deadline`: kDeadlineExceeded then; the queue pair's or
  // the provider's status for anything else.
  absl::StatusOr<protocol::RegionDirectory> BindWindows(verbs::QueuePair* qp,
                                                        const protocol::RegionDirectory& accepted,
                                                        const BindFor& bind_for,
                                                        absl::Time deadline);

  // WRITEs slot's message into the client's grant region `grant` (fenced
  // after the binds), then its commit word, unsignaled: a failure completes
  // and fails the queue pair. Waits for room as BindWindows does.
  absl::Status Send(verbs::QueuePair* qp, Slot slot, const protocol::WireRegion& grant,
                    absl::Time deadline);

 private:
  KeyGrantSender() = default;

  std::unique_ptr<protocol::KeyGrantMessage[]> messages_;
  std::unique_ptr<verbs::MemoryRegion> mr_;  // over messages_; goes first
  std::vector<Slot> free_;
  std::vector<bool> taken_;
};

// Posts `wrs` on `qp` in order, as many at a time as its send queue takes:
// while PostSend says kResourceExhausted, polls `qp` (retiring completed
// entries; a failed completion is returned) and tries again, until
// `deadline` (kDeadlineExceeded). Ordering and fences are kept: the
// requests are posted in order on one queue pair.
absl::Status PostWhenRoom(verbs::QueuePair* qp, const std::vector<verbs::WorkRequest>& wrs,
                          absl::Time deadline);

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_KEY_GRANT_SENDER_H_
