// Copyright dreplay authors.
//
// multi_node_source.h: one learner over K buffer nodes (edge sites), in the
// buffer placement. A MultiNodeBatchSource is the loop's BatchSource
// (learner_loop.h); below it each node is a NodeBatchSource that gives the
// batches that node pre-sampled and takes their priority updates.
//
// How a batch is made depends on the shard policy:
//
//   exact        every draw picks node k with probability S_k / sum S (S_k:
//                the node's sum of p^alpha, PrioritySum()) and takes the
//                next of node k's staged draws, so that a transition i is
//                drawn with probability p_i^alpha / sum_k S_k, exactly as
//                from one memory holding every node's transitions
//                (global_sampling.h). A node's draws the batch did not take
//                stay for the next batch; its staged batch is answered once
//                every row of it was trained on. Weights: global
//                (BatchWeights), with the largest beta of the batches the
//                rows came from (each node anneals beta by its own count).
//   first_ready  the batch of whichever node has one staged first, whole,
//                with that node's weights (a semi-asynchronous edge layer).
//   round_robin  the nodes' batches in turn, whole, with each node's own
//                weights (Reverb's sharding: uniform over nodes).
//
// Sites that come and go: AddNode() adds a node while the source is in
// use. A node whose batch is not there within
// node_timeout (start_timeout before its first batch; while the policy
// needs it) is passed over: it is away, left
// out of the split (exact) or of the turn (round_robin), until a batch of
// it is staged again, which every Next() asks of it without waiting. So a
// dead node stalls the learner at most node_timeout. Exact sampling is
// exact over the nodes that are not away.
//
// Staleness: S_k is read when a batch is split, some time after node k
// sampled the draws the batch takes from it; the sampling is exact when
// S_k has not changed meanwhile relative to the others' (the bias is the
// relative change of the nodes' masses between their sampling and the
// read; docs/edge-sites.md measures it).
//
//   std::vector<NodeBatchSource*> nodes = {&site_a, &site_b};
//   ASSIGN_OR_RETURN(auto source, MultiNodeBatchSource::Create(options, nodes, obs_size));
//   // as any BatchSource: Next(), then WritePriorities() for its rows
//
// Thread safety: not thread-safe; one thread uses the source and its nodes.

#ifndef DREPLAY_LEARNER_CLIENT_MULTI_NODE_SOURCE_H_
#define DREPLAY_LEARNER_CLIENT_MULTI_NODE_SOURCE_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "learner_client/global_sampling.h"
#include "learner_client/learner_io.h"
#include "replay/rate_limiter.h"
#include "rl/transition.h"

namespace dreplay::learner {

enum class ShardPolicy { kExact, kFirstReady, kRoundRobin };
// "exact", "first_ready", "round_robin".
const char* ShardPolicyName(ShardPolicy policy);
// Inverse of ShardPolicyName; InvalidArgument naming the bad value.
absl::StatusOr<ShardPolicy> ParseShardPolicy(const std::string& name);

// A batch one node staged, decoded.
struct NodeBatch {
  NodeBatch(size_t observation_size, rl::ObservationType type) : rows(observation_size, type) {}

  rl::TransitionBatch rows;
  std::vector<float> weights;         // the node's own importance-sampling weights
  std::vector<float> priority_alpha;  // p^alpha of each row as the node sampled it
  std::vector<EntryOrigin> origins;   // one per row, or empty (all arrived)
  float beta = 0;                     // the exponent the node's weights used
  uint64_t ticket = 0;                // names the batch to Answer()
  // True when batches given before are no longer answered (the node
  // restarted, or resent batches whose updates were lost): their rows not
  // yet trained on are dropped, their tickets forgotten.
  bool resumed = false;
};

class NodeBatchSource {
 public:
  virtual ~NodeBatchSource() = default;
  // Waits up to `timeout` for the node's next batch (false: none staged in
  // time). Batches given before may still be unanswered.
  virtual absl::StatusOr<bool> Next(absl::Duration timeout, NodeBatch* batch) = 0;
  // The new priorities of batch `ticket`, one per row, in the order the
  // batches were given. A ticket a resumed batch made void: OK, nothing
  // written.
  virtual absl::Status Answer(uint64_t ticket, absl::Span<const float> priorities) = 0;
  // S_k, the node's sum of p^alpha over its memory, as last published.
  virtual absl::StatusOr<double> PrioritySum() = 0;
  // Transitions the node has inserted into its memory, as last published
  // (its StatsBlock::inserted; a restored node continues its count).
  virtual absl::StatusOr<uint64_t> Inserted() = 0;
  // Entries the node left out of its batches (they did not decode).
  virtual uint64_t transitions_dropped() const = 0;
};

struct MultiNodeOptions {
  ShardPolicy policy = ShardPolicy::kExact;
  // Exact: draws per batch (>= 1; the nodes' batch size is usual).
  uint32_t batch_size = 64;
  // Exact: the split's random stream.
  uint64_t seed = 1;
  // How long a node the policy needs may take to stage a batch before it
  // is passed over (> 0).
  absl::Duration node_timeout = absl::Seconds(1);
  // The same for a node that has not staged its first batch yet (it fills
  // up to its min_size_to_sample), so that sites that start at different
  // times all take part from the first batch; >= node_timeout.
  absl::Duration start_timeout = absl::Seconds(30);
  // How often a node whose connection failed is asked again (a node that
  // reconnects off the caller's thread answers at once; one that does not
  // may block up to its clients' retry bound). A node away for staging
  // nothing is asked at every batch (it costs a poll).
  absl::Duration rejoin_interval = absl::Milliseconds(250);
  // One samples-per-insert limit over every node's inserts (0: none; each
  // node's server may still enforce its own): a batch is made only while
  // rows given <= samples_per_insert * (sum of the nodes' inserts -
  // min_inserted) + spi_error_buffer (replay/rate_limiter.h, inserts never
  // blocked), and not before the nodes hold min_inserted together.
  double samples_per_insert = 0;
  double spi_error_buffer = 0;
  uint64_t min_inserted = 1;

