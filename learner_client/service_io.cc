// Copyright dreplay authors.

#include "learner_client/service_io.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "learner_client/frame_batch.h"
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
    const uint64_t generation = session->generation();
    Created io = CreateOnce(session, options);
    if (!io.ok() && client::IsConnectionFailure(io.status())) {
      RETURN_IF_ERROR(session->Reconnect(generation, io.status()));
      return CreateOnce(session, options);
    }
    return io;
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
  const uint32_t frame_stack = session->config().frame_stack;
  if (frame_stack > 0) {
    io->frames_ = std::make_unique<FrameBatchAssembler>(session->config());
  }
  if (options.placement == ReplayPlacement::kBuffer) {
    RETURN_IF_ERROR(CheckNotForwarding(session->policy()));
    BatchReaderOptions reader = options.batch_reader;
    reader.learner_cache = options.learner_cache;
    ASSIGN_OR_RETURN(io->batch_reader_, BatchReader::Create(session, reader));
    ASSIGN_OR_RETURN(io->priority_writer_, PriorityWriter::Create(session));
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
      const protocol::ServerLine line,
      client::RetryWhileDisconnected(options_.retry, [&]() -> absl::StatusOr<protocol::ServerLine> {
        const uint64_t generation = session_->generation();
        absl::StatusOr<protocol::ServerLine> read = session_->ReadServerLine();
        if (!read.ok() && client::IsConnectionFailure(read.status())) {
          RETURN_IF_ERROR(session_->Reconnect(generation, read.status()));
          return session_->ReadServerLine();
        }
        return read;
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
  absl::StatusOr<StagedBatch> staged = ReadStaged(timeout);
  if (absl::IsNotFound(staged.status())) return false;
  if (!staged.ok()) return staged.status();
  batch->Clear();
  weights->clear();
  origins->clear();
  kept_entries_.clear();
  if (frames_ != nullptr) frames_->Index(*staged);
  for (uint32_t i = 0; i < staged->size(); ++i) {
    absl::Status s;
    if (frames_ != nullptr) {
      s = frames_->Add(*staged, i, batch);  // the stacks, from the batch's records
    } else {
      absl::StatusOr<absl::Span<const uint8_t>> encoded =
          rl::EncodedTransitionPrefix(staged->payload(i));
      s = encoded.ok() ? batch->AddEncoded(*encoded) : encoded.status();
    }
    if (!s.ok()) {
      ++transitions_dropped_;
      LOG_EVERY_N(WARNING, 1000) << "batch " << staged->batch_number() << " entry " << i
                                 << " does not decode, dropped (" << transitions_dropped_
                                 << " in all): " << s.message();
      continue;
    }
    kept_entries_.push_back(i);
    weights->push_back(staged->weight(i));
    if (options_.verification_log) RecordAccepted(*staged, i);
    origins->push_back({staged->insert_time_ns(i), staged->arrived(i)});
  }
  last_batch_ = *std::move(staged);
  return true;
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

void LearnerServiceIo::RecordAccepted(const StagedBatch& batch, uint32_t i) {
  const protocol::BatchEntry& entry = batch.entry(i);
  const bool ok = protocol::VerifySlot(batch.slot(i), session_->config().slot_size,
                                       entry.slot_sequence) == protocol::SlotCheck::kOk;
  options_.verification_log->Accepted(protocol::EntryIndex(entry), entry.slot_sequence,
                                      batch.slot_header(i).checksum, ok);
}

absl::Status LearnerServiceIo::WritePriorities(absl::Span<const float> priorities) {
  if (options_.placement != ReplayPlacement::kBuffer) {
    return absl::FailedPreconditionError(absl::StrCat("no priorities to write back in the ",
                                                      ReplayPlacementName(options_.placement),
                                                      " placement"));
  }
  absl::Span<const float> all = priorities;
  if (kept_entries_.size() != last_batch_.size() && priorities.size() == kept_entries_.size()) {
    // Entries that did not decode get the lowest priority.
    entry_priorities_.assign(last_batch_.size(), 0.0f);
    for (size_t k = 0; k < kept_entries_.size(); ++k) {
      entry_priorities_[kept_entries_[k]] = priorities[k];
    }
    all = entry_priorities_;
  }
  return client::RetryWhileDisconnected(options_.retry,
                                        [&] { return priority_writer_->Write(last_batch_, all); });
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
