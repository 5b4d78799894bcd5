// Copyright dreplay authors.

#include "replay_server/replay_core.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/shared_words.h"
#include "common/status_macros.h"
#include "protocol/transition_spec.h"
#include "replay_server/checkpoint/checkpoint.h"
#include "replay_server/verification_log.h"

namespace dreplay::server {
namespace {

// A random incarnation, never 0 (0 means "none" in checkpoints).
uint64_t DrawIncarnation() {
  std::random_device device;
  uint64_t incarnation = 0;
  while (incarnation == 0) {
    incarnation = (uint64_t{device()} << 32) ^ device();
  }
  return incarnation;
}

// Frames stored once need a spec of u8 stacks to check records against.
absl::Status CheckFrameStack(const protocol::LayoutConfig& config,
                             const ReplayCoreOptions& options) {
  if (config.frame_stack == 0) return absl::OkStatus();
  const absl::StatusOr<protocol::TransitionSpec> spec =
      protocol::TransitionSpec::Parse(config.spec());
  if (!spec.ok() || spec->observation_type != protocol::ObservationType::kUint8 ||
      spec->observation_size != static_cast<int>(config.observation_size)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "frame_stack=", config.frame_stack, " needs a transition spec of u8 stacks of ",
        "observation_size=", config.observation_size, " elements; the spec is \"", config.spec(),
        "\""));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ReplayCoreOptions::Validate() const {
  replay::ReplayMemoryOptions m = memory;
  if (m.capacity == 0) m.capacity = 1;  // the layout's capacity is checked by Create
  RETURN_IF_ERROR(m.Validate());
  RETURN_IF_ERROR(ingest.Validate());
  RETURN_IF_ERROR(sampler.Validate());
  if (sampler.forward == protocol::ForwardMode::kForwardUniform &&
      memory.mode != replay::SamplingMode::kUniform) {
    return absl::InvalidArgumentError("uniform forwarding needs a uniform replay memory");
  }
  if (sampler.forward == protocol::ForwardMode::kForwardPriority &&
      memory.mode != replay::SamplingMode::kPrioritized) {
    return absl::InvalidArgumentError("priority forwarding needs a prioritized replay memory");
  }
  if (update_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("update_timeout=", absl::FormatDuration(update_timeout), " must be > 0"));
  }
  if (checkpoint_chunk_slots == 0) {
    return absl::InvalidArgumentError("checkpoint_chunk_slots=0 must be >= 1");
  }
  if (max_batches_per_step == 0) {
    return absl::InvalidArgumentError("max_batches_per_step=0 must be >= 1");
  }
  if (stats_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("stats_interval=", absl::FormatDuration(stats_interval), " must be > 0"));
  }
  if (min_sleep <= absl::ZeroDuration() || max_sleep < min_sleep) {
    return absl::InvalidArgumentError(absl::StrCat("min_sleep=", absl::FormatDuration(min_sleep),
                                                   " max_sleep=", absl::FormatDuration(max_sleep),
                                                   " need 0 < min_sleep <= max_sleep"));
  }
  if (max_sleep_awaiting_updates < min_sleep) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_sleep_awaiting_updates=", absl::FormatDuration(max_sleep_awaiting_updates),
        " is below min_sleep=", absl::FormatDuration(min_sleep)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ReplayCore>> ReplayCore::Create(ReplayRegions* regions,
                                                               const ReplayCoreOptions& options,
                                                               Clock* clock) {
  RETURN_IF_ERROR(options.Validate());
  const protocol::LayoutConfig& config = regions->config();
  replay::ReplayMemoryOptions memory_options = options.memory;
  if (memory_options.capacity == 0) memory_options.capacity = config.capacity;
  if (memory_options.capacity != config.capacity) {
    return absl::InvalidArgumentError(
        absl::StrCat("memory.capacity=", memory_options.capacity,
                     " differs from the layout's capacity=", config.capacity));
  }
  if (absl::Status s = options.sampler.rate_limiter.Validate(config.batch_size); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("sampler rate_limiter: ", s.message()));
  }
  RETURN_IF_ERROR(CheckFrameStack(config, options));
  ASSIGN_OR_RETURN(std::unique_ptr<replay::ReplayMemory> memory,
                   replay::ReplayMemory::Create(memory_options));
  return std::unique_ptr<ReplayCore>(new ReplayCore(
      regions, options, clock != nullptr ? clock : Clock::Real(), std::move(memory)));
}

