// Copyright dreplay authors.

#include "learner_client/multi_node_source.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/retry.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace dreplay::learner {

namespace {

// How long the exact policy waits before it asks again when no node has
// mass (nothing inserted yet).
constexpr absl::Duration kNoMassWait = absl::Milliseconds(1);
// How long first_ready waits on one node before it asks the next.
constexpr absl::Duration kFirstReadySlice = absl::Milliseconds(1);

absl::Duration Remaining(absl::Time deadline) {
  return std::max(absl::ZeroDuration(), deadline - absl::Now());
}

}  // namespace

const char* ShardPolicyName(ShardPolicy policy) {
  switch (policy) {
    case ShardPolicy::kExact:
      return "exact";
    case ShardPolicy::kFirstReady:
      return "first_ready";
    case ShardPolicy::kRoundRobin:
      return "round_robin";
  }
  return "?";
}

absl::StatusOr<ShardPolicy> ParseShardPolicy(const std::string& name) {
  for (ShardPolicy p : {ShardPolicy::kExact, ShardPolicy::kFirstReady, ShardPolicy::kRoundRobin}) {
    if (name == ShardPolicyName(p)) return p;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown shard policy \"", name, "\" (expected exact, first_ready or round_robin)"));
}

double SamplingTvDistance(const std::vector<NodeShare>& shares) {
  double tv = 0;
  for (const NodeShare& s : shares) tv += std::abs(s.taken_share - s.mass_share);
  return tv / 2;
}

replay::RateLimiterOptions MultiNodeOptions::LimiterOptions() const {
  replay::RateLimiterOptions limit;
  limit.samples_per_insert = samples_per_insert;
  limit.error_buffer = spi_error_buffer;
  limit.min_size_to_sample = min_inserted;
  return limit;
}

absl::Status MultiNodeOptions::Validate() const {
  if (batch_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("multi-node batch_size ", batch_size, " < 1"));
  }
  if (samples_per_insert > 0) {
    if (absl::Status s = LimiterOptions().Validate(batch_size); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("multi-node limit: ", s.message()));
    }
  } else if (samples_per_insert < 0 || !std::isfinite(samples_per_insert)) {
    return absl::InvalidArgumentError(
        absl::StrCat("multi-node samples_per_insert ", samples_per_insert, " < 0"));
  }
  if (start_timeout < node_timeout) {
    return absl::InvalidArgumentError(
        absl::StrCat("multi-node start_timeout ", absl::FormatDuration(start_timeout),
                     " < node_timeout ", absl::FormatDuration(node_timeout)));
  }
  if (rejoin_interval < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("multi-node rejoin_interval ", absl::FormatDuration(rejoin_interval), " < 0"));
  }
  if (node_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("multi-node node_timeout ", absl::FormatDuration(node_timeout), " <= 0"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<MultiNodeBatchSource>> MultiNodeBatchSource::Create(
    const MultiNodeOptions& options, std::vector<NodeBatchSource*> nodes, size_t observation_size,
    rl::ObservationType type) {
  RETURN_IF_ERROR(options.Validate());
  if (nodes.empty()) return absl::InvalidArgumentError("multi-node source: no node");
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (nodes[k] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("multi-node source: node ", k, " is null"));
    }
  }
  if (observation_size < 1) {
    return absl::InvalidArgumentError("multi-node source: observation_size < 1");
  }
  return std::unique_ptr<MultiNodeBatchSource>(
      new MultiNodeBatchSource(options, std::move(nodes), observation_size, type));
}

MultiNodeBatchSource::MultiNodeBatchSource(const MultiNodeOptions& options,
                                           std::vector<NodeBatchSource*> nodes,
                                           size_t observation_size, rl::ObservationType type)
    : options_(options),
      observation_size_(observation_size),
      type_(type),
      nodes_(nodes.size()),
      shares_(nodes.size()),
      sampler_(options.seed),
      waiting_since_(nodes.size(), absl::InfiniteFuture()),
      rejoin_after_(nodes.size(), absl::InfinitePast()),
      rows_from_(nodes.size(), 0),
      taken_sum_(nodes.size(), 0.0),
      mass_sum_(nodes.size(), 0.0) {
  for (size_t k = 0; k < nodes.size(); ++k) nodes_[k].source = nodes[k];
  if (options.samples_per_insert > 0) {
    limiter_.emplace(options.LimiterOptions());
  }
}

