// Copyright dreplay authors.

#include "replay_server/ingest.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/shared_words.h"
#include "glog/logging.h"
#include "protocol/frame_record.h"
#include "protocol/transition_check.h"

namespace dreplay::server {
namespace {

// The spec payloads are checked against: the config's, when it parses.
std::optional<protocol::TransitionSpec> CheckedSpec(const protocol::LayoutConfig& config) {
  const std::string text = config.spec();
  if (text.empty()) return std::nullopt;
  absl::StatusOr<protocol::TransitionSpec> spec = protocol::TransitionSpec::Parse(text);
  if (!spec.ok()) {
    LOG(WARNING) << "transitions are not checked at ingest: " << spec.status().message();
    return std::nullopt;
  }
  return *std::move(spec);
}

}  // namespace

absl::Status IngestOptions::Validate() const {
  if (max_per_step == 0) {
    return absl::InvalidArgumentError("ingest max_per_step=0 must be >= 1");
  }
  if (max_per_lease == 0 || max_per_lease > max_per_step) {
    return absl::InvalidArgumentError(absl::StrCat("ingest max_per_lease=", max_per_lease,
                                                   " must be in [1, max_per_step=", max_per_step,
                                                   "]"));
  }
  if (torn_recheck < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ingest torn_recheck=", absl::FormatDuration(torn_recheck), " must be >= 0"));
  }
  if (!(max_priority > 0) || !std::isfinite(max_priority)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ingest max_priority=", max_priority, " must be finite and > 0"));
  }
  return absl::OkStatus();
}

Ingest::Ingest(const protocol::LayoutConfig& config, const IngestOptions& options,
               protocol::ControlBlock* control, uint8_t* leases, const uint8_t* slots,
               const uint64_t* commits, replay::ReplayMemory* memory, ReplayCounters* counters,
               Clock* clock, BucketHistogram* insert_delays)
    : config_(config),
      options_(options),
      lease_slots_(protocol::LeaseSlots(config)),
      actor_window_(protocol::ActorWindow(config)),
      control_(control),
      leases_region_(leases),
      slots_(slots),
      commits_(commits),
      memory_(memory),
      counters_(counters),
      clock_(clock),
      insert_delays_(insert_delays),
      spec_(CheckedSpec(config)),
      leases_(config.leases),
      run_(memory, options.max_per_lease) {
  if (config.frame_stack > 0) {
    frames_ = std::make_unique<replay::FrameTable>(config.capacity, 2 * config.frame_stack);
  }
}

void Ingest::Restart(absl::Span<const uint64_t> cursors, uint64_t journal_end) {
  handled_total_ = 0;
  if (frames_ != nullptr) frames_->Clear();
  for (uint32_t l = 0; l < leases_.size(); ++l) {
    Lease& lease = leases_[l];
    lease = Lease{};
    lease.cursor = cursors.empty() ? 0 : cursors[l];
    lease.evicted_through = lease.cursor;
    handled_total_ += lease.cursor;
    PublishLease(l);
  }
  journal_end_ = journal_end;
  next_lease_ = 0;
  if (frames_ != nullptr) RebuildFrames();
  StoreRelease(&control_->server.ingest_cursor, handled_total_);
  StoreRelease(&control_->server.journal_end, journal_end_);
}

absl::Status Ingest::UseReservations(SequenceReservations* reservations) {
  skipped_laps_.assign(leases_.size(), 0);
  int64_t wall_now_ns = 0;
  for (uint32_t l = 0; l < leases_.size(); ++l) {
    Lease& lease = leases_[l];
    // The committed prefix a restore kept is its actor's done work: ingest
    // it before the jump (no peer sees the regions yet).
    handled_total_ += StepLease(l, lease_slots_, &wall_now_ns);
    FlushInsertDelays(wall_now_ns);
    const uint64_t floor = reservations->floor(l);
    if (lease.cursor >= floor) continue;
    // Whole laps, so the lease's next write lands where it would have.
    const uint64_t laps = (floor - lease.cursor + lease_slots_ - 1) / lease_slots_;
    if (laps > UINT32_MAX) {
      return absl::DataLossError(absl::StrCat("lease ", l, ": reservation mark ", floor,
                                              " is implausibly far above its cursor ",
                                              lease.cursor));
    }
    const uint64_t jump = laps * lease_slots_;
    lease.cursor += jump;
    lease.evicted_through = lease.cursor;
    lease.rechecking = kNotWaiting;
    handled_total_ += jump;
    sequences_skipped_ += jump;
    skipped_laps_[l] = static_cast<uint32_t>(laps);
  }
  reservations_ = reservations;
  std::vector<uint64_t> needed(leases_.size());
  for (uint32_t l = 0; l < leases_.size(); ++l) needed[l] = leases_[l].cursor + lease_slots_;
  const absl::Status reserved = reservations_->ReserveAll(needed);
  for (uint32_t l = 0; l < leases_.size(); ++l) PublishLease(l);
  StoreRelease(&control_->server.ingest_cursor, handled_total_);
  StoreRelease(&control_->server.journal_end, journal_end_);
  return reserved;
}

void Ingest::PublishLease(uint32_t l) {
  const Lease& lease = leases_[l];
  uint64_t published = lease.cursor;
  // Below the persisted mark: an actor writes below cursor + L at most. The
  // next mark is asked for ahead of need and synced by the reservations'
  // thread.
  if (reservations_ != nullptr) published = reservations_->Publishable(l, lease.cursor);
  auto* line =
      reinterpret_cast<protocol::LeaseLine*>(leases_region_ + protocol::LeaseLineOffset(l));
  StoreRelease(&line->inserted, lease.inserted);
  StoreRelease(&line->torn, lease.torn);
  StoreRelease(&line->overrun, lease.overrun);
  StoreRelease(&line->priorities_bounded, lease.bounded);
  StoreRelease(&line->transitions_invalid, lease.invalid);
  StoreRelease(&line->ingest_cursor, published);
}

bool Ingest::Recheck(uint32_t l, uint64_t q) {
  if (options_.torn_recheck == absl::ZeroDuration()) return false;
  Lease* lease = &leases_[l];
  const absl::Time now = clock_->Now();
  if (lease->rechecking == kNotWaiting || q >= lease->recheck_end) {
    lease->rechecking = q;
    lease->recheck_since = now;
    uint64_t end = q + 1;
    while (end < q + lease_slots_ &&
           LoadAcquire(&commits_[protocol::LeaseSlotIndex(config_, l, end)]) ==
               protocol::CommitValue(end)) {
      ++end;
    }
    lease->recheck_end = end;
    return true;
  }
  return now - lease->recheck_since < options_.torn_recheck;
}

float Ingest::BoundPriority(float raw, Lease* lease) {
  if (std::isnan(raw) || std::isinf(raw) || raw < 0) {
    ++lease->bounded;
    ++counters_->priorities_bounded;
    return 0.0f;  // no estimate: the memory's current maximum
  }
  if (raw > options_.max_priority) {
    ++lease->bounded;
    ++counters_->priorities_bounded;
    return options_.max_priority;
  }
  return raw;
}

bool Ingest::TransitionValid(const uint8_t* slot, const protocol::SlotHeader& header) const {
  if (!spec_.has_value()) return true;
  const absl::Span<const uint8_t> payload(slot + sizeof(protocol::SlotHeader),
                                          header.payload_length);
  return protocol::CheckTransition(*spec_, payload) == protocol::TransitionFault::kNone;
}

std::optional<protocol::FrameRecordView> Ingest::CheckedRecord(
    const uint8_t* slot, const protocol::SlotHeader& header) const {
  const absl::Span<const uint8_t> payload(slot + sizeof(protocol::SlotHeader),
                                          header.payload_length);
  protocol::FrameRecordView record;
  if (!spec_.has_value() ||
      protocol::CheckFrameRecord(*spec_, static_cast<int>(config_.frame_stack), payload, &record) !=
          protocol::TransitionFault::kNone) {
    return std::nullopt;
  }
  return record;
}

bool Ingest::AcceptRecord(uint32_t l, uint64_t index, uint64_t q, const uint8_t* slot,
                          const protocol::SlotHeader& header) {
  const std::optional<protocol::FrameRecordView> record = CheckedRecord(slot, header);
  if (!record.has_value()) return false;
  frames_->Hold(index, q, record->has_frame());
  if (!record->has_transition()) {
    ++frame_only_records_;
    return false;
  }
  if (!DependOnRecords(l, index, q, *record)) {
    ++frames_missing_;
    return false;
  }
  return true;
}

void Ingest::RebuildFrames() {
  for (uint32_t l = 0; l < leases_.size(); ++l) {
    const uint64_t end = leases_[l].cursor;
    const uint64_t begin = end > lease_slots_ ? end - lease_slots_ : 0;
    // The records first, oldest to newest: a transition's records are all
    // older than it.
    for (uint64_t q = begin; q < end; ++q) {
      const uint64_t index = protocol::LeaseSlotIndex(config_, l, q);
      const uint8_t* slot = slots_ + index * config_.slot_size;
      std::optional<protocol::FrameRecordView> record;
      if (LoadAcquire(&commits_[index]) == protocol::CommitValue(q) &&
          protocol::VerifySlot(slot, config_.slot_size, q) == protocol::SlotCheck::kOk) {
        protocol::SlotHeader header;
        std::memcpy(&header, slot, sizeof(header));
        record = CheckedRecord(slot, header);
      }
      if (record.has_value()) frames_->Hold(index, q, record->has_frame());
      // A restored transition stays only with every record it needs.
      if (memory_->sequence(index) != q) continue;
      if (!record.has_value() || !record->has_transition() ||
          !DependOnRecords(l, index, q, *record)) {
        memory_->Remove(index);
        ++frames_evicted_;
        if (options_.verification_log) options_.verification_log->Evicted(index, q);
      }
    }
  }
}

bool Ingest::DependOnRecords(uint32_t l, uint64_t index, uint64_t q,
                             const protocol::FrameRecordView& record) {
  // The distinct back distances, each of a record held with its frame.
  uint16_t needs[2 * protocol::kMaxFrameStackDepth];
  size_t need_count = 0;
  uint16_t oldest = 0;
  const int depth = record.header.depth;
  for (int k = 0; k < 2 * depth; ++k) {
    const uint16_t d = k < depth ? record.observation_refs[k] : record.next_refs[k - depth];
    const uint64_t s = q - d;
    if (d > q || !frames_->HoldsFrame(protocol::LeaseSlotIndex(config_, l, s), s)) {
      return false;
    }
    if (d == 0 || std::find(needs, needs + need_count, d) != needs + need_count) continue;
    needs[need_count++] = d;
    oldest = std::max(oldest, d);
  }
  if (oldest > 0) frames_->AddDependent(protocol::LeaseSlotIndex(config_, l, q - oldest), index, q);
  frames_->SetNeeds(index, absl::MakeConstSpan(needs, need_count));
  return true;
}

void Ingest::ReleaseFrames(uint64_t index) {
  frames_->Release(index, [&](uint64_t j, uint64_t q_j) {
    // A transition still in the pending run is not in memory yet: flush
    // first, or it would escape the release.
    run_.Flush();
    if (memory_->sequence(j) != q_j) return;  // replaced or removed already
    memory_->Remove(j);
    ++frames_evicted_;
    if (options_.verification_log) options_.verification_log->Evicted(j, q_j);
  });
}

void Ingest::RecordInsertDelay(uint64_t insert_time_ns, int64_t* wall_now_ns) {
  if (insert_delays_ == nullptr || insert_time_ns == 0) return;
  // A writer stamps its whole batch alike, and the wall clock is read once
  // per step: a batch's delays are one value, recorded once.
  if (insert_time_ns == delay_stamp_ns_) {
    ++delay_count_;
    return;
  }
  FlushInsertDelays(*wall_now_ns);
  if (*wall_now_ns == 0) *wall_now_ns = absl::ToUnixNanos(clock_->WallNow());
  delay_stamp_ns_ = insert_time_ns;
  delay_count_ = 1;
}

void Ingest::FlushInsertDelays(int64_t wall_now_ns) {
  if (delay_count_ == 0) return;
  const int64_t delay_ns = wall_now_ns - static_cast<int64_t>(delay_stamp_ns_);
  insert_delays_->Record(delay_ns > 0 ? static_cast<double>(delay_ns) * 1e-9 : 0.0, delay_count_);
  delay_count_ = 0;
  delay_stamp_ns_ = 0;
}

void Ingest::AppendJournal(uint32_t l, uint64_t first, uint64_t count) {
  while (count > 0) {
    // A run does not cross the lease's wrap: one READ covers it.
    const uint64_t before_wrap = lease_slots_ - first % lease_slots_;
    const uint64_t n = std::min(count, before_wrap);
    auto* entry = reinterpret_cast<protocol::JournalEntry*>(
        leases_region_ + protocol::JournalEntryOffset(config_, journal_end_));
    StoreRelease(&entry->number, ~uint64_t{0});  // being rewritten
    StoreRelaxed(&entry->first_sequence, first);
    // lease (low half) and count (high half) share one word.
    StoreRelaxed(reinterpret_cast<uint64_t*>(&entry->lease), (n << 32) | l);
    StoreRelease(&entry->number, journal_end_);
    ++journal_end_;
    first += n;
    count -= n;
  }
}

void Ingest::EvictAhead(uint32_t l) {
  Lease& lease = leases_[l];
  const uint64_t end = lease.cursor + actor_window_;
  // Runs of consecutive indices leave the memory in one RemoveRun each.
  uint64_t run_first = 0, run_count = 0;
  const uint64_t start = std::max(lease.evicted_through, lease.cursor);
  uint64_t index = protocol::LeaseSlotIndex(config_, l, start);
  for (uint64_t s = start; s < end; ++s, index = NextIndex(l, index)) {
    const auto* header =
        reinterpret_cast<const protocol::SlotHeader*>(slots_ + index * config_.slot_size);
    if (LoadRelaxed(&header->sequence) != s) break;  // not being written yet
    if (frames_ != nullptr) ReleaseFrames(index);
    if (run_count > 0 && index != run_first + run_count) {
      memory_->RemoveRun(run_first, run_count);
      run_count = 0;
    }
    if (run_count == 0) run_first = index;
    ++run_count;
    lease.evicted_through = s + 1;
  }
  if (run_count > 0) memory_->RemoveRun(run_first, run_count);
}

uint64_t Ingest::StepLease(uint32_t l, uint64_t budget, int64_t* wall_now_ns) {
  Lease& lease = leases_[l];
  EvictAhead(l);
  const uint64_t first = lease.cursor;
  uint64_t next_index = protocol::LeaseSlotIndex(config_, l, first);
  while (lease.cursor - first < budget) {
    const uint64_t q = lease.cursor;
    const uint64_t index = next_index;
    next_index = NextIndex(l, index);
    const uint8_t* slot = slots_ + index * config_.slot_size;
    const uint64_t commit = LoadAcquire(&commits_[index]);
    if (commit == protocol::CommitValue(q)) {
      const bool verified =
          protocol::VerifySlot(slot, config_.slot_size, q) == protocol::SlotCheck::kOk;
      protocol::SlotHeader header;
      if (verified) std::memcpy(&header, slot, sizeof(header));
      if (frames_ != nullptr) ReleaseFrames(index);
      // Verified slots: a transition to insert, a frame record held but not
      // sampled, or nothing a learner can train on.
      bool insert = false, held = false;
      if (verified && frames_ != nullptr) {
        insert = AcceptRecord(l, index, q, slot, header);
        held = !insert && frames_->Holds(index, q);
      } else if (verified) {
        insert = TransitionValid(slot, header);
      }
      if (insert) {
        run_.Add(index, q, BoundPriority(header.initial_priority, &lease));
        ++counters_->inserted;
        ++lease.inserted;
        RecordInsertDelay(header.insert_time_ns, wall_now_ns);
        if (options_.verification_log)
          options_.verification_log->Ingested(index, q, header.checksum);
      } else if (held) {
        run_.Flush();
        memory_->Remove(index);
        if (options_.verification_log)
          options_.verification_log->HeldAsRecord(index, q, header.checksum);
      } else if (verified) {
        // Whole and committed, but nothing a learner can train on (with
        // frames: a record whose transition needs a record not held).
        run_.Flush();
        memory_->Remove(index);
        ++invalid_total_;
        ++lease.invalid;
        if (frames_ != nullptr && options_.verification_log)
          options_.verification_log->HeldAsRecord(index, q, header.checksum);
      } else if (Recheck(l, q)) {
        break;  // the data may still be on its way: read it again next step
      } else {
        run_.Flush();
        memory_->Remove(index);
        ++counters_->torn_slots;
        ++lease.torn;
        if (options_.verification_log) options_.verification_log->Torn(index, q);
      }
    } else if (commit > protocol::CommitValue(q)) {
      // A later sequence was committed into the slot (q was lapped), or the
      // actor forged the word: either way q is skipped.
      if (frames_ != nullptr) ReleaseFrames(index);
      run_.Flush();
      memory_->Remove(index);
      ++counters_->overrun_slots;
      ++lease.overrun;
    } else {
      break;  // not committed yet: this lease waits, the others go on
    }
    ++lease.cursor;
  }
  run_.Flush();
  const uint64_t handled = lease.cursor - first;
  if (handled > 0) {
    lease.evicted_through = std::max(lease.evicted_through, lease.cursor);
    AppendJournal(l, first, handled);
    PublishLease(l);
  }
  return handled;
}

uint64_t Ingest::Step() {
  const auto count = static_cast<uint32_t>(leases_.size());
  if (reservations_ != nullptr && reservations_->sync_generation() != sync_generation_) {
    // New marks are in place: leases that waited at the old ones move on.
    sync_generation_ = reservations_->sync_generation();
    for (uint32_t l = 0; l < count; ++l) PublishLease(l);
  }
  uint64_t handled = 0;
  int64_t wall_now_ns = 0;  // read once, at the first insert
  uint32_t visited = 0;
  uint32_t l = next_lease_;
  for (; visited < count && handled < options_.max_per_step; ++visited) {
    const uint64_t budget =
        std::min<uint64_t>(options_.max_per_lease, options_.max_per_step - handled);
    handled += StepLease(l, budget, &wall_now_ns);
    l = l + 1 == count ? 0 : l + 1;
  }
  next_lease_ = l;
  FlushInsertDelays(wall_now_ns);
  if (handled > 0) {
    handled_total_ += handled;
    StoreRelease(&control_->server.ingest_cursor, handled_total_);
    StoreRelease(&control_->server.journal_end, journal_end_);
  }
  return handled;
}

}  // namespace dreplay::server