  absl::Status Validate() const;
  // The global limit as a replay::RateLimiter's options.
  replay::RateLimiterOptions LimiterOptions() const;
};

// What the source took from each node.
struct NodeShare {
  uint64_t rows = 0;         // rows given to train on
  uint64_t inserted = 0;     // the node's inserts, highest read (global limit)
  uint64_t batches = 0;      // node batches taken
  uint64_t passed_over = 0;  // times it was found away
  uint64_t dropped = 0;      // rows dropped untrained when it resumed
  bool away = false;
  double priority_sum = 0;  // S_k as last read
  // Means over the batches made: the node's share of a batch's rows, and
  // its share of the mass (S_k / sum S over the nodes not away) when the
  // batch was made.
  double taken_share = 0;
  double mass_share = 0;
  // The mean policy-version lag of its rows given (EntryOrigin::policy_lag;
  // rows without one not counted), and its generation rate: its inserts
  // per second between the first and the last reading of its count (at
  // least a second apart). nullopt until known.
  std::optional<double> policy_lag_mean;
  std::optional<double> inserts_per_s;
};

// How far a policy's sampling is from exact global prioritization: the
// total-variation distance between the distribution its batches were drawn
// from and p^alpha / sum S. Each node samples exactly by its own priorities,
// so over batches whose nodes' distributions stay put it is
// 1/2 sum_k |taken_share_k - mass_share_k|. The exact policy's is 0 in
// expectation (what remains is its multinomial noise, shrinking with the
// batches); round_robin's is 1/2 sum_k |1/K - mass_share_k|.
double SamplingTvDistance(const std::vector<NodeShare>& shares);

class MultiNodeBatchSource : public BatchSource {
 public:
  // `nodes` (>= 1, not owned) outlive the source; batches have rows of
  // `observation_size` values of `type`.
  static absl::StatusOr<std::unique_ptr<MultiNodeBatchSource>> Create(
      const MultiNodeOptions& options, std::vector<NodeBatchSource*> nodes, size_t observation_size,
      rl::ObservationType type = rl::ObservationType::kFloat32);
  ~MultiNodeBatchSource() override;

  absl::StatusOr<bool> Next(absl::Duration timeout, rl::TransitionBatch* batch,
                            std::vector<float>* weights,
                            std::vector<EntryOrigin>* origins) override;
  absl::Status WritePriorities(absl::Span<const float> priorities) override;
  uint64_t transitions_dropped() const override;

  // Adds a node while the source is in use (a site that joins), as node
  // size() - 1 of shares(). It starts away: every Next() asks it for a
  // batch without waiting, and it takes part from its first one, so a node
  // still filling up stalls nothing. `node` (not null) outlives the
  // source. Its shares are means over every batch made (0 before it came).
  absl::Status AddNode(NodeBatchSource* node);

  // Every policy reads the nodes' S_k for the shares (the exact policy
  // needs them anyway), so that the link carries the same for each.
  const std::vector<NodeShare>& shares() const { return shares_; }
  // Calls of Next() the global limit held back (no batch made).
  uint64_t limiter_waits() const { return limiter_waits_; }
  // Rows given over the nodes' inserts (nullopt before any insert).
  std::optional<double> samples_per_insert() const;
  // How fast the nodes' mass shares move: the total-variation distance
  // between consecutive distinct readings of S_k / sum S, per second. The
  // bias of splitting by S_k read some time after the nodes sampled is
  // about this times that staleness (nullopt before two readings).
  std::optional<double> mass_drift_per_s() const;
  // The longest time between two batches Next() returned once every node
  // had staged or been passed over: how long the learner waited at most
  // (a node lost included), not counting the sites' start.
  absl::Duration longest_gap() const { return longest_gap_; }

