// Copyright dreplay authors.

#include "learner_client/multi_node_io.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/retry.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace dreplay::learner {

ServiceNode::ServiceNode(client::ClientSession* session, LearnerServiceIo* service,
                         absl::Duration sum_refresh)
    : session_(session), service_(service), sum_refresh_(sum_refresh) {}

ServiceNode::~ServiceNode() {
  if (rejoin_.joinable()) rejoin_.join();
}

absl::Status ServiceNode::Usable() {
  if (lost_why_.ok()) return absl::OkStatus();
  if (rejoin_.joinable()) {
    if (!rejoin_done_.load(std::memory_order_acquire)) {
      return absl::UnavailableError("reconnecting to the replay node");
    }
    rejoin_.join();
    if (rejoin_status_.ok()) {
      lost_why_ = absl::OkStatus();
      return absl::OkStatus();
    }
  }
  const absl::Status last = rejoin_status_.ok() ? lost_why_ : rejoin_status_;
  StartRejoin(lost_why_);
  return absl::UnavailableError(absl::StrCat("replay node lost: ", last.message()));
}

void ServiceNode::StartRejoin(const absl::Status& why) {
  CHECK(!rejoin_.joinable());
  lost_why_ = why.ok() ? absl::UnavailableError("lost") : why;
  link_ = service_->link_stats();
  rejoin_done_.store(false, std::memory_order_relaxed);
  const uint64_t generation = session_->generation();
  rejoin_ = std::thread([this, generation, why = lost_why_] {
    rejoin_status_ = session_->Reconnect(generation, why);
    rejoin_done_.store(true, std::memory_order_release);
  });
}

LinkStats ServiceNode::link_stats() {
  if (!rejoin_.joinable()) link_ = service_->link_stats();
  return link_;
}

absl::StatusOr<bool> ServiceNode::Next(absl::Duration timeout, NodeBatch* batch) {
  RETURN_IF_ERROR(Usable());
  absl::StatusOr<bool> next =
      service_->Next(timeout, &batch->rows, &batch->weights, &batch->origins);
  if (!next.ok() && client::IsConnectionFailure(next.status())) StartRejoin(next.status());
  if (!next.ok()) return next.status();
  if (!*next) return false;
  const AssembledBatch* last = service_->last_batch();
  if (last == nullptr) return absl::InternalError("a batch came without its assembly");
  batch->priority_alpha = last->priority_alpha;
  batch->beta = last->beta;
  Pending p;
  p.batch_number = last->batch_number;
  p.epoch = last->epoch;
  p.incarnation = last->incarnation;
  p.records = last->records;
  p.kept_entries = last->kept_entries;
  // Batches follow each other by number within one epoch of one server
  // process. Anything else is a restarted server, or the reader resending
  // batches whose updates were lost: those given before are void.
  batch->resumed =
      given_any_ && (p.epoch != last_given_.epoch || p.incarnation != last_given_.incarnation ||
                     p.batch_number != last_given_.batch_number + 1);
  if (batch->resumed) pending_.clear();
  given_any_ = true;
  last_given_.batch_number = p.batch_number;
  last_given_.epoch = p.epoch;
  last_given_.incarnation = p.incarnation;
  batch->ticket = next_ticket_++;
  pending_.emplace(batch->ticket, std::move(p));
  return true;
}

absl::Status ServiceNode::Answer(uint64_t ticket, absl::Span<const float> priorities) {
  auto it = pending_.find(ticket);
  if (it == pending_.end()) return absl::OkStatus();  // void: a resumed batch replaced it
  Pending& p = it->second;
  if (priorities.size() != p.kept_entries.size()) {
    return absl::InvalidArgumentError(absl::StrCat("batch ", p.batch_number, " has ",
                                                   p.kept_entries.size(), " rows but ",
                                                   priorities.size(), " priorities were given"));
  }
  // Entries that did not decode keep the lowest priority.
  for (protocol::PriorityRecord& r : p.records) r.priority = 0.0f;
  for (size_t k = 0; k < priorities.size(); ++k) {
    p.records[p.kept_entries[k]].priority = priorities[k];
  }
  RETURN_IF_ERROR(Usable());
  const absl::Status written =
      service_->WriteRecords(p.batch_number, p.epoch, p.incarnation, p.records);
  pending_.erase(it);
  if (client::IsConnectionFailure(written)) StartRejoin(written);
  return written;
}