absl::Status MultiNodeBatchSource::AddNode(NodeBatchSource* node) {
  if (node == nullptr) return absl::InvalidArgumentError("multi-node source: a null node");
  nodes_.emplace_back();
  nodes_.back().source = node;
  shares_.emplace_back();
  shares_.back().away = true;  // asked at every Next() until it stages
  waiting_since_.push_back(absl::InfiniteFuture());
  rejoin_after_.push_back(absl::InfinitePast());
  rows_from_.push_back(0);
  taken_sum_.push_back(0.0);
  mass_sum_.push_back(0.0);
  if (split_pending_) counts_.push_back(0);  // the pending split has none of it
  sums_.push_back(0.0);
  // The drift compares readings over the same nodes.
  last_mass_.clear();
  LOG(INFO) << "replay node " << nodes_.size() - 1 << " added: it takes part from its first batch";
  return absl::OkStatus();
}

void MultiNodeBatchSource::NoteInserted(size_t k, uint64_t inserted) {
  Node& node = nodes_[k];
  NodeShare& share = shares_[k];
  share.inserted = std::max(share.inserted, inserted);
  const absl::Time now = absl::Now();
  if (node.first_inserted_at == absl::InfiniteFuture()) {
    node.first_inserted = share.inserted;
    node.first_inserted_at = now;
    return;
  }
  const double seconds = absl::ToDoubleSeconds(now - node.first_inserted_at);
  if (seconds >= 1.0) {
    share.inserts_per_s = static_cast<double>(share.inserted - node.first_inserted) / seconds;
  }
}

absl::StatusOr<bool> MultiNodeBatchSource::LimiterAllows() {
  uint64_t inserted = 0;
  for (size_t k = 0; k < nodes_.size(); ++k) {
    if (!shares_[k].away) {
      absl::StatusOr<uint64_t> n = nodes_[k].source->Inserted();
      if (!n.ok() && client::IsConnectionFailure(n.status())) {
        LOG_EVERY_N(WARNING, 10) << "replay node " << k << ": " << n.status();
        MarkAway(k, /*lost=*/true);
      } else if (!n.ok()) {
        return n.status();
      } else {
        NoteInserted(k, *n);
      }
    }
    inserted += shares_[k].inserted;
  }
  limiter_->Reset(inserted, rows_given_);
  // The nodes' memories together: what they inserted (the limiter's
  // minimum is over the inserts, not the sizes after eviction).
  return limiter_->CanSample(options_.batch_size, inserted);
}

std::optional<double> MultiNodeBatchSource::samples_per_insert() const {
  uint64_t inserted = 0;
  for (const NodeShare& share : shares_) inserted += share.inserted;
  if (inserted == 0) return std::nullopt;
  return static_cast<double>(rows_given_) / static_cast<double>(inserted);
}

MultiNodeBatchSource::~MultiNodeBatchSource() = default;

uint64_t MultiNodeBatchSource::transitions_dropped() const {
  uint64_t total = dropped_;
  for (const Node& node : nodes_) total += node.source->transitions_dropped();
  return total;
}

void MultiNodeBatchSource::MarkAway(size_t k, bool lost) {
  if (!shares_[k].away) {
    LOG(WARNING) << "replay node " << k
                 << (lost ? std::string(" lost")
                          : absl::StrCat(" staged nothing within ",
                                         absl::FormatDuration(shares_[k].batches == 0
                                                                  ? options_.start_timeout
                                                                  : options_.node_timeout)))
                 << ": passed over until it stages again";
    ++shares_[k].passed_over;
  }
  shares_[k].away = true;
  waiting_since_[k] = absl::InfiniteFuture();
  if (lost) rejoin_after_[k] = absl::Now() + options_.rejoin_interval;
}