 private:
  // A node batch while some of its rows are untrained or unanswered.
  struct Held {
    Held(size_t observation_size, rl::ObservationType type) : batch(observation_size, type) {}
    NodeBatch batch;
    size_t next_row = 0;  // rows before it were given to train on
    size_t answered = 0;  // rows whose priority is known
    std::vector<float> priorities;
  };
  struct Node {
    NodeBatchSource* source = nullptr;
    std::deque<std::unique_ptr<Held>> held;
    size_t queued_rows = 0;  // untrained rows over `held`
    // Policy lags of the rows given, summed.
    double lag_sum = 0;
    uint64_t lag_count = 0;
    // The first reading of its insert count, and when.
    uint64_t first_inserted = 0;
    absl::Time first_inserted_at = absl::InfiniteFuture();
  };
  // Where a row of the returned batch came from.
  struct RowRef {
    Held* held;
    uint32_t row;
  };

  MultiNodeBatchSource(const MultiNodeOptions& options, std::vector<NodeBatchSource*> nodes,
                       size_t observation_size, rl::ObservationType type);

  // Asks node k for a batch within `timeout`; true when one was added.
  absl::StatusOr<bool> Fetch(size_t k, absl::Duration timeout);
  // Asks every away node for a batch without waiting; one that has one is
  // back.
  absl::Status PollAway();
  // Exact policy: the split and the rows; false when no node has mass or a
  // needed node did not stage by `deadline`.
  absl::StatusOr<bool> NextExact(absl::Time deadline, rl::TransitionBatch* batch,
                                 std::vector<float>* weights, std::vector<EntryOrigin>* origins);
  // Reads the S_k of the nodes not away into sums_; their total.
  absl::StatusOr<double> ReadSums();
  // Reads the nodes' S_k and splits a batch over them into counts_; false
  // when no node has mass.
  absl::StatusOr<bool> Split();
  // Adds the batch just made (rows_from_ per node) to the shares' means.
  absl::Status RecordShares();
  // The exact policy's weights of the rows taken (alphas_, beta_).
  absl::Status GlobalWeights(absl::Span<float> weights);
  // Whole-batch policies: the node whose front batch is given next; -1
  // when none is ready by `deadline`.
  absl::StatusOr<int> NextFirstReady(absl::Time deadline);
  absl::StatusOr<int> NextRoundRobin(absl::Time deadline);
  // Appends `count` rows of node k, front first, to the batch.
  void TakeRows(size_t k, size_t count, rl::TransitionBatch* batch, std::vector<float>* weights,
                std::vector<EntryOrigin>* origins);
  // Drops node k's held batches (their rows untrained, counted).
  void Forget(size_t k);
  // With a global limit: whether a batch may be made now (reads the nodes'
  // inserts; an away node's last count stands).
  absl::StatusOr<bool> LimiterAllows();
  // Answers node k's front batches whose rows are all answered.
  absl::Status AnswerDone(size_t k);
  // `lost`: its connection failed (asked again only every rejoin_interval).
  void MarkAway(size_t k, bool lost = false);
  // Node k's insert count as read now: the highest stands (a node restored
  // from an older checkpoint counts from there), and its generation rate.
  void NoteInserted(size_t k, uint64_t inserted);

  const MultiNodeOptions options_;
  const size_t observation_size_;
  const rl::ObservationType type_;
  // A deque: AddNode() appends without moving the others (a Node's deque
  // of held batches cannot be moved by a vector's reallocation).
  std::deque<Node> nodes_;
  std::vector<NodeShare> shares_;
  GlobalSampler sampler_;
  size_t turn_ = 0;  // round_robin's and first_ready's next node
  // When each node was first asked for a batch it has not staged yet.
  std::vector<absl::Time> waiting_since_;
  // Nodes whose connection failed: when they may be asked again.
  std::vector<absl::Time> rejoin_after_;
  // Exact: counts_ is a split not yet served (a node was slow).
  bool split_pending_ = false;
  std::vector<double> sums_;
  std::vector<int> counts_;
  // Where the rows of the batch Next() returned came from, and their p^alpha
  // and the largest beta (exact).
  std::vector<RowRef> out_refs_;
  std::vector<double> alphas_;
  float beta_ = 0;
  std::vector<uint64_t> rows_from_;  // rows of the batch per node
  // Sums of the shares over batches_measured_ batches.
  std::vector<double> taken_sum_;
  std::vector<double> mass_sum_;
  uint64_t batches_measured_ = 0;
  // The last distinct mass shares read and when; the drift summed.
  std::vector<double> last_mass_;
  absl::Time last_mass_time_ = absl::InfinitePast();
  double drift_sum_ = 0;
  absl::Duration drift_time_;
  absl::Time last_batch_ = absl::InfiniteFuture();
  absl::Duration longest_gap_;
  // Scratch of GlobalWeights.
  std::vector<double> valid_alphas_;
  std::vector<size_t> valid_rows_;
  std::vector<float> valid_weights_;
  uint64_t dropped_ = 0;
  std::optional<replay::RateLimiter> limiter_;  // with samples_per_insert > 0
  uint64_t rows_given_ = 0;
  uint64_t limiter_waits_ = 0;
};

}  // namespace dreplay::learner

#endif  // DREPLAY_LEARNER_CLIENT_MULTI_NODE_SOURCE_H_
