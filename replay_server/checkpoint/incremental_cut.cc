// Copyright dreplay authors.

#include "replay_server/checkpoint/incremental_cut.h"

#include <algorithm>
#include <utility>

#include "common/shared_words.h"
#include "glog/logging.h"

namespace dreplay::server {

IncrementalCut::IncrementalCut(const ReplayRegions* regions, replay::ReplayMemory* memory,
                               uint64_t chunk_slots)
    : regions_(regions),
      memory_(memory),
      chunk_slots_(chunk_slots),
      lease_slots_(protocol::LeaseSlots(regions->config())),
      saved_((memory->capacity() + 63) / 64, 0) {
  CHECK_GE(chunk_slots_, 1u);
}

IncrementalCut::~IncrementalCut() {
  if (active_) memory_->set_observer(nullptr);
}

void IncrementalCut::Begin(CheckpointState state, CheckpointCut spare) {
  CHECK(!active_) << "IncrementalCut::Begin while a cut is in progress";
  const protocol::LayoutConfig& c = regions_->config();
  CHECK_EQ(state.lease_cursors.size(), c.leases);
  cut_ = std::move(spare);
  cut_.values.resize(memory_->capacity());
  cut_.sequences.resize(memory_->capacity());
  state.lease_holders.resize(c.leases);
  for (uint32_t l = 0; l < c.leases; ++l) {
    const protocol::LeaseLine* line = regions_->lease_line(l);
    // state (low half) and holder (high half) share one word.
    const uint64_t word = LoadAcquire(reinterpret_cast<const uint64_t*>(&line->state));
    state.lease_holders[l].state = static_cast<uint32_t>(word);
    state.lease_holders[l].actor_id = static_cast<uint32_t>(word >> 32);
    state.lease_holders[l].grants = LoadAcquire(&line->grants);
  }
  cut_.state = std::move(state);
  cut_.memory_options = memory_->options();
  next_ = 0;
  saved_on_change_ = 0;
  active_ = true;
  memory_->set_observer(this);
}

void IncrementalCut::Save(uint64_t i) {
  cut_.sequences[i] = memory_->sequence(i);
  cut_.values[i] = memory_->stored_priority(i);
  saved_[i >> 6] |= uint64_t{1} << (i & 63);
  ++saved_on_change_;
}

void IncrementalCut::BeforeEntryChange(uint64_t index) {
  if (!active_ || index < next_ || Saved(index)) return;
  Save(index);
}

bool IncrementalCut::Step() {
  CHECK(active_);
  const protocol::LayoutConfig& c = regions_->config();
  const uint64_t end = std::min(memory_->capacity(), next_ + chunk_slots_);
  for (uint64_t i = next_; i < end; ++i) {
    if (Saved(i)) {
      saved_[i >> 6] &= ~(uint64_t{1} << (i & 63));  // clear for the next cut
      continue;
    }
    uint64_t sequence = memory_->sequence(i);
    double value = memory_->stored_priority(i);
    const uint64_t lease = i / lease_slots_;
    if (sequence != replay::ReplayMemory::kNoSequence && lease < c.leases &&
        sequence >= cut_.state.lease_cursors[lease]) {
      DLOG(FATAL) << "index " << i << " holds sequence " << sequence << " at or above lease "
                  << lease << "'s cut cursor " << cut_.state.lease_cursors[lease];
      sequence = replay::ReplayMemory::kNoSequence;
      value = 0;
    }
    cut_.sequences[i] = sequence;
    cut_.values[i] = value;
  }
  next_ = end;
  return next_ == memory_->capacity();
}

CheckpointCut IncrementalCut::Finish() {
  CHECK(active_ && next_ == memory_->capacity()) << "IncrementalCut::Finish before the last Step";
  active_ = false;
  memory_->set_observer(nullptr);
  return std::move(cut_);
}

}  // namespace dreplay::server