absl::Status ServiceNode::RefreshStats() {
  const absl::Time now = absl::Now();
  if (now - stats_read_ < sum_refresh_) return absl::OkStatus();
  RETURN_IF_ERROR(Usable());
  absl::StatusOr<protocol::StatsBlock> stats = service_->ReadStats();
  if (!stats.ok() && client::IsConnectionFailure(stats.status())) StartRejoin(stats.status());
  if (!stats.ok()) return stats.status();
  stats_ = *stats;
  stats_read_ = now;
  return absl::OkStatus();
}

absl::StatusOr<double> ServiceNode::PrioritySum() {
  RETURN_IF_ERROR(RefreshStats());
  return stats_.priority_sum;
}

absl::StatusOr<uint64_t> ServiceNode::Inserted() {
  RETURN_IF_ERROR(RefreshStats());
  return stats_.inserted;
}

absl::StatusOr<std::unique_ptr<MultiNodeIo>> MultiNodeIo::Create(std::vector<Node> nodes,
                                                                 const MultiNodeOptions& options,
                                                                 size_t observation_size,
                                                                 rl::ObservationType type,
                                                                 absl::Duration sum_refresh) {
  if (nodes.empty()) return absl::InvalidArgumentError("no replay node");
  for (const Node& node : nodes) {
    if (node.session == nullptr || node.service == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("replay node ", node.address, " has no session or service"));
    }
  }
  auto io = std::unique_ptr<MultiNodeIo>(new MultiNodeIo(std::move(nodes), sum_refresh));
  std::vector<NodeBatchSource*> sources;
  for (auto& n : io->service_nodes_) sources.push_back(n.get());
  ASSIGN_OR_RETURN(io->source_,
                   MultiNodeBatchSource::Create(options, sources, observation_size, type));
  return io;
}

MultiNodeIo::MultiNodeIo(std::vector<Node> nodes, absl::Duration sum_refresh)
    : sum_refresh_(sum_refresh),
      nodes_(std::move(nodes)),
      last_actors_(nodes_.size()),
      last_ingested_(nodes_.size(), 0) {
  for (Node& node : nodes_) {
    node_io_.push_back(node.service->io());
    service_nodes_.push_back(
        std::make_unique<ServiceNode>(node.session.get(), node.service.get(), sum_refresh));
  }
}

void MultiNodeIo::Offer(Node node) {
  MutexLock lock(&offer_mu_);
  offers_.push_back(std::move(node));
  ++offered_;
}

size_t MultiNodeIo::offered() const {
  MutexLock lock(&offer_mu_);
  return offered_;
}

absl::Status MultiNodeIo::Adopt(Node node) {
  if (node.session == nullptr || node.service == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("replay node ", node.address, " has no session or service"));
  }
  node_io_.push_back(node.service->io());
  service_nodes_.push_back(
      std::make_unique<ServiceNode>(node.session.get(), node.service.get(), sum_refresh_));
  last_actors_.emplace_back();
  last_ingested_.push_back(0);
  LOG(INFO) << "replay node " << nodes_.size() << " is " << node.address;
  nodes_.push_back(std::move(node));
  return source_->AddNode(service_nodes_.back().get());
}

absl::StatusOr<bool> MultiNodeIo::Next(absl::Duration timeout, rl::TransitionBatch* batch,
                                       std::vector<float>* weights,
                                       std::vector<EntryOrigin>* origins) {
  std::vector<Node> offers;
  {
    MutexLock lock(&offer_mu_);
    offers.swap(offers_);
  }
  for (Node& node : offers) RETURN_IF_ERROR(Adopt(std::move(node)));
  return source_->Next(timeout, batch, weights, origins);
}

