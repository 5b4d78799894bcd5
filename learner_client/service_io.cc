// Copyright dreplay authors.

#include "learner_client/service_io.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "protocol/leases.h"

namespace dreplay::learner {

namespace {

// The buffer placement trains on sampled batches: a forwarding server
// stages each transition once, with no weights (the hybrid placement's
// reader checks the converse).
absl::Status CheckNotForwarding(const protocol::PolicyLine& policy) {
  if (policy.forward == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "the server forwards each transition once (replay_server --forward): train on it with "
      "--replay_placement=hybrid, or restart the server with --forward=off");
}

}  // namespace

absl::StatusOr<std::unique_ptr<LearnerServiceIo>> LearnerServiceIo::Create(
    client::ClientSession* session, const LearnerServiceIoOptions& options) {
  using Created = absl::StatusOr<std::unique_ptr<LearnerServiceIo>>;
  return client::RetryWhileDisconnected(options.retry, [&]() -> Created {
    return client::WithReconnect(session, [&] { return CreateOnce(session, options); });
  });
}

absl::StatusOr<std::unique_ptr<LearnerServiceIo>> LearnerServiceIo::CreateOnce(
    client::ClientSession* session, const LearnerServiceIoOptions& options) {
  if (options.forward_policy != "in_order" && options.forward_policy != "freshest") {
    return absl::InvalidArgumentError(
        absl::StrCat("forward_policy=", options.forward_policy, " must be in_order or freshest"));
  }
  std::unique_ptr<LearnerServiceIo> io(new LearnerServiceIo(options));
  io->session_ = session;
  if (options.placement == ReplayPlacement::kBuffer) {
    RETURN_IF_ERROR(CheckNotForwarding(session->policy()));
    BatchReaderOptions reader = options.batch_reader;
    reader.learner_cache = options.learner_cache;
    ASSIGN_OR_RETURN(io->batch_reader_, BatchReader::Create(session, reader));
    ASSIGN_OR_RETURN(io->priority_writer_, PriorityWriter::Create(session));
    BatchAssemblyOptions assembly;
    assembly.on_thread = options.assemble_ahead;
    assembly.verification_log = options.verification_log;
    io->assembly_ = std::make_unique<BatchAssembly>(session->config(), assembly);
  } else if (options.placement == ReplayPlacement::kHybrid) {
    ForwardedBatchReaderOptions reader;
    reader.batch_reader = options.batch_reader;
    // A forwarded transition crosses once; with frames the reader keeps
    // the records itself.
    reader.batch_reader.learner_cache = false;
    ASSIGN_OR_RETURN(io->forwarded_reader_, ForwardedBatchReader::Create(session, reader));
  } else {
    ForwardReaderOptions reader = options.forward_reader;
    reader.policy =
        options.forward_policy == "freshest" ? ForwardPolicy::kFreshest : ForwardPolicy::kInOrder;
    ASSIGN_OR_RETURN(io->forward_reader_, ForwardReader::Create(session, reader));
  }
  ASSIGN_OR_RETURN(io->publisher_, ParamPublisher::Create(session));
  ASSIGN_OR_RETURN(io->stats_reader_, client::StatsReader::Create(session));
  ASSIGN_OR_RETURN(io->actor_lines_, client::ActorLinesPoller::Create(session));
  ASSIGN_OR_RETURN(const std::vector<protocol::ActorLine> lines,
                   client::RetryWhileDisconnected(options.retry,
                                                  [&] { return io->stats_reader_->ReadActors(); }));
  io->actor_lines_->Seed(lines);
  if (options.placement == ReplayPlacement::kBuffer) {
    ASSIGN_OR_RETURN(io->server_line_,
                     client::ServerLinePoller::Create(session, absl::ZeroDuration()));
  }
  return io;
}

LearnerServiceIo::LearnerServiceIo(const LearnerServiceIoOptions& options) : options_(options) {}

LearnerServiceIo::~LearnerServiceIo() = default;

LearnerIo LearnerServiceIo::io() {
  LearnerIo io;
  if (options_.placement == ReplayPlacement::kBuffer) io.batches = this;
  if (options_.placement != ReplayPlacement::kBuffer) io.stream = this;
  io.params = this;
  io.actors = this;
  io.link_stats = [this] { return link_stats(); };
  io.server_ingested = [this] { return server_ingested(); };
  // The learner placement READs the slot ring: nothing the server stages
  // crosses (it stages for no one), so its measure would not be of what
  // crossed.
  if (options_.placement != ReplayPlacement::kLearner) {
    io.crossing_percentile = [this] { return crossing_percentile(); };
  }
  io.server_ingested_known = [this]() -> absl::StatusOr<uint64_t> {
    if (const std::optional<uint64_t> g = generated(); g.has_value()) return *g;
    ASSIGN_OR_RETURN(const protocol::ServerLine line, server_line_->Poll());
    return line.ingest_cursor;
  };
  return io;
}

LinkStats LearnerServiceIo::link_stats() const {
  LinkStats link;
  // Every byte of the session's queue pair, by class (the readers and
  // writers tag what they post; heartbeats and the handshake are control).
  const client::LinkBytes& b = session_->link_bytes();
  link.experience = b.experience;
  link.metadata = b.metadata;
  link.polling = b.polling;
  link.priorities = b.priorities;
  link.params = b.params;
  link.control = b.control;
  if (batch_reader_ != nullptr) {
    link.transitions_fetched = batch_reader_->stats().transitions_fetched;
    link.distinct_transitions_fetched = batch_reader_->stats().distinct_transitions_fetched;
  } else if (forward_reader_ != nullptr) {
    link.transitions_fetched = forward_reader_->stats().transitions_fetched;
    link.distinct_transitions_fetched = forward_reader_->stats().distinct_transitions_fetched;
  } else if (forwarded_reader_ != nullptr) {
    link.transitions_fetched = forwarded_reader_->stats().transitions_fetched;
    link.distinct_transitions_fetched = forwarded_reader_->stats().distinct_transitions_fetched;
  }
  return link;
}

const BatchReaderStats* LearnerServiceIo::batch_reader_stats() const {
  if (batch_reader_ != nullptr) return &batch_reader_->stats();
  if (forwarded_reader_ != nullptr) return &forwarded_reader_->stats();
  return nullptr;
}

absl::StatusOr<uint64_t> LearnerServiceIo::server_ingested() {
  // A READ on a failed connection fails again: reconnect before retrying.
  ASSIGN_OR_RETURN(
      const protocol::ServerLine line, client::RetryWhileDisconnected(options_.retry, [&] {
        return client::WithReconnect(session_, [&] { return session_->ReadServerLine(); });
      }));
  return line.ingest_cursor;
}

absl::StatusOr<std::optional<double>> LearnerServiceIo::crossing_percentile() {
  ASSIGN_OR_RETURN(
      const protocol::StatsBlock stats,
      client::RetryWhileDisconnected(options_.retry, [&] { return stats_reader_->ReadStats(); }));
  return protocol::CrossingPercentileMean(stats);
}

absl::StatusOr<bool> LearnerServiceIo::Next(absl::Duration timeout, rl::TransitionBatch* batch,
                                            std::vector<float>* weights,
                                            std::vector<EntryOrigin>* origins) {
  if (options_.placement != ReplayPlacement::kBuffer) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no sampled batches in the ", ReplayPlacementName(options_.placement), " placement"));
  }
  if (!read_ahead_error_.ok()) return std::exchange(read_ahead_error_, absl::OkStatus());
  if (assembled_[0] == nullptr ||
      assembled_[0]->rows.observation_size() != batch->observation_size() ||
      assembled_[0]->rows.observation_type() != batch->observation_type()) {
    CHECK(!assembly_->busy()) << "the batch shape changed while a batch was assembled ahead";
    for (auto& a : assembled_) {
      a = std::make_unique<AssembledBatch>(batch->observation_size(), batch->observation_type());
    }
  }
  if (!assembly_->busy()) {
    absl::StatusOr<StagedBatch> staged = ReadStaged(timeout);
    if (absl::IsNotFound(staged.status())) return false;
    if (!staged.ok()) return staged.status();
    assembly_->Start(*staged, assembled_[1 - current_].get());
  }
  AssembledBatch* done = assembly_->Take();
  current_ = done == assembled_[0].get() ? 0 : 1;
  transitions_dropped_ += done->dropped;
  // The rows change hands; the caller's last rows are the buffers of a
  // later batch.
  std::swap(*batch, done->rows);
  std::swap(*weights, done->weights);
  std::swap(*origins, done->origins);
  SetPolicyLags(origins);
  if (options_.assemble_ahead) ReadAhead();
  return true;
}

