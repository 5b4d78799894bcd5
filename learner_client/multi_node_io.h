// Copyright dreplay authors.
//
// multi_node_io.h: a learner's connections to K buffer nodes (edge sites),
// buffer placement, composed into one LearnerIo (learner_loop.h):
//
//   batches    a MultiNodeBatchSource (multi_node_source.h) over one
//              ServiceNode per node: the node's LearnerServiceIo, its
//              batches answered once every row was trained on
//   params     published to every node that is not away
//   actors     the nodes' actor totals, summed
//   link       the nodes' link counts and ingest cursors, summed
//
// Offer() hands over a node that joins while the learner trains (from any
// thread: connecting may take seconds); the loop's thread adds it at its
// next batch (MultiNodeBatchSource::AddNode).
//
// A node that is away (MultiNodeBatchSource's node_timeout) is skipped by
// the publications and the sums (its last counts stand) until it stages
// again. Each node's LearnerServiceIo should retry for no longer than the
// node timeout (LearnerServiceIoOptions::retry), so that a dead node costs
// the learner at most that once, then the rejoin polls.
//
//   std::vector<MultiNodeIo::Node> nodes = ...;  // sessions and services
//   ASSIGN_OR_RETURN(auto multi, MultiNodeIo::Create(std::move(nodes), options, obs, type));
//   LearnerIo io = multi->io();
//
// Thread safety: Offer() from any thread; the rest on the loop's thread.

#ifndef DREPLAY_LEARNER_CLIENT_MULTI_NODE_IO_H_
#define DREPLAY_LEARNER_CLIENT_MULTI_NODE_IO_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/session.h"
#include "common/mutex.h"
#include "learner_client/learner_io.h"
#include "learner_client/multi_node_source.h"
#include "learner_client/service_io.h"
#include "protocol/layout.h"

namespace dreplay::learner {

// One node's LearnerServiceIo (buffer placement) as a NodeBatchSource.
//
// A node whose connection failed (its clients' retries over) reconnects on
// a thread of its own (ClientSession::Reconnect), so that asking a dead node
// again never blocks the learner: until that attempt ends every call
// answers Unavailable at once, and the learner's thread touches nothing of
// the node's session meanwhile. A failed attempt is made again at the next
// call.
class ServiceNode : public NodeBatchSource {
 public:
  // `session` and `service` (over that session) are not owned and outlive
  // this object. S_k is READ again when the last READ is older than
  // `sum_refresh` (the server publishes it every stats interval, 100 ms by
  // default).
  ServiceNode(client::ClientSession* session, LearnerServiceIo* service,
              absl::Duration sum_refresh);
  ~ServiceNode() override;

  absl::StatusOr<bool> Next(absl::Duration timeout, NodeBatch* batch) override;
  absl::Status Answer(uint64_t ticket, absl::Span<const float> priorities) override;
  absl::StatusOr<double> PrioritySum() override;
  absl::StatusOr<uint64_t> Inserted() override;
  uint64_t transitions_dropped() const override { return service_->transitions_dropped(); }

  // Batches given and not answered yet.
  size_t unanswered() const { return pending_.size(); }
  // The node's link counts (link_stats() of its service), as of the last
  // call not made while it reconnected (its session is not touched then).
  LinkStats link_stats();

 private:
  // OK when the session may be used now: no reconnection in flight, or one
  // that just succeeded. Unavailable otherwise (starting an attempt when
  // the last one failed).
  absl::Status Usable();
  // After a connection failure of the service: starts reconnecting.
  void StartRejoin(const absl::Status& why);

  // What answering a batch needs.
  struct Pending {
    uint64_t batch_number = 0;
    uint64_t epoch = 0;
    uint64_t incarnation = 0;
    std::vector<protocol::PriorityRecord> records;  // every staged entry
    std::vector<uint32_t> kept_entries;             // the entry of each row
  };