ReplayCore::ReplayCore(ReplayRegions* regions, const ReplayCoreOptions& options, Clock* clock,
                       std::unique_ptr<replay::ReplayMemory> memory)
    : regions_(regions),
      options_(options),
      clock_(clock),
      incarnation_(options.incarnation != 0 ? options.incarnation : DrawIncarnation()),
      memory_(std::move(memory)),
      cut_(regions, memory_.get(), options.checkpoint_chunk_slots) {
  const protocol::LayoutConfig& config = regions_->config();
  // The policy, published before any peer can READ the control block.
  const replay::RateLimiterOptions& limiter = options_.sampler.rate_limiter;
  protocol::PolicyLine policy{};
  policy.samples_per_insert = limiter.samples_per_insert;
  policy.spi_error_buffer = limiter.error_buffer;
  policy.min_size_to_sample = limiter.min_size_to_sample;
  policy.spi_block_actors = limiter.block_inserts ? 1 : 0;
  policy.forward = static_cast<uint32_t>(options_.sampler.forward);
  if (options_.sampler.forward == protocol::ForwardMode::kForwardFifo) {
    policy.forward_queue = options_.sampler.forward_queue;
  }
  if (const auto& codec = options_.sampler.link_codec; codec.has_value()) {
    static constexpr protocol::LinkCodec kLinkCodec[] = {
        protocol::LinkCodec::kNone, protocol::LinkCodec::kLz4, protocol::LinkCodec::kLz4Hc,
        protocol::LinkCodec::kZstd};  // by CodecKind
    policy.link_codec = static_cast<uint32_t>(kLinkCodec[static_cast<int>(codec->kind)]);
    policy.link_codec_level = codec->level;
  }
  std::memcpy(&regions_->control()->policy, &policy, sizeof(policy));
  ingest_ = std::make_unique<Ingest>(
      config, options_.ingest, regions_->control(),
      static_cast<uint8_t*>(regions_->region(protocol::RegionKind::kLeases)), regions_->slots(),
      regions_->commits(), memory_.get(), &counters_, clock_, &delays_.insert_to_ingest);
  updates_ =
      std::make_unique<PriorityUpdates>(config, regions_->mailbox(), regions_->staging(),
                                        options_.ingest.max_priority, memory_.get(), &counters_);
  sampler_ = std::make_unique<Sampler>(
      config, options_.sampler, regions_->control(), regions_->slots(), regions_->commits(),
      regions_->staging(), memory_.get(), &counters_, clock_,
      static_cast<const uint8_t*>(regions_->region(protocol::RegionKind::kLeases)));
  if (ingest_->frames() != nullptr) sampler_->UseFrames(ingest_->frames());
  ingest_->Restart({}, 0);
  sampler_->Restart(epoch_, incarnation_);
  PublishStats();
}

uint64_t ReplayCore::ReleaseBatches(absl::Time now) {
  uint64_t released = 0;
  while (sampler_->HasOutstanding()) {
    const PriorityUpdates::Result result =
        updates_->Consume(sampler_->oldest_outstanding(), epoch_, incarnation_);
    // Only a consumed, well-formed update proves the learner READ the batch.
    const bool received = result == PriorityUpdates::Result::kApplied;
    if (result == PriorityUpdates::Result::kNotReady) {
      if (options_.update_timeout == absl::InfiniteDuration() ||
          now - sampler_->oldest_staged_at() < options_.update_timeout) {
        break;
      }
      ++counters_.updates_timed_out;
    } else {
      delays_.staging.Record(absl::ToDoubleSeconds(now - sampler_->oldest_staged_at()));
    }
    sampler_->ReleaseOldest(received);
    ++released;
  }
  return released;
}