void LearnerServiceIo::SetPolicyLags(std::vector<EntryOrigin>* origins) const {
  const uint64_t published = publisher_->version();
  for (EntryOrigin& o : *origins) {
    // Versions compare in their low 32 bits (what a slot holds); an actor
    // acting with none yet, or a learner that published none, is unknown.
    if (o.params_version == 0 || published == 0) continue;
    // An actor may already act with a version posted last whose completion
    // the publisher has not seen yet: no lag, not a negative one.
    const auto lag = static_cast<int32_t>(static_cast<uint32_t>(published) - o.params_version);
    o.policy_lag = std::max<int64_t>(lag, 0);
  }
}

void LearnerServiceIo::ReadAhead() {
  // With one staging slot, the next batch is staged only after this one's
  // priority update: there is nothing to read yet.
  if (session_->config().staging_depth < 2) return;
  // Only a batch already staged: the learner must not wait here.
  absl::StatusOr<StagedBatch> ahead = batch_reader_->Next(absl::ZeroDuration());
  if (ahead.ok()) {
    assembly_->Start(*ahead, assembled_[1 - current_].get());
    ++batches_read_ahead_;
  } else if (!absl::IsDeadlineExceeded(ahead.status()) &&
             !client::IsConnectionFailure(ahead.status())) {
    // A lost connection is met again, and retried, by the next Next().
    read_ahead_error_ = ahead.status();
  }
}