void MultiNodeBatchSource::Forget(size_t k) {
  Node& node = nodes_[k];
  shares_[k].dropped += node.queued_rows;
  dropped_ += node.queued_rows;
  node.held.clear();
  node.queued_rows = 0;
}

absl::StatusOr<bool> MultiNodeBatchSource::Fetch(size_t k, absl::Duration timeout) {
  Node& node = nodes_[k];
  auto held = std::make_unique<Held>(observation_size_, type_);
  const absl::Time asked = absl::Now();
  absl::StatusOr<bool> got = node.source->Next(timeout, &held->batch);
  if (!got.ok() && client::IsConnectionFailure(got.status())) {
    LOG_EVERY_N(WARNING, 10) << "replay node " << k << ": " << got.status();
    MarkAway(k, /*lost=*/true);
    return false;
  }
  if (!got.ok()) return got.status();
  const absl::Time now = absl::Now();
  if (!*got) {
    if (waiting_since_[k] == absl::InfiniteFuture()) waiting_since_[k] = asked;
    const absl::Duration patience =
        shares_[k].batches == 0 ? options_.start_timeout : options_.node_timeout;
    if (now - waiting_since_[k] >= patience) MarkAway(k);
    return false;
  }
  waiting_since_[k] = absl::InfiniteFuture();
  rejoin_after_[k] = absl::InfinitePast();
  if (shares_[k].away) {
    LOG(INFO) << "replay node " << k
              << (shares_[k].batches == 0 ? " stages its first batch" : " stages again");
  }
  shares_[k].away = false;
  const NodeBatch& b = held->batch;
  const size_t rows = b.rows.size();
  if (b.weights.size() != rows || b.priority_alpha.size() != rows ||
      (!b.origins.empty() && b.origins.size() != rows)) {
    return absl::InternalError(absl::StrCat(
        "replay node ", k, " gave a batch of ", rows, " rows with ", b.weights.size(), " weights, ",
        b.priority_alpha.size(), " priorities and ", b.origins.size(), " origins"));
  }
  if (b.resumed) Forget(k);
  held->priorities.assign(rows, 0.0f);
  node.queued_rows += rows;
  node.held.push_back(std::move(held));
  ++shares_[k].batches;
  RETURN_IF_ERROR(AnswerDone(k));  // a batch with no rows is answered at once
  return true;
}

absl::Status MultiNodeBatchSource::PollAway() {
  const absl::Time now = absl::Now();
  for (size_t k = 0; k < nodes_.size(); ++k) {
    if (!shares_[k].away || now < rejoin_after_[k]) continue;
    RETURN_IF_ERROR(Fetch(k, absl::ZeroDuration()).status());
  }
  return absl::OkStatus();
}

absl::Status MultiNodeBatchSource::AnswerDone(size_t k) {
  Node& node = nodes_[k];
  while (!node.held.empty()) {
    Held& front = *node.held.front();
    const size_t rows = front.batch.rows.size();
    if (front.next_row < rows || front.answered < rows) break;
    const absl::Status answered = node.source->Answer(front.batch.ticket, front.priorities);
    if (!answered.ok() && !client::IsConnectionFailure(answered)) return answered;
    // A node that went away loses this update, as a lost connection does;
    // when it returns it resends the batch (NodeBatch::resumed).
    if (!answered.ok()) {
      LOG(WARNING) << "replay node " << k << ": " << answered;
      MarkAway(k, /*lost=*/true);
    }
    node.held.pop_front();
  }
  return absl::OkStatus();
}

