// Copyright dreplay authors.
//
// learner_io.h: what the learner loop (learner_loop.h) takes its batches,
// transitions and actor figures from and publishes its parameters to,
// without the loop: the sources a client builds (service_io.h over one
// buffer node, multi_node_io.h over several) and the Python bindings use,
// none of which links the networks.
//
// Thread safety: interfaces; each implementation says.

#ifndef DREPLAY_LEARNER_CLIENT_LEARNER_IO_H_
#define DREPLAY_LEARNER_CLIENT_LEARNER_IO_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "learner_client/metrics.h"
#include "rl/transition.h"

namespace dreplay::learner {

// Where the replay memory is sampled: at the buffer node (buffer), at the
// learner from every transition forwarded in order (learner), or at the
// learner from what the buffer node forwards once each, chosen by priority
// or by a forwarding control (hybrid; replay_server --forward).
enum class ReplayPlacement { kBuffer, kLearner, kHybrid };
// "buffer", "learner", "hybrid".
const char* ReplayPlacementName(ReplayPlacement placement);
// Inverse of ReplayPlacementName; InvalidArgument naming the bad value.
absl::StatusOr<ReplayPlacement> ParseReplayPlacement(const std::string& name);

// Where one entry of a batch came from, for the metrics.
struct EntryOrigin {
  // SlotHeader::insert_time_ns: the actor's wall clock (ns since the Unix
  // epoch) when it sealed the slot; 0: unknown (no data age).
  uint64_t insert_time_ns = 0;
  // True when its payload crossed the link with this batch; false when the
  // learner already held it (a transfer-once cache).
  bool arrived = true;
  // SlotHeader::params_version: the low 32 bits of the version of the
  // parameters the actor acted with; 0: unknown.
  uint32_t params_version = 0;
  // Policy-version lag: the versions the learner had published to the
  // entry's server when it took the batch, minus params_version (the
  // service sets it; -1: unknown).
  int64_t policy_lag = -1;
};

// Buffer placement: the server's pre-sampled batches.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Waits up to `timeout` for the next batch. true: `batch` (cleared first)
  // holds its transitions, `weights` their importance-sampling weights and
  // `origins` (cleared first) one EntryOrigin per transition, or nothing
  // when the source does not know (all arrived, no insert times); false:
  // none arrived in time. Errors: the connection's, when it cannot be
  // re-established. An entry whose payload does not decode is left out of
  // `batch` (counted in transitions_dropped()).
  virtual absl::StatusOr<bool> Next(absl::Duration timeout, rl::TransitionBatch* batch,
                                    std::vector<float>* weights,
                                    std::vector<EntryOrigin>* origins) = 0;
  // The new priorities of the batch Next() returned last, one per
  // transition.
  virtual absl::Status WritePriorities(absl::Span<const float> priorities) = 0;
  // Entries the source itself left out of the batches it returned (they did
  // not decode), since it was made.
  virtual uint64_t transitions_dropped() const { return 0; }
};

// A transition forwarded by the server: a view valid until the next
// TransitionStream::Next().
struct ForwardedItem {
  uint64_t sequence = 0;
  // The lease it was written in and its sequence there (frame records
  // refer back along it).
  uint32_t lease = 0;
  uint64_t lease_sequence = 0;
  float initial_priority = 0;   // the actor's; <= 0: none
  uint64_t insert_time_ns = 0;  // as EntryOrigin's
  // The encoded transition, possibly followed by the actor's padding.
  absl::Span<const uint8_t> payload;
};

// Learner placement: every transition the server ingests, in order.
class TransitionStream {
 public:
  virtual ~TransitionStream() = default;
  // Clears *out and fills it with what arrived, waiting up to `timeout` for
  // something; OK with *out empty when nothing did.
  virtual absl::Status Next(absl::Duration timeout, std::vector<ForwardedItem>* out) = 0;
  // Transitions the server has ingested (the actors generated), as last
  // seen without asking the link; nullopt when the stream does not know.
  // May start again lower after a server restart.
  virtual std::optional<uint64_t> generated() const { return std::nullopt; }
  // Frames stored once, hybrid placement: the stream keeps every record
  // it received, by the server's slot (the forwarded batches leave out
  // those it holds), and HeldRecord() finds the record of (lease, sequence)
  // while it is kept, empty otherwise. Streams that hand over every record
  // in order (the learner placement) keep none.
  virtual bool keeps_records() const { return false; }
  virtual absl::Span<const uint8_t> HeldRecord(uint32_t /*lease*/, uint64_t /*sequence*/) const {
    return {};
  }
  // Changes whenever records under a (lease, sequence) the stream gave
  // before may differ from those it gives now (a restarted server may
  // write other records under the same sequences); a hybrid stream then
  // forgets the records it held.
  virtual uint64_t records_generation() const { return 0; }
};

