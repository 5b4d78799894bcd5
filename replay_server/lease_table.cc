// Copyright dreplay authors.

#include "replay_server/lease_table.h"

#include "absl/strings/str_cat.h"
#include "common/shared_words.h"

namespace dreplay::server {

using protocol::LeaseState;

LeaseTable::LeaseTable(ReplayRegions* regions)
    : regions_(regions), entries_(regions->config().leases) {
  for (uint32_t l = 0; l < entries_.size(); ++l) {
    const protocol::LeaseLine* line = regions_->lease_line(l);
    // state (low half) and holder (high half) share one word.
    const uint64_t word = LoadAcquire(reinterpret_cast<const uint64_t*>(&line->state));
    const auto state = static_cast<LeaseState>(static_cast<uint32_t>(word));
    if (state != LeaseState::kHeld && state != LeaseState::kReleased) continue;
    Entry& e = entries_[l];
    e.state = LeaseState::kReleased;  // no connection holds it yet
    e.actor_id = static_cast<uint32_t>(word >> 32);
    e.grants = LoadAcquire(&line->grants);
    Publish(l);
  }
}

absl::StatusOr<uint32_t> LeaseTable::Acquire(uint32_t actor_id) const {
  const auto n = static_cast<uint32_t>(entries_.size());
  for (uint32_t l = 0; l < n; ++l) {
    const Entry& e = entries_[l];
    if (e.state == LeaseState::kNeverHeld || e.actor_id != actor_id) continue;
    if (e.state == LeaseState::kHeld) {
      return absl::FailedPreconditionError(absl::StrCat("actor ", actor_id, "'s lease ", l,
                                                        " is held by client ", e.client_id,
                                                        " until that connection closes"));
    }
    return l;
  }
  for (LeaseState wanted : {LeaseState::kNeverHeld, LeaseState::kReleased}) {
    for (uint32_t l = 0; l < n; ++l) {
      if (entries_[l].state == wanted) return l;
    }
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("all ", n,
                   " actor leases are held by connected actors (the server's "
                   "--leases bounds them); actor ",
                   actor_id, " gets none"));
}

void LeaseTable::Bind(uint32_t lease, uint32_t actor_id, uint64_t client_id) {
  Entry& e = entries_[lease];
  e.state = LeaseState::kHeld;
  e.actor_id = actor_id;
  e.client_id = client_id;
  e.skipped_laps = 0;  // told to this holder
  ++e.grants;
  Publish(lease);
}

void LeaseTable::Release(uint64_t client_id) {
  for (uint32_t l = 0; l < entries_.size(); ++l) {
    Entry& e = entries_[l];
    if (e.state == LeaseState::kHeld && e.client_id == client_id) {
      e.state = LeaseState::kReleased;
      e.client_id = 0;
      Publish(l);
      return;
    }
  }
}

uint64_t LeaseTable::ResumeSequence(uint32_t lease) const {
  const protocol::LayoutConfig& c = regions_->config();
  const uint64_t cursor = LoadAcquire(&regions_->lease_line(lease)->ingest_cursor);
  const uint64_t end = cursor + protocol::LeaseSlots(c);
  uint64_t q = cursor;
  while (q < end && LoadAcquire(&regions_->commits()[protocol::LeaseSlotIndex(c, lease, q)]) ==
                        protocol::CommitValue(q)) {
    ++q;
  }
  return q;
}

uint32_t LeaseTable::held() const {
  uint32_t n = 0;
  for (const Entry& e : entries_) n += e.state == LeaseState::kHeld ? 1 : 0;
  return n;
}

void LeaseTable::Publish(uint32_t lease) {
  const Entry& e = entries_[lease];
  protocol::LeaseLine* line = regions_->lease_line(lease);
  // state and holder_actor_id share one word (state low, holder high).
  StoreRelease(reinterpret_cast<uint64_t*>(&line->state),
               (uint64_t{e.actor_id} << 32) | static_cast<uint32_t>(e.state));
  StoreRelease(&line->grants, e.grants);
}

}  // namespace dreplay::server