void MultiNodeBatchSource::TakeRows(size_t k, size_t count, rl::TransitionBatch* batch,
                                    std::vector<float>* weights,
                                    std::vector<EntryOrigin>* origins) {
  Node& node = nodes_[k];
  CHECK_LE(count, node.queued_rows);
  for (auto it = node.held.begin(); count > 0; ++it) {
    CHECK(it != node.held.end());
    Held& held = **it;
    const NodeBatch& b = held.batch;
    while (count > 0 && held.next_row < b.rows.size()) {
      const size_t row = held.next_row++;
      batch->AppendRow(b.rows, row);
      weights->push_back(b.weights[row]);
      alphas_.push_back(b.priority_alpha[row]);
      beta_ = std::max(beta_, b.beta);
      origins->push_back(b.origins.empty() ? EntryOrigin{} : b.origins[row]);
      if (origins->back().policy_lag >= 0) {
        node.lag_sum += static_cast<double>(origins->back().policy_lag);
        ++node.lag_count;
        shares_[k].policy_lag_mean = node.lag_sum / static_cast<double>(node.lag_count);
      }
      out_refs_.push_back(RowRef{&held, static_cast<uint32_t>(row)});
      --count;
      --node.queued_rows;
      ++shares_[k].rows;
      ++rows_from_[k];
      ++rows_given_;
    }
  }
}

absl::StatusOr<bool> MultiNodeBatchSource::NextExact(absl::Time deadline,
                                                     rl::TransitionBatch* batch,
                                                     std::vector<float>* weights,
                                                     std::vector<EntryOrigin>* origins) {
  for (;;) {
    if (split_pending_) {
      for (size_t k = 0; k < nodes_.size(); ++k) {
        if (counts_[k] > 0 && shares_[k].away) split_pending_ = false;
      }
    }
    if (!split_pending_) {
      ASSIGN_OR_RETURN(const bool split, Split());
      if (!split) {
        if (absl::Now() >= deadline) return false;
        absl::SleepFor(std::min(kNoMassWait, Remaining(deadline)));
        RETURN_IF_ERROR(PollAway());
        continue;
      }
    }
    bool short_of_rows = false;
    for (size_t k = 0; k < nodes_.size() && !short_of_rows; ++k) {
      while (nodes_[k].queued_rows < static_cast<size_t>(counts_[k])) {
        ASSIGN_OR_RETURN(const bool got,
                         Fetch(k, std::min(options_.node_timeout, Remaining(deadline))));
        if (got) continue;
        if (shares_[k].away) {
          short_of_rows = true;  // split again without it
          split_pending_ = false;
          break;
        }
        // The caller's time is up: the split waits for the next call, so
        // that a slow node's draws are not split less often.
        if (absl::Now() >= deadline) return false;
      }
    }
    if (short_of_rows) continue;
    split_pending_ = false;
    for (size_t k = 0; k < nodes_.size(); ++k) {
      if (counts_[k] > 0) TakeRows(k, counts_[k], batch, weights, origins);
    }
    return true;
  }
}

absl::StatusOr<double> MultiNodeBatchSource::ReadSums() {
  sums_.assign(nodes_.size(), 0.0);
  double total = 0;
  for (size_t k = 0; k < nodes_.size(); ++k) {
    if (shares_[k].away) continue;
    absl::StatusOr<double> sum = nodes_[k].source->PrioritySum();
    if (!sum.ok() && client::IsConnectionFailure(sum.status())) {
      LOG_EVERY_N(WARNING, 10) << "replay node " << k << ": " << sum.status();
      MarkAway(k, /*lost=*/true);
      continue;
    }
    if (!sum.ok()) return sum.status();
    shares_[k].priority_sum = *sum;
    // The stats READ that gave the sum gave the node's insert count too.
    absl::StatusOr<uint64_t> inserted = nodes_[k].source->Inserted();
    if (inserted.ok()) NoteInserted(k, *inserted);
    // Nothing to sample where the sum is not a positive finite number.
    sums_[k] = *sum > 0 && std::isfinite(*sum) ? *sum : 0.0;
    total += sums_[k];
  }
  return total;
}