// Where the learner publishes its parameters.
class ParamsSink {
 public:
  virtual ~ParamsSink() = default;
  // Publishes a params buffer (rl/params_format.h); blocks until readers
  // can see it.
  virtual absl::Status Publish(absl::Span<const uint8_t> params) = 0;
  // Publishes without waiting for the link when nothing is in flight
  // (true), or does nothing while an earlier publication is (false). The
  // default blocks in Publish().
  virtual absl::StatusOr<bool> PublishIfIdle(absl::Span<const uint8_t> params) {
    const absl::Status status = Publish(params);
    if (!status.ok()) return status;
    return true;
  }
};

// What the actors report.
class ActorStatsSource {
 public:
  virtual ~ActorStatsSource() = default;
  virtual absl::StatusOr<ActorTotals> Read() = 0;
  // What is known without waiting for the link (the periodic progress and
  // snapshots use it; the last progress record reads). By default, Read().
  virtual absl::StatusOr<ActorTotals> ReadKnown() { return Read(); }
};

// Where the run stood when a parameter snapshot was taken: what offline
// evaluation (tools/experiment/evaluate_snapshots) plots the greedy return against.
struct SnapshotRecord {
  uint64_t index = 0;  // 0, 1, 2, ... in the order taken
  double wall_s = 0;   // seconds since Run() started
  uint64_t train_steps = 0;
  uint64_t env_steps = 0;         // the actors' total, as last read
  uint64_t link_bytes_total = 0;  // LinkStats::total_bytes() now

  // One JSON object on one line (keys as the fields).
  std::string ToJson() const;
};

// The loop's connections; not owned, must outlive the loop. `batches` is
// required with the buffer placement, `stream` with the learner placement;
// the rest may be null / empty.
struct LearnerIo {
  BatchSource* batches = nullptr;
  TransitionStream* stream = nullptr;
  ParamsSink* params = nullptr;
  ActorStatsSource* actors = nullptr;
  // Cumulative traffic over the learner's link (bytes by class, fetched
  // transitions), as its clients count it; empty: none counted.
  std::function<LinkStats()> link_stats;
  // Called with every progress record (and the final one).
  std::function<void(const ProgressRecord&)> on_progress;
  // Buffer placement: the server's ingest_cursor now (transitions its
  // replay memory has received), for the achieved samples per insert; empty:
  // unknown.
  std::function<absl::StatusOr<uint64_t>()> server_ingested;
  // The same as known without waiting for the link, possibly older than
  // the link counts (the periodic progress uses it; the last progress
  // record, whose coverage must not exceed 1, reads); empty: read.
  std::function<absl::StatusOr<uint64_t>()> server_ingested_known;
  // The mean percentile, within the buffer node's priority distribution,
  // of the transitions that crossed the link (protocol StatsBlock), READ
  // for the last progress record only; empty or nullopt: unknown.
  std::function<absl::StatusOr<std::optional<double>>()> crossing_percentile;
  // The wall clock (ns since the Unix epoch, CLOCK_REALTIME) that data ages
  // are measured with; empty: absl::Now().
  std::function<uint64_t()> wall_clock_ns;
  // Receives every parameter snapshot (LearnerLoopOptions::snapshot_interval)
  // with the online network's params buffer (rl/params_format.h); an error
  // ends the run. Required when snapshots are on.
  std::function<absl::Status(const SnapshotRecord&, absl::Span<const uint8_t>)> on_snapshot;
};

}  // namespace dreplay::learner

#endif  // DREPLAY_LEARNER_CLIENT_LEARNER_IO_H_