absl::StatusOr<StagedBatch> LearnerServiceIo::ReadStaged(absl::Duration timeout) {
  // DeadlineExceeded is "not staged in time", not a lost connection.
  absl::StatusOr<StagedBatch> staged = batch_reader_->Next(timeout);
  if (absl::IsDeadlineExceeded(staged.status())) return absl::NotFoundError("not staged yet");
  if (staged.ok()) return staged;
  return client::RetryWhileDisconnected(options_.retry, [&]() -> absl::StatusOr<StagedBatch> {
    absl::StatusOr<StagedBatch> next = batch_reader_->Next(timeout);
    if (absl::IsDeadlineExceeded(next.status())) {
      return absl::NotFoundError("not staged yet");
    }
    return next;
  });
}

absl::Status LearnerServiceIo::WritePriorities(absl::Span<const float> priorities) {
  if (options_.placement != ReplayPlacement::kBuffer) {
    return absl::FailedPreconditionError(absl::StrCat("no priorities to write back in the ",
                                                      ReplayPlacementName(options_.placement),
                                                      " placement"));
  }
  if (assembled_[current_] == nullptr) {
    return absl::FailedPreconditionError("no batch to write priorities for: call Next() first");
  }
  AssembledBatch& last = *assembled_[current_];
  const size_t entries = last.records.size();
  const size_t kept = last.kept_entries.size();
  if (priorities.size() == entries) {
    for (size_t i = 0; i < entries; ++i) last.records[i].priority = priorities[i];
  } else if (priorities.size() == kept) {
    // Entries that did not decode get the lowest priority.
    for (protocol::PriorityRecord& r : last.records) r.priority = 0.0f;
    for (size_t k = 0; k < kept; ++k) last.records[last.kept_entries[k]].priority = priorities[k];
  } else {
    return absl::InvalidArgumentError(absl::StrCat("batch ", last.batch_number, " has ", entries,
                                                   " entries (", kept, " decoded) but ",
                                                   priorities.size(), " priorities were given"));
  }
  return WriteRecords(last.batch_number, last.epoch, last.incarnation, last.records);
}

absl::Status LearnerServiceIo::WriteRecords(uint64_t batch_number, uint64_t epoch,
                                            uint64_t incarnation,
                                            absl::Span<const protocol::PriorityRecord> records) {
  if (priority_writer_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("no priorities to write back in the ",
                                                      ReplayPlacementName(options_.placement),
                                                      " placement"));
  }
  return client::RetryWhileDisconnected(options_.retry, [&] {
    return priority_writer_->Write(batch_number, epoch, incarnation, records);
  });
}