absl::StatusOr<bool> MultiNodeBatchSource::Split() {
  ASSIGN_OR_RETURN(const double total, ReadSums());
  if (!(total > 0)) return false;
  RETURN_IF_ERROR(sampler_.SplitBatch(sums_, static_cast<int>(options_.batch_size), &counts_));
  split_pending_ = true;
  return true;
}

absl::Status MultiNodeBatchSource::RecordShares() {
  // Waits count once every node has staged (or was passed over): not the
  // start, while sites fill at their own pace.
  const absl::Time made = absl::Now();
  bool started = true;
  for (const NodeShare& share : shares_) started = started && (share.batches > 0 || share.away);
  if (started && last_batch_ != absl::InfiniteFuture()) {
    longest_gap_ = std::max(longest_gap_, made - last_batch_);
  }
  if (started) last_batch_ = made;
  // The exact policy read the sums for its split; the others read them
  // here (each node's read is cached by the node).
  double total = 0;
  if (options_.policy == ShardPolicy::kExact) {
    for (size_t k = 0; k < nodes_.size(); ++k) {
      if (shares_[k].away) sums_[k] = 0;
      total += sums_[k];
    }
  } else {
    ASSIGN_OR_RETURN(total, ReadSums());
  }
  uint64_t rows = 0;
  for (uint64_t r : rows_from_) rows += r;
  if (!(total > 0) || rows == 0) return absl::OkStatus();
  ++batches_measured_;
  double moved = 0;
  for (size_t k = 0; k < nodes_.size(); ++k) {
    taken_sum_[k] += static_cast<double>(rows_from_[k]) / static_cast<double>(rows);
    mass_sum_[k] += sums_[k] / total;
    shares_[k].taken_share = taken_sum_[k] / static_cast<double>(batches_measured_);
    shares_[k].mass_share = mass_sum_[k] / static_cast<double>(batches_measured_);
    if (!last_mass_.empty()) moved += std::abs(sums_[k] / total - last_mass_[k]);
  }
  const absl::Time now = absl::Now();
  if (last_mass_.empty() || moved > 0) {
    if (!last_mass_.empty()) {
      drift_sum_ += moved / 2;
      drift_time_ += now - last_mass_time_;
    }
    last_mass_.resize(nodes_.size());
    for (size_t k = 0; k < nodes_.size(); ++k) last_mass_[k] = sums_[k] / total;
    last_mass_time_ = now;
  }
  return absl::OkStatus();
}

std::optional<double> MultiNodeBatchSource::mass_drift_per_s() const {
  if (drift_time_ <= absl::ZeroDuration()) return std::nullopt;
  return drift_sum_ / absl::ToDoubleSeconds(drift_time_);
}

absl::StatusOr<int> MultiNodeBatchSource::NextFirstReady(absl::Time deadline) {
  const size_t n = nodes_.size();
  for (;;) {
    for (size_t i = 0; i < n; ++i) {
      const size_t k = (turn_ + i) % n;
      if (nodes_[k].queued_rows > 0) {
        turn_ = (k + 1) % n;
        return static_cast<int>(k);
      }
    }
    for (size_t i = 0; i < n; ++i) {
      const size_t k = (turn_ + i) % n;
      if (shares_[k].away) continue;
      ASSIGN_OR_RETURN(const bool got, Fetch(k, absl::ZeroDuration()));
      if (got && nodes_[k].queued_rows > 0) {
        turn_ = (k + 1) % n;
        return static_cast<int>(k);
      }
    }
    if (absl::Now() >= deadline) return -1;
    absl::SleepFor(std::min(kFirstReadySlice, Remaining(deadline)));
    RETURN_IF_ERROR(PollAway());
  }
}

