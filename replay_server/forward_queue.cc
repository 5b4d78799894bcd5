// Copyright dreplay authors.

#include "replay_server/forward_queue.h"

#include <algorithm>

#include "common/shared_words.h"
#include "glog/logging.h"

namespace dreplay::server {

ForwardQueue::ForwardQueue(const protocol::LayoutConfig& config, uint64_t bound,
                           const uint8_t* leases_region, const protocol::ControlBlock* control)
    : config_(config),
      bound_(bound),
      leases_region_(leases_region),
      control_(control),
      runs_(bound + 1) {
  CHECK_GE(bound, 1u);
}

uint64_t ForwardQueue::JournalEnd() const { return LoadAcquire(&control_->server.journal_end); }

void ForwardQueue::Restart() {
  head_ = 0;
  run_count_ = 0;
  size_ = 0;
  next_entry_ = JournalEnd();
}

void ForwardQueue::Push(const Run& run) {
  if (run_count_ == runs_.size()) DropFront(runs_[head_].count);  // a full ring: the oldest run
  runs_[(head_ + run_count_) % runs_.size()] = run;
  ++run_count_;
  size_ += run.count;
}

void ForwardQueue::DropFront(uint64_t n) {
  while (n > 0) {
    Run& front = runs_[head_];
    const uint64_t take = std::min(n, front.count);
    front.first += take;
    front.count -= take;
    size_ -= take;
    n -= take;
    if (front.count == 0) {
      head_ = (head_ + 1) % runs_.size();
      --run_count_;
    }
  }
}

uint64_t ForwardQueue::Refill() {
  const uint64_t end = JournalEnd();
  if (end < next_entry_) {  // the journal started again lower: from its end
    next_entry_ = end;
  }
  if (end - next_entry_ > protocol::kJournalEntries) {
    journal_entries_lost_ += end - protocol::kJournalEntries - next_entry_;
    next_entry_ = end - protocol::kJournalEntries;
  }
  const uint64_t before = size_;
  uint64_t pushed = 0;
  for (; next_entry_ < end; ++next_entry_) {
    const auto* entry = reinterpret_cast<const protocol::JournalEntry*>(
        leases_region_ + protocol::JournalEntryOffset(config_, next_entry_));
    // This thread wrote the entry: no concurrent writer to guard against.
    if (LoadRelaxed(&entry->number) != next_entry_) {
      ++journal_entries_lost_;
      continue;
    }
    const uint64_t lease_and_count = LoadRelaxed(reinterpret_cast<const uint64_t*>(&entry->lease));
    Run run;
    run.lease = static_cast<uint32_t>(lease_and_count);
    run.count = lease_and_count >> 32;
    run.first = LoadRelaxed(&entry->first_sequence);
    if (run.count == 0) continue;
    Push(run);
    pushed += run.count;
  }
  if (size_ > bound_) DropFront(size_ - bound_);
  return before + pushed - size_;
}

QueuedTransition ForwardQueue::PopFront() {
  DCHECK_GT(size_, 0u);
  Run& front = runs_[head_];
  QueuedTransition t;
  t.sequence = front.first;
  t.index = protocol::LeaseSlotIndex(config_, front.lease, front.first);
  DropFront(1);
  return t;
}

}  // namespace dreplay::server