uint64_t ReplayCore::ApplyLearnerEvent() {
  LearnerEvents::Event event;
  if (!learner_events_.Take(&event)) return 0;
  uint64_t released = 0;
  // Batches staged for the previous learner may reference what it held; the
  // new one (which resynchronises from batches_released) could not resolve
  // them.
  if (sampler_->OutstandingReferences()) {
    while (sampler_->HasOutstanding()) {
      ++counters_.updates_timed_out;
      sampler_->ReleaseOldest(/*learner_received=*/false);
      ++released;
    }
  }
  sampler_->ResetLearnerCache(event.learner_cache);
  learner_events_.Ack(event.generation);
  return released;
}

uint64_t ReplayCore::IngestStep() {
  const bool blocked = sampler_->InsertsBlocked();
  if (blocked || inserts_blocked_since_ != absl::InfinitePast()) {
    const absl::Time now = clock_->Now();
    if (inserts_blocked_since_ != absl::InfinitePast()) {
      counters_.limiter_insert_wait_ns +=
          static_cast<uint64_t>(absl::ToInt64Nanoseconds(now - inserts_blocked_since_));
    }
    inserts_blocked_since_ = blocked ? now : absl::InfinitePast();
  }
  if (blocked) return 0;
  const uint64_t inserted_before = counters_.inserted;
  const uint64_t handled = ingest_->Step();
  sampler_->Inserted(counters_.inserted - inserted_before);
  return handled;
}

StepResult ReplayCore::Step() {
  StepResult result;
  result.batches_released = ApplyLearnerEvent();
  result.ingested = IngestStep();
  const absl::Time now = clock_->Now();
  result.batches_released += ReleaseBatches(now);
  while (result.batches_staged < options_.max_batches_per_step && sampler_->StageOne()) {
    ++result.batches_staged;
  }
  if (result.did_work() || now - last_stats_ >= options_.stats_interval) {
    last_stats_ = now;
    PublishStats();
  }
  return result;
}

void ReplayCore::Run(const std::atomic<bool>& stop) {
  uint64_t idle_steps = 0;
  absl::Duration sleep = options_.min_sleep;
  while (!stop.load(std::memory_order_acquire)) {
    if (Step().did_work()) {
      idle_steps = 0;
      sleep = options_.min_sleep;
      continue;
    }
    if (++idle_steps <= options_.spin_steps) continue;
    const bool awaiting_updates = sampler_->next_batch() > sampler_->released();
    clock_->SleepFor(awaiting_updates ? std::min(sleep, options_.max_sleep_awaiting_updates)
                                      : sleep);
    sleep = std::min(sleep * 2, options_.max_sleep);
  }
  PublishStats();
}