absl::StatusOr<int> MultiNodeBatchSource::NextRoundRobin(absl::Time deadline) {
  const size_t n = nodes_.size();
  for (size_t tried = 0; tried < n;) {
    const size_t k = turn_ % n;
    if (shares_[k].away) {
      turn_ = (k + 1) % n;
      ++tried;
      continue;
    }
    if (nodes_[k].queued_rows > 0) {
      turn_ = (k + 1) % n;
      return static_cast<int>(k);
    }
    ASSIGN_OR_RETURN(const bool got,
                     Fetch(k, std::min(options_.node_timeout, Remaining(deadline))));
    if (got) continue;  // an empty batch was answered: ask again
    if (!shares_[k].away) {
      if (absl::Now() >= deadline) return -1;  // its turn stays
      continue;
    }
    turn_ = (k + 1) % n;
    ++tried;
  }
  return -1;
}

absl::Status MultiNodeBatchSource::GlobalWeights(absl::Span<float> weights) {
  // A row without a usable p^alpha (none should come) keeps weight 1 and
  // is left out of the batch's minimum, as a node does with probability 0.
  valid_alphas_.clear();
  valid_rows_.clear();
  for (size_t i = 0; i < alphas_.size(); ++i) {
    weights[i] = 1.0f;
    if (alphas_[i] > 0 && std::isfinite(alphas_[i])) {
      valid_alphas_.push_back(alphas_[i]);
      valid_rows_.push_back(i);
    }
  }
  if (valid_rows_.empty()) return absl::OkStatus();
  valid_weights_.resize(valid_rows_.size());
  RETURN_IF_ERROR(BatchWeights(valid_alphas_, beta_, absl::MakeSpan(valid_weights_)));
  for (size_t j = 0; j < valid_rows_.size(); ++j) weights[valid_rows_[j]] = valid_weights_[j];
  return absl::OkStatus();
}

absl::StatusOr<bool> MultiNodeBatchSource::Next(absl::Duration timeout, rl::TransitionBatch* batch,
                                                std::vector<float>* weights,
                                                std::vector<EntryOrigin>* origins) {
  if (!out_refs_.empty()) {
    return absl::FailedPreconditionError(
        "multi-node source: the batch returned before has no priorities yet");
  }
  const absl::Time deadline = absl::Now() + timeout;
  batch->Clear();
  weights->clear();
  origins->clear();
  alphas_.clear();
  beta_ = 0;
  std::fill(rows_from_.begin(), rows_from_.end(), 0);
  RETURN_IF_ERROR(PollAway());
  if (limiter_.has_value()) {
    for (;;) {
      ASSIGN_OR_RETURN(const bool allowed, LimiterAllows());
      if (allowed) break;
      if (absl::Now() >= deadline) {
        ++limiter_waits_;
        return false;
      }
      absl::SleepFor(std::min(kNoMassWait, Remaining(deadline)));
    }
  }
  if (options_.policy == ShardPolicy::kExact) {
    ASSIGN_OR_RETURN(const bool got, NextExact(deadline, batch, weights, origins));
    if (!got) return false;
    RETURN_IF_ERROR(GlobalWeights(absl::MakeSpan(*weights)));
    RETURN_IF_ERROR(RecordShares());
    return true;
  }
  ASSIGN_OR_RETURN(const int k, options_.policy == ShardPolicy::kFirstReady
                                    ? NextFirstReady(deadline)
                                    : NextRoundRobin(deadline));
  if (k < 0) return false;
  TakeRows(k, nodes_[k].held.front()->batch.rows.size() - nodes_[k].held.front()->next_row, batch,
           weights, origins);
  RETURN_IF_ERROR(RecordShares());
  return true;
}

absl::Status MultiNodeBatchSource::WritePriorities(absl::Span<const float> priorities) {
  if (priorities.size() != out_refs_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("multi-node source: ", priorities.size(),
                                                   " priorities for a batch of ", out_refs_.size(),
                                                   " rows"));
  }
  for (size_t i = 0; i < priorities.size(); ++i) {
    Held& held = *out_refs_[i].held;
    held.priorities[out_refs_[i].row] = priorities[i];
    ++held.answered;
  }
  out_refs_.clear();
  for (size_t k = 0; k < nodes_.size(); ++k) RETURN_IF_ERROR(AnswerDone(k));
  return absl::OkStatus();
}

}  // namespace dreplay::learner
