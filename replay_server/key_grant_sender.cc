// Copyright dreplay authors.

#include "replay_server/key_grant_sender.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace dreplay::server {
namespace {

// How long a full send queue is left to drain between two tries.
constexpr absl::Duration kRoomPause = absl::Microseconds(50);
constexpr int kPollBatch = 8;

// Retires what `qp` completed; the first failed completion's status.
absl::Status Drain(verbs::QueuePair* qp) {
  verbs::Completion completions[kPollBatch];
  int n;
  while ((n = qp->Poll(absl::MakeSpan(completions))) > 0) {
    for (int i = 0; i < n; ++i) {
      if (!completions[i].ok()) return completions[i].ToStatus();
    }
  }
  if (qp->state() == verbs::QpState::kError) {
    const absl::Status error = qp->error();
    return error.ok() ? absl::UnavailableError("queue pair failed") : error;
  }
  return absl::OkStatus();
}

// Waits for room after a kResourceExhausted: drains `qp`, pauses.
absl::Status WaitForRoom(verbs::QueuePair* qp, absl::Time deadline, absl::string_view what) {
  RETURN_IF_ERROR(Drain(qp));
  if (absl::Now() > deadline) {
    return absl::DeadlineExceededError(absl::StrCat(
        "the send queue (max_send_wr ", qp->max_send_wr(), ") had no room for ", what, " in time"));
  }
  absl::SleepFor(kRoomPause);
  return absl::OkStatus();
}

}  // namespace

absl::Status PostWhenRoom(verbs::QueuePair* qp, const std::vector<verbs::WorkRequest>& wrs,
                          absl::Time deadline) {
  size_t next = 0;
  while (next < wrs.size()) {
    // All that are left at once; when they do not fit, one at a time.
    const absl::Status all = qp->PostSend(absl::MakeConstSpan(wrs).subspan(next));
    if (all.ok()) return absl::OkStatus();
    if (!absl::IsResourceExhausted(all)) return all;
    const absl::Status one = qp->PostSend(absl::MakeConstSpan(&wrs[next], 1));
    if (one.ok()) {
      ++next;
      continue;
    }
    if (!absl::IsResourceExhausted(one)) return one;
    RETURN_IF_ERROR(WaitForRoom(qp, deadline, "a grant WRITE"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<KeyGrantSender>> KeyGrantSender::Create(verbs::Provider* provider,
                                                                       uint32_t slots) {
  if (provider == nullptr) return absl::InvalidArgumentError("KeyGrantSender needs a provider");
  if (slots == 0) return absl::InvalidArgumentError("KeyGrantSender needs at least one slot");
  std::unique_ptr<KeyGrantSender> sender(new KeyGrantSender());
  sender->messages_.reset(new protocol::KeyGrantMessage[slots]());
  ASSIGN_OR_RETURN(sender->mr_, provider->RegisterMemory(sender->messages_.get(),
                                                         sizeof(protocol::KeyGrantMessage) * slots,
                                                         verbs::kLocalWrite));
  sender->taken_.assign(slots, false);
  sender->free_.reserve(slots);
  // Lowest slot first.
  for (uint32_t s = slots; s > 0; --s) sender->free_.push_back(s - 1);
  return sender;
}

KeyGrantSender::~KeyGrantSender() { mr_.reset(); }  // before the memory

absl::StatusOr<KeyGrantSender::Slot> KeyGrantSender::Take() {
  if (free_.empty()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("all ", taken_.size(), " key grant slots are taken"));
  }
  const Slot slot = free_.back();
  free_.pop_back();
  taken_[slot] = true;
  return slot;
}

void KeyGrantSender::Release(Slot slot) {
  CHECK_LT(slot, taken_.size());
  CHECK(taken_[slot]) << "key grant slot " << slot << " released twice";
  taken_[slot] = false;
  free_.push_back(slot);
}

protocol::KeyGrantMessage* KeyGrantSender::message(Slot slot) {
  CHECK_LT(slot, taken_.size());
  return &messages_[slot];
}

absl::StatusOr<protocol::RegionDirectory> KeyGrantSender::BindWindows(
    verbs::QueuePair* qp, const protocol::RegionDirectory& accepted, const BindFor& bind_for,
    absl::Time deadline) {
  protocol::RegionDirectory granted = accepted;
  for (uint32_t k = 0; k < protocol::kNumRegionKinds; ++k) {
    const auto kind = static_cast<protocol::RegionKind>(k);
    if (!accepted.Has(kind)) continue;
    ASSIGN_OR_RETURN(const Bind bind, bind_for(kind));
    const uint64_t length = accepted.Get(kind).length;
    while (true) {
      absl::StatusOr<verbs::RemoteRegion> window =
          qp->BindWindow(*bind.mr, bind.offset, length, bind.access);
      if (window.ok()) {
        granted.regions[k].rkey = window->rkey;
        break;
      }
      if (!absl::IsResourceExhausted(window.status())) return window.status();
      RETURN_IF_ERROR(WaitForRoom(qp, deadline, "a window bind"));
    }
  }
  return granted;
}

absl::Status KeyGrantSender::Send(verbs::QueuePair* qp, Slot slot,
                                  const protocol::WireRegion& grant, absl::Time deadline) {
  protocol::KeyGrantMessage* m = message(slot);
  // The grant, after the binds (fence), then its commit word: RC places the
  // commit after the grant, so a client that sees it can use every key.
  std::vector<verbs::WorkRequest> wrs(2);
  for (verbs::WorkRequest& wr : wrs) {
    wr.opcode = verbs::Opcode::kWrite;
    wr.signaled = false;  // a failure still completes (and fails the queue pair)
    wr.local = mr_.get();
    wr.rkey = grant.rkey;
  }
  wrs[0].fence = true;
  wrs[0].local_addr = m;
  wrs[0].length = protocol::kGrantCommitOffset;
  wrs[0].remote_addr = grant.addr;
  wrs[1].local_addr = &m->commit;
  wrs[1].length = sizeof(uint64_t);
  wrs[1].remote_addr = grant.addr + protocol::kGrantCommitOffset;
  return PostWhenRoom(qp, wrs, deadline);
}

}  // namespace dreplay::server