  client::ClientSession* const session_;
  LearnerServiceIo* const service_;
  const absl::Duration sum_refresh_;
  // The reconnection thread, its end and result (read after `done`).
  std::thread rejoin_;
  std::atomic<bool> rejoin_done_{false};
  absl::Status rejoin_status_;
  absl::Status lost_why_;  // the failure that started it; OK: not lost
  LinkStats link_;
  std::map<uint64_t, Pending> pending_;  // by ticket
  uint64_t next_ticket_ = 1;
  // The batch given last (epoch, incarnation, number), to see a restart or
  // a resend.
  bool given_any_ = false;
  Pending last_given_;
  // The stats READ last (S_k, inserts) and when; READ again when older
  // than sum_refresh_.
  absl::Status RefreshStats();
  protocol::StatsBlock stats_{};
  absl::Time stats_read_ = absl::InfinitePast();
};

class MultiNodeIo : public BatchSource, public ParamsSink, public ActorStatsSource {
 public:
  struct Node {
    std::string address;  // for messages
    std::unique_ptr<client::ClientSession> session;
    std::unique_ptr<LearnerServiceIo> service;
  };

  // `nodes` (>= 1, each with a session and a buffer-placement service).
  static absl::StatusOr<std::unique_ptr<MultiNodeIo>> Create(
      std::vector<Node> nodes, const MultiNodeOptions& options, size_t observation_size,
      rl::ObservationType type, absl::Duration sum_refresh = absl::Milliseconds(50));
  ~MultiNodeIo() override;

  // batches, params, actors, link_stats, server_ingested(_known); points
  // into this object. on_progress and wall_clock_ns are the caller's.
  LearnerIo io();

  // A node to join (its session and service ready, as Create's): added at
  // the loop's next batch. Any thread.
  void Offer(Node node);
  // Nodes offered so far, added or not (any thread).
  size_t offered() const;

  // BatchSource: adds the nodes offered, then the MultiNodeBatchSource's.
  absl::StatusOr<bool> Next(absl::Duration timeout, rl::TransitionBatch* batch,
                            std::vector<float>* weights,
                            std::vector<EntryOrigin>* origins) override;
  absl::Status WritePriorities(absl::Span<const float> priorities) override;
  uint64_t transitions_dropped() const override { return source_->transitions_dropped(); }

  MultiNodeBatchSource* source() { return source_.get(); }
  size_t size() const { return nodes_.size(); }
  const protocol::LayoutConfig& config(size_t k) const { return nodes_[k].session->config(); }
  const std::string& address(size_t k) const { return nodes_[k].address; }
  // Bytes over node k's link so far, and its ingest cursor as last read.
  uint64_t link_bytes(size_t k) { return service_nodes_[k]->link_stats().total_bytes(); }
  uint64_t ingested(size_t k) const { return last_ingested_[k]; }

  // ParamsSink: to every node not away.
  absl::Status Publish(absl::Span<const uint8_t> params) override;
  absl::StatusOr<bool> PublishIfIdle(absl::Span<const uint8_t> params) override;
  // ActorStatsSource: summed over the nodes (an away node's last totals).
  absl::StatusOr<ActorTotals> Read() override;
  absl::StatusOr<ActorTotals> ReadKnown() override;

 private:
  MultiNodeIo(std::vector<Node> nodes, absl::Duration sum_refresh);
  bool away(size_t k) const { return source_ != nullptr && source_->shares()[k].away; }
  // Sums `read` over the nodes, an away node's (or one whose connection
  // failed) last value standing in.
  absl::StatusOr<ActorTotals> SumActors(bool known);
  absl::StatusOr<uint64_t> SumIngested(bool known);
  // Adds `node` to the nodes and the source.
  absl::Status Adopt(Node node);

  const absl::Duration sum_refresh_;
  mutable Mutex offer_mu_;
  std::vector<Node> offers_ ABSL_GUARDED_BY(offer_mu_);
  size_t offered_ ABSL_GUARDED_BY(offer_mu_) = 0;
  std::vector<Node> nodes_;
  std::vector<LearnerIo> node_io_;  // each node's own
  std::vector<std::unique_ptr<ServiceNode>> service_nodes_;
  std::unique_ptr<MultiNodeBatchSource> source_;
  std::vector<ActorTotals> last_actors_;
  std::vector<uint64_t> last_ingested_;
};

}  // namespace dreplay::learner

#endif  // DREPLAY_LEARNER_CLIENT_MULTI_NODE_IO_H_