void ReplayCore::PublishStats() {
  protocol::StatsBlock* s = regions_->stats();
  const ReplayCounters& c = counters_;
  ++stats_generation_;
  StoreRelaxed(&s->generation_begin, stats_generation_);
  // Release stores: none of them can become visible before generation_begin
  // (no fences: ThreadSanitizer does not model them).
  StoreRelease(&s->server_time_ns,
               static_cast<uint64_t>(absl::ToInt64Nanoseconds(clock_->Now() - absl::UnixEpoch())));
  StoreRelease(&s->epoch, epoch_);
  StoreRelease(&s->ingest_cursor, ingest_->cursor());
  StoreRelease(&s->size, memory_->size());
  StoreRelease(&s->capacity, memory_->capacity());
  StoreRelease(&s->inserted, c.inserted);
  StoreRelease(&s->overrun_slots, c.overrun_slots);
  StoreRelease(&s->torn_slots, c.torn_slots);
  StoreRelease(&s->sampled, c.sampled);
  StoreRelease(&s->batches_staged, c.batches_staged);
  StoreRelease(&s->batches_released, c.batches_released);
  StoreRelease(&s->sample_copy_rejects, c.sample_copy_rejects);
  StoreRelease(&s->priority_updates_applied, c.priority_updates_applied);
  StoreRelease(&s->priority_updates_stale, c.priority_updates_stale);
  StoreRelease(&s->priority_updates_invalid, c.priority_updates_invalid);
  StoreRelease(&s->mailbox_rejects, c.mailbox_rejects);
  StoreRelease(&s->staging_stalls, c.staging_stalls);
  StoreReleaseDouble(&s->priority_sum, memory_->total_priority());
  StoreReleaseDouble(&s->priority_max, memory_->max_priority());
  StoreRelease(&s->checkpoints_written, c.checkpoints_written);
  StoreRelease(&s->updates_timed_out, c.updates_timed_out);
  StoreRelease(&s->restore_dropped, c.restore_dropped);
  StoreRelease(&s->limiter_sample_waits, c.limiter_sample_waits);
  StoreRelease(&s->limiter_sample_wait_ns, c.limiter_sample_wait_ns);
  StoreRelease(&s->limiter_insert_wait_ns, c.limiter_insert_wait_ns);
  StoreRelease(&s->staged_payloads, c.staged_payloads);
  StoreRelease(&s->staged_cached, c.staged_cached);
  StoreRelease(&s->learner_cache_resets, c.learner_cache_resets);
  StoreRelease(&s->priorities_bounded, c.priorities_bounded);
  StoreRelease(&s->transitions_invalid, ingest_->transitions_invalid());
  StoreRelease(&s->forward_dropped, sampler_->forward_dropped());
  StoreReleaseDouble(&s->crossing_percentile_sum, sampler_->crossing().sum());
  StoreRelease(&s->crossing_percentile_count, sampler_->crossing().count());
  StoreRelease(&s->frame_only_records, ingest_->frame_only_records());
  StoreRelease(&s->frames_missing, ingest_->frames_missing());
  StoreRelease(&s->frames_evicted, ingest_->frames_evicted());
  StoreRelease(&s->link_packed_in_bytes, sampler_->packed_in());
  StoreRelease(&s->link_packed_out_bytes, sampler_->packed_out());
  StoreRelease(&s->link_pack_cpu_ns, sampler_->pack_cpu_ns());
  StoreRelease(&s->generation_end, stats_generation_);
}

void ReplayCore::BeginCheckpoint(CheckpointCut spare) {
  const CheckpointStepTimer timer;
  const absl::Time start = absl::Now();
  CheckpointState state;
  state.epoch = epoch_;
  state.incarnation = incarnation_;
  state.ingest_cursor = ingest_->cursor();
  state.journal_end = ingest_->journal_end();
  state.lease_cursors.resize(regions_->config().leases);
  for (uint32_t l = 0; l < regions_->config().leases; ++l) {
    state.lease_cursors[l] = ingest_->lease_cursor(l);
  }
  state.counters = counters_;
  ++cuts_;
  VerificationLog* log = options_.ingest.verification_log;
  if (log != nullptr) log->CheckpointCut(cuts_, epoch_, state.ingest_cursor);
  cut_.Begin(std::move(state), std::move(spare));
  cut_began_ = start;
  cut_pause_ = timer.Record(&pauses_, CheckpointStep::kBegin);
  cut_steps_ = 1;
}

std::optional<CheckpointCut> ReplayCore::ContinueCheckpoint() {
  const CheckpointStepTimer timer;
  const bool done = cut_.Step();
  std::optional<CheckpointCut> cut;
  if (done) {
    cut = cut_.Finish();
    cut->cut_id = cuts_;
    cut->log = options_.ingest.verification_log;
  }
  cut_pause_ = std::max(cut_pause_, timer.Record(&pauses_, CheckpointStep::kChunk));
  ++cut_steps_;
  if (cut.has_value()) {
    cut->pause = cut_pause_;
    cut->steps = cut_steps_;
    cut->cut_time = absl::Now() - cut_began_;
  }
  return cut;
}

