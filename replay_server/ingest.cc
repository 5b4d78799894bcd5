// Copyright dreplay authors.

#include "replay_server/ingest.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/shared_words.h"

namespace dreplay::server {

absl::Status IngestOptions::Validate() const {
  if (abandon_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ingest abandon_timeout=", absl::FormatDuration(abandon_timeout), " must be >= 0"));
  }
  if (max_per_step == 0) {
    return absl::InvalidArgumentError("ingest max_per_step=0 must be >= 1");
  }
  if (torn_recheck < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ingest torn_recheck=", absl::FormatDuration(torn_recheck), " must be >= 0"));
  }
  return absl::OkStatus();
}

Ingest::Ingest(const protocol::LayoutConfig& config, const IngestOptions& options,
               protocol::ControlBlock* control, const uint8_t* slots, const uint64_t* commits,
               replay::ReplayMemory* memory, ReplayCounters* counters, Clock* clock,
               BucketHistogram* insert_delays)
    : config_(config),
      options_(options),
      control_(control),
      slots_(slots),
      commits_(commits),
      memory_(memory),
      counters_(counters),
      clock_(clock),
      insert_delays_(insert_delays) {}

void Ingest::Restart(uint64_t cursor, uint64_t reserved_before) {
  cursor_ = cursor;
  reserved_before_ = reserved_before;
  evicted_through_ = cursor;
  waiting_for_ = kNotWaiting;
  rechecking_ = kNotWaiting;
  Publish();
}

void Ingest::Publish() { StoreRelease(&control_->server.ingest_cursor, cursor_); }

bool Ingest::Recheck(uint64_t q, uint64_t tail) {
  if (options_.torn_recheck == absl::ZeroDuration()) return false;
  const absl::Time now = clock_->Now();
  if (rechecking_ == kNotWaiting || q >= recheck_tail_) {
    rechecking_ = q;
    recheck_since_ = now;
    recheck_tail_ = tail;
    return true;
  }
  return now - recheck_since_ < options_.torn_recheck;
}

void Ingest::RecordInsertDelay(uint64_t insert_time_ns, int64_t* wall_now_ns) {
  if (insert_delays_ == nullptr || insert_time_ns == 0) return;
  if (*wall_now_ns == 0) *wall_now_ns = absl::ToUnixNanos(clock_->WallNow());
  const int64_t delay_ns = *wall_now_ns - static_cast<int64_t>(insert_time_ns);
  insert_delays_->Record(delay_ns > 0 ? static_cast<double>(delay_ns) * 1e-9 : 0.0);
}

uint64_t Ingest::Step() {
  const uint64_t tail = LoadAcquire(&control_->tail.tail);
  tail_seen_ = tail;
  const uint64_t mask = config_.slot_mask();
  // Evict ahead (see ingest.h). Every sequence from the cursor on is not
  // ingested yet, so a valid occupant of its slot is an older sequence.
  const uint64_t writable_end = std::min(tail, cursor_ + protocol::ActorWindow(config_));
  for (uint64_t s = std::max(evicted_through_, cursor_); s < writable_end; ++s) {
    memory_->Remove(s & mask);
  }
  evicted_through_ = std::max(evicted_through_, writable_end);
  uint64_t handled = 0;
  int64_t wall_now_ns = 0;  // read once, at the first insert
  while (handled < options_.max_per_step && cursor_ < tail) {
    const uint64_t q = cursor_;
    const uint64_t index = q & mask;
    const uint8_t* slot = slots_ + index * config_.slot_size;
    const uint64_t commit = LoadAcquire(&commits_[index]);
    if (commit == protocol::CommitValue(q)) {
      if (protocol::VerifySlot(slot, config_.slot_size, q) == protocol::SlotCheck::kOk) {
        protocol::SlotHeader header;
        std::memcpy(&header, slot, sizeof(header));
        memory_->Insert(index, q, header.initial_priority);
        ++counters_->inserted;
        RecordInsertDelay(header.insert_time_ns, &wall_now_ns);
      } else if (Recheck(q, tail)) {
        break;  // the data may still be on its way: read it again next step
      } else {
        memory_->Remove(index);
        ++counters_->torn_slots;
      }
    } else if (commit > protocol::CommitValue(q)) {
      // A later sequence has been committed into the slot: q was lapped.
      memory_->Remove(index);
      ++counters_->overrun_slots;
    } else if (q < reserved_before_) {
      memory_->Remove(index);
      ++counters_->abandoned_slots;
    } else {
      // One timer covers every sequence reserved when the wait began (those
      // below waiting_tail_): a dead actor's batch of k reservations costs
      // one abandon_timeout, not k of them.
      const absl::Time now = clock_->Now();
      if (waiting_for_ == kNotWaiting || q >= waiting_tail_) {
        waiting_for_ = q;
        waiting_since_ = now;
        waiting_tail_ = tail;
        break;
      }
      if (now - waiting_since_ < options_.abandon_timeout) break;
      memory_->Remove(index);
      ++counters_->abandoned_slots;
    }
    ++cursor_;
    ++handled;
  }
  if (handled > 0) Publish();
  return handled;
}

}  // namespace dreplay::server