absl::Status MultiNodeIo::WritePriorities(absl::Span<const float> priorities) {
  return source_->WritePriorities(priorities);
}

// The source (which refers to the service nodes) goes first.
MultiNodeIo::~MultiNodeIo() { source_.reset(); }

LearnerIo MultiNodeIo::io() {
  LearnerIo io;
  io.batches = this;
  io.params = this;
  io.actors = this;
  io.link_stats = [this] {
    LinkStats sum;
    for (auto& node : service_nodes_) {
      const LinkStats s = node->link_stats();
      sum.experience += s.experience;
      sum.metadata += s.metadata;
      sum.polling += s.polling;
      sum.priorities += s.priorities;
      sum.params += s.params;
      sum.control += s.control;
      sum.transitions_fetched += s.transitions_fetched;
      sum.distinct_transitions_fetched += s.distinct_transitions_fetched;
    }
    return sum;
  };
  io.server_ingested = [this] { return SumIngested(/*known=*/false); };
  io.server_ingested_known = [this] { return SumIngested(/*known=*/true); };
  return io;
}

absl::StatusOr<uint64_t> MultiNodeIo::SumIngested(bool known) {
  uint64_t sum = 0;
  for (size_t k = 0; k < nodes_.size(); ++k) {
    if (!away(k)) {
      absl::StatusOr<uint64_t> n =
          known ? node_io_[k].server_ingested_known() : node_io_[k].server_ingested();
      if (n.ok()) {
        // A restarted node counts from its checkpoint again: never less.
        last_ingested_[k] = std::max(last_ingested_[k], *n);
      } else if (!client::IsConnectionFailure(n.status())) {
        return n.status();
      }
    }
    sum += last_ingested_[k];
  }
  return sum;
}

absl::StatusOr<ActorTotals> MultiNodeIo::SumActors(bool known) {
  ActorTotals sum;
  for (size_t k = 0; k < nodes_.size(); ++k) {
    if (!away(k)) {
      absl::StatusOr<ActorTotals> t =
          known ? nodes_[k].service->ReadKnown() : nodes_[k].service->Read();
      if (t.ok()) {
        last_actors_[k] = *t;
      } else if (!client::IsConnectionFailure(t.status())) {
        return t.status();
      }
    }
    const ActorTotals& t = last_actors_[k];
    sum.env_steps += t.env_steps;
    sum.episodes += t.episodes;
    sum.returns_count += t.returns_count;
    sum.returns_sum += t.returns_sum;
    sum.actors += t.actors;
  }
  return sum;
}

absl::StatusOr<ActorTotals> MultiNodeIo::Read() { return SumActors(/*known=*/false); }
absl::StatusOr<ActorTotals> MultiNodeIo::ReadKnown() { return SumActors(/*known=*/true); }

absl::Status MultiNodeIo::Publish(absl::Span<const uint8_t> params) {
  for (size_t k = 0; k < nodes_.size(); ++k) {
    if (away(k)) continue;
    const absl::Status s = nodes_[k].service->Publish(params);
    if (!s.ok() && !client::IsConnectionFailure(s)) return s;
    LOG_IF(WARNING, !s.ok()) << "parameters not published to " << nodes_[k].address << ": " << s;
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> MultiNodeIo::PublishIfIdle(absl::Span<const uint8_t> params) {
  bool any = false;
  for (size_t k = 0; k < nodes_.size(); ++k) {
    if (away(k)) continue;
    absl::StatusOr<bool> s = nodes_[k].service->PublishIfIdle(params);
    if (!s.ok() && !client::IsConnectionFailure(s.status())) return s.status();
    LOG_IF(WARNING, !s.ok()) << "parameters not published to " << nodes_[k].address << ": "
                             << s.status();
    any = any || (s.ok() && *s);
  }
  return any;
}

}  // namespace dreplay::learner