CheckpointCut ReplayCore::CutCheckpoint(CheckpointCut spare) {
  if (cut_.active()) {  // a cut the loop left unfinished: its buffers serve this one
    std::optional<CheckpointCut> left;
    while (!(left = ContinueCheckpoint())) {
    }
    spare = *std::move(left);
  }
  BeginCheckpoint(std::move(spare));
  while (true) {
    if (std::optional<CheckpointCut> cut = ContinueCheckpoint()) {
      pauses_.Publish();
      return *std::move(cut);
    }
  }
}

absl::Status ReplayCore::UseSequenceReservations(SequenceReservations* reservations) {
  const uint64_t inserted_before = counters_.inserted;
  const absl::Status status = ingest_->UseReservations(reservations);
  sampler_->Inserted(counters_.inserted - inserted_before);
  PublishStats();
  return status;
}

std::vector<uint64_t> ReplayCore::lease_cursors() const {
  std::vector<uint64_t> cursors(regions_->config().leases);
  for (uint32_t l = 0; l < cursors.size(); ++l) cursors[l] = ingest_->lease_cursor(l);
  return cursors;
}

void ReplayCore::CheckpointWritten() {
  ++counters_.checkpoints_written;  // the verification log's C record: WriteCheckpoint
  PublishStats();
}

absl::Status ReplayCore::SaveCheckpoint(const std::string& path, CheckpointWriteStats* stats) {
  CheckpointCut cut = CutCheckpoint();
  ASSIGN_OR_RETURN(const CheckpointWriteStats written, WriteCheckpoint(path, *regions_, &cut));
  if (stats != nullptr) *stats = written;
  CheckpointWritten();
  return absl::OkStatus();
}

void ReplayCore::StartEpochAfter(uint64_t epoch) {
  if (epoch_ > epoch) return;
  epoch_ = epoch + 1;
  sampler_->Restart(epoch_, incarnation_);
  PublishStats();
}

absl::Status ReplayCore::RestoreCheckpoint(const std::string& path, FileSystem* fs) {
  CheckpointState state;
  absl::Status status = ReadCheckpoint(path, regions_, memory_.get(), &state, fs);
  if (!status.ok()) {
    ingest_->Restart({}, 0);
    PublishStats();
    return status;
  }
  const protocol::LayoutConfig& config = regions_->config();
  // Stale batches and updates of an older epoch must not match new numbers.
  std::memset(regions_->staging(), 0, protocol::StagingRingBytes(config));
  std::memset(regions_->mailbox(), 0, protocol::MailboxBytes(config));
  counters_ = state.counters;
  epoch_ = state.epoch + 1;
  ingest_->Restart(state.lease_cursors, state.journal_end);
  restored_incarnation_ = state.incarnation;
  for (uint32_t l = 0; l < config.leases; ++l) {
    const CheckpointLeaseHolder& holder = state.lease_holders[l];
    // A lease held then has no connection now: released, kept for its actor.
    const uint32_t lease_state = holder.state == static_cast<uint32_t>(protocol::LeaseState::kHeld)
                                     ? static_cast<uint32_t>(protocol::LeaseState::kReleased)
                                     : holder.state;
    protocol::LeaseLine* line = regions_->lease_line(l);
    StoreRelease(reinterpret_cast<uint64_t*>(&line->state),
                 (uint64_t{holder.actor_id} << 32) | lease_state);
    StoreRelease(&line->grants, holder.grants);
  }
  sampler_->Restart(epoch_, incarnation_);  // forgets the learner's holdings: a new epoch
  ++counters_.learner_cache_resets;
  // The limiter continues from the restored counts.
  sampler_->ResetLimiter(counters_.inserted, counters_.sampled);
  inserts_blocked_since_ = absl::InfinitePast();
  if (options_.ingest.verification_log != nullptr) {
    options_.ingest.verification_log->CheckpointRestored(state.epoch, state.ingest_cursor);
  }
  LogRestoredSlots(*regions_, *memory_, options_.ingest.verification_log);
  PublishStats();
  return absl::OkStatus();
}

}  // namespace dreplay::server