absl::StatusOr<protocol::StatsBlock> LearnerServiceIo::ReadStats() {
  return client::RetryWhileDisconnected(options_.retry, [&] { return stats_reader_->ReadStats(); });
}

std::optional<uint64_t> LearnerServiceIo::generated() const {
  if (forwarded_reader_ != nullptr) return forwarded_reader_->server_ingested();
  if (forward_reader_ == nullptr) return std::nullopt;
  return forward_reader_->server_ingested();
}

absl::Status LearnerServiceIo::Next(absl::Duration timeout, std::vector<ForwardedItem>* out) {
  if (forward_reader_ != nullptr) {
    RETURN_IF_ERROR(client::RetryWhileDisconnected(
        options_.retry, [&] { return forward_reader_->Next(timeout, &forwarded_); }));
  } else if (forwarded_reader_ != nullptr) {
    RETURN_IF_ERROR(client::RetryWhileDisconnected(
        options_.retry, [&] { return forwarded_reader_->Next(timeout, &forwarded_); }));
  } else {
    return absl::FailedPreconditionError("no forwarded transitions in the buffer placement");
  }
  out->clear();
  for (const ForwardedTransition& t : forwarded_) {
    ForwardedItem item;
    item.sequence = t.sequence;
    item.lease = t.lease;
    item.lease_sequence = t.lease_sequence;
    item.initial_priority = t.initial_priority();
    item.insert_time_ns = t.insert_time_ns();
    item.payload = t.payload;
    out->push_back(item);
    if (options_.verification_log) RecordForwarded(t);
  }
  return absl::OkStatus();
}

bool LearnerServiceIo::keeps_records() const {
  return forwarded_reader_ != nullptr && session_->config().frame_stack > 0;
}

absl::Span<const uint8_t> LearnerServiceIo::HeldRecord(uint32_t lease, uint64_t sequence) const {
  if (forwarded_reader_ == nullptr) return {};
  return forwarded_reader_->HeldRecord(lease, sequence);
}

uint64_t LearnerServiceIo::records_generation() const {
  if (forwarded_reader_ != nullptr) return forwarded_reader_->records_generation();
  // A server of another epoch or incarnation may have written other
  // records under the sequences it forwarded before.
  if (forward_reader_ != nullptr) return forward_reader_->stats().epoch_changes;
  return 0;
}

void LearnerServiceIo::RecordForwarded(const ForwardedTransition& t) {
  const protocol::LayoutConfig& c = session_->config();
  const bool ok = protocol::VerifySlot(reinterpret_cast<const uint8_t*>(t.header), c.slot_size,
                                       t.lease_sequence) == protocol::SlotCheck::kOk;
  options_.verification_log->Accepted(protocol::LeaseSlotIndex(c, t.lease, t.lease_sequence),
                                      t.lease_sequence, t.header->checksum, ok);
}

absl::Status LearnerServiceIo::Publish(absl::Span<const uint8_t> params) {
  return client::RetryWhileDisconnected(options_.retry, [&] { return publisher_->Publish(params); })
      .status();
}

absl::StatusOr<bool> LearnerServiceIo::PublishIfIdle(absl::Span<const uint8_t> params) {
  return client::RetryWhileDisconnected(options_.retry,
                                        [&] { return publisher_->PublishIfIdle(params); });
}

namespace {
ActorTotals SumActorLines(const std::vector<protocol::ActorLine>& lines) {
  ActorTotals totals;
  for (const protocol::ActorLine& line : lines) {
    totals.env_steps += line.env_steps;
    totals.episodes += line.episodes;
    totals.returns_count += line.returns_count;
    totals.returns_sum += line.returns_sum;
    ++totals.actors;
  }
  return totals;
}
}  // namespace

absl::StatusOr<ActorTotals> LearnerServiceIo::Read() {
  ASSIGN_OR_RETURN(
      const std::vector<protocol::ActorLine> lines,
      client::RetryWhileDisconnected(options_.retry, [&] { return stats_reader_->ReadActors(); }));
  actor_lines_->Seed(lines);
  return SumActorLines(lines);
}

absl::StatusOr<ActorTotals> LearnerServiceIo::ReadKnown() {
  ASSIGN_OR_RETURN(const std::vector<protocol::ActorLine> lines, actor_lines_->Poll());
  return SumActorLines(lines);
}

}  // namespace dreplay::learner
