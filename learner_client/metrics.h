// Copyright dreplay authors.
//
// metrics.h: the learner's metrics, defined once and identically for both
// replay placements ("buffer": replay memory at the buffer node, the
// learner READs pre-sampled batches; "learner": the buffer node forwards
// every transition and the replay memory sits at the learner).
//
// Definitions. An "interval" is the time between two progress records.
//
//   train_steps     DqnLearner::TrainStep() calls so far.
//   loss            mean, over the train steps of the interval, of each
//                   step's loss (the importance-weighted mean Huber loss of
//                   its batch, before the update); null when none.
//   transferred     transitions that crossed the long-haul link in the
//                   interval: the entries of the staged batches READ
//                   ("buffer"; not those a learner cache supplied) or the
//                   forwarded transitions READ ("learner"). A batch READ
//                   again after a reconnection crossed again and counts
//                   again.
//   transferred_priority
//                   mean |TD error| of the transitions that crossed the
//                   link, taken at their first training use in the
//                   interval: the abs_td_errors of the first TrainStep()
//                   whose batch holds them, under the networks before its
//                   update (in "buffer" the step that consumes the staged
//                   batch they arrived in; in "learner" and "hybrid" the
//                   first sampling from the local replay memory). No arm
//                   spends an extra forward pass on it; a transition
//                   evicted before it was ever sampled is not counted.
//                   null when none.
//   link_bytes_total, link_transitions_total
//                   cumulative bytes and transitions over the learner's link:
//                   the sum of the link bytes by class below, i.e. bytes of
//                   every READ and WRITE the learner's replay clients post (staged batches or
//                   forwarded slots and commit words, their re-READs and cursor READs, priority
//                   updates, parameters; not the READs of the actors'
//                   statistics, which are monitoring); link_transitions_total
//                   is the sum of `transferred`.
//   link_bytes_per_s, link_transitions_per_s
//                   their increase over the interval / its length.
//   trained_abs_td_error
//                   mean |TD error| of the transitions of the batches
//                   trained on in the interval (each batch's abs_td_errors
//                   of its TrainStep(), before the update: the priorities
//                   written back); null when none. Unlike
//                   transferred_priority it includes batch entries that did
//                   not cross the link (the learner's cache, or the local
//                   replay memory in "learner").
//   probe_loss      the unweighted mean Huber loss (DqnOptions::huber_delta)
//                   of the |TD errors| of a fixed probe set under the
//                   current online and target networks, at the end of the
//                   interval. The probe set is the same transitions in both
//                   placements: probe_size n-step transitions collected when
//                   the learner starts by uniformly random actions (seed
//                   probe_seed) in the learner's own copy of the
//                   environment, never from the replay memory. null when
//                   probe_size is 0.
//   samples_per_insert
//                   achieved samples per insert since the start: transitions
//                   trained on / transitions generated. "learner": of the
//                   local replay memory's rate limiter (inserted =
//                   transitions generated: the server's ingest cursor as
//                   the forward reader last saw it; sampled = transitions
//                   trained on).
//                   "buffer": the entries of the batches trained on / the
//                   increase of the server's ingest_cursor (its ServerLine)
//                   since the learner started, so both count what the actors
//                   generated; null before anything was inserted.
//   data_age_mean_s, data_age_p50_s, data_age_p95_s
//                   age of the transitions trained on in the interval, at
//                   the moment the learner takes them for a train step
//                   (every batch entry, a transition sampled again counted
//                   again; the same in every placement): the learner's wall
//                   clock then minus the actor's SlotHeader::insert_time_ns
//                   (so across hosts as good as their clock
//                   synchronisation); transitions without an insert time
//                   are not counted; null when none.
//   policy_lag_mean  buffer placement: the mean policy-version lag of the
//                   batch entries trained on in the interval: the
//                   parameters' versions the learner had published to the
//                   entry's server when it took the batch, minus the
//                   version the actor acted with (SlotHeader::
//                   params_version); entries of actors that acted with none
//                   known are not counted; null when none.
//   transitions_fetched_total, distinct_transitions_fetched_total
//                   cumulative transition payloads READ over the link by the
//                   learner's readers (a re-READ counts again), and the
//                   distinct transitions among them (a transition READ twice,
//                   e.g. sampled again without a cache, counts once).
//   server_ingested_total
//                   the server's ingest cursor (transitions the actors
//                   generated), read just after the link counts, so that
//                   distinct_transitions_fetched_total / it (coverage)
//                   never exceeds 1; 0 when unknown. env_steps, from the
//                   actors' own periodic reports, lags both.
//   link_bytes_experience, link_bytes_metadata, link_bytes_polling,
//   link_bytes_priorities, link_bytes_params, link_bytes_control
//                   cumulative link bytes by traffic class
//                   (client/link_bytes.h); they add up to link_bytes_total.
//   env_steps, episodes, actor_return_mean
//                   from the actors region: the sum over actors of their
//                   environment steps and finished episodes, and the mean
//                   return of the last (up to 100) episodes of every actor
//                   (sum of returns_sum / sum of returns_count); null when
//                   no episode finished yet.
//   crossing_percentile
//                   where the transitions that crossed the link sat in the
//                   buffer node's priority distribution: the mean
//                   percentile (0 to 100) of each one's raw priority among
//                   those the node held when it was staged (the server's
//                   StatsBlock; replay_server/crossing_percentiles.h). About
//                   50 for uniform or FIFO choice. The last record only (the
//                   learner READs it then), and only where the node stages
//                   what crosses ("buffer", "hybrid"); null otherwise (the
//                   freshest and in-order readers READ the slot ring).
//   eval_return_mean
//                   the mean undiscounted return of the last greedy
//                   evaluation (eval_episodes episodes of the learner's
//                   online network on its own seeded environment copy);
//                   null before the first.
//
// Summary (the last record): solved (an evaluation reached solve_return),
// time_to_solve_s and env_steps_to_solve (wall time and env_steps at the
// first such evaluation; null if never), train_steps, link totals, and over
// the last half of training (train steps >= final train_steps / 2):
// loss_mean_last_half (mean loss per step) and
// transferred_priority_mean_last_half (mean |TD error| of the transitions
// first trained on while train_steps was in that range); and probe_loss (the
// last), samples_per_insert, data_age_mean_s and policy_lag_mean (over the whole run),
// crossing_percentile, the fetched totals and the link bytes by class as in
// the last progress record.
//
// Records are JSON objects, one per line (JSON lines); numbers that are not
// finite are written as null. Both kinds start with type ("progress" or
// "summary"), replay_placement, seed, wall_s, train_steps, env_steps, episodes,
// link_bytes_total and link_transitions_total. tools/launch/metrics_lines.py reads
// them.
//
// Thread safety: not thread-safe; the learner's loop owns its recorder.

#ifndef DREPLAY_LEARNER_CLIENT_METRICS_H_
#define DREPLAY_LEARNER_CLIENT_METRICS_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace dreplay::learner {

// What the actors published (summed over the actors region's lines).
struct ActorTotals {
  uint64_t env_steps = 0;
  uint64_t episodes = 0;
  uint64_t returns_count = 0;  // episodes in returns_sum
  double returns_sum = 0;
  uint32_t actors = 0;  // lines published
};

// Cumulative traffic over the learner's link: bytes by traffic class (the
// classes of client::LinkBytes) and the transition payloads its readers
// fetched (see the file comment).
struct LinkStats {
  uint64_t experience = 0;
  uint64_t metadata = 0;
  uint64_t polling = 0;
  uint64_t priorities = 0;
  uint64_t params = 0;
  uint64_t control = 0;
  uint64_t transitions_fetched = 0;
  uint64_t distinct_transitions_fetched = 0;
  // The server's ingest cursor read just after the counts above: the
  // transitions generated so far, never fewer than the distinct ones
  // fetched; 0 when unknown.
  uint64_t server_ingested = 0;

  uint64_t total_bytes() const {
    return experience + metadata + polling + priorities + params + control;
  }
};

struct ProgressRecord {
  std::string replay_placement;
  uint64_t seed = 0;
  double wall_s = 0;
  uint64_t train_steps = 0;
  uint64_t env_steps = 0;
  std::optional<double> loss;
  uint64_t transferred = 0;
  std::optional<double> transferred_priority;
  uint64_t link_bytes_total = 0;
  uint64_t link_transitions_total = 0;
  double link_bytes_per_s = 0;
  double link_transitions_per_s = 0;
  uint64_t episodes = 0;
  std::optional<double> actor_return_mean;
  std::optional<double> eval_return_mean;
  std::optional<double> trained_abs_td_error;
  std::optional<double> probe_loss;
  std::optional<double> samples_per_insert;
  std::optional<double> data_age_mean_s;
  std::optional<double> data_age_p50_s;
  std::optional<double> data_age_p95_s;
  std::optional<double> policy_lag_mean;
  std::optional<double> crossing_percentile;
  LinkStats link;  // bytes by class and fetched counts
  // Batch entries and forwarded transitions the learner left out because
  // they do not decode or cannot be trained on (rl::CheckTrainable), and
  // parameter publications withheld because a parameter was not finite;
  // totals since the start (Prometheus only).
  uint64_t transitions_dropped = 0;
  uint64_t params_withheld = 0;

  std::string ToJson() const;
  // One human-readable line (no newline).
  std::string ToText() const;
};

struct SummaryRecord {
  std::string replay_placement;
  uint64_t seed = 0;
  double wall_s = 0;
  bool solved = false;
  std::optional<double> time_to_solve_s;
  std::optional<uint64_t> env_steps_to_solve;
  uint64_t train_steps = 0;
  uint64_t env_steps = 0;
  uint64_t episodes = 0;
  uint64_t link_bytes_total = 0;
  uint64_t link_transitions_total = 0;
  std::optional<double> loss_mean_last_half;
  std::optional<double> transferred_priority_mean_last_half;
  std::optional<double> eval_return_mean;  // the last evaluation
  std::optional<double> eval_return_best;
  uint64_t evaluations = 0;
  std::optional<double> probe_loss;  // the last
  std::optional<double> samples_per_insert;
  std::optional<double> data_age_mean_s;  // over the run
  std::optional<double> policy_lag_mean;  // over the run
  std::optional<double> crossing_percentile;
  LinkStats link;

  std::string ToJson() const;
  std::string ToText() const;
};

class MetricsRecorder {
 public:
  // `replay_placement` is "buffer" or "learner" (written as is); `solve_return` the
  // greedy mean return that counts as solved. Times (wall_s) are seconds
  // since the start of the run, as the caller measures them.
  MetricsRecorder(std::string replay_placement, uint64_t seed, double solve_return);

  // One train step with its loss and the |TD errors| of its batch.
  void RecordTrainStep(double loss, absl::Span<const float> abs_td_errors = {});
  // `count` transitions crossed the link.
  void RecordArrived(uint64_t count);
  // Transitions that crossed the link, at their first training use: the
  // |TD errors| their first TrainStep() computed (before its update).
  void RecordFirstUse(absl::Span<const float> abs_td_errors);
  // Both at once: transitions trained on as they arrive (the buffer
  // placement's staged entries).
  void RecordTransferred(absl::Span<const float> abs_td_errors);
  // The link's cumulative traffic, as the clients count it.
  void SetLinkStats(const LinkStats& link) { link_ = link; }
  // The age (seconds) of a transition taken for a train step.
  void RecordDataAge(double seconds);
  // Its policy-version lag (EntryOrigin::policy_lag), when known.
  void RecordPolicyLag(int64_t versions);
  // The probe loss now (nullopt: none).
  void SetProbeLoss(std::optional<double> loss) { probe_loss_ = loss; }
  // Achieved samples per insert since the start (nullopt: unknown yet).
  void SetSamplesPerInsert(std::optional<double> spi) { samples_per_insert_ = spi; }
  // The server's mean crossing percentile (nullopt: unknown).
  void SetCrossingPercentile(std::optional<double> p) { crossing_percentile_ = p; }
  void SetActorTotals(const ActorTotals& totals) { actors_ = totals; }
  // Totals of ProgressRecord::transitions_dropped and params_withheld.
  void SetDropped(uint64_t transitions, uint64_t params) {
    transitions_dropped_ = transitions;
    params_withheld_ = params;
  }
  // A greedy evaluation's mean return at `wall_s`. Returns true when it is
  // the first one to reach solve_return.
  bool RecordEvaluation(double wall_s, double mean_return);

  // Closes the interval that ends at `wall_s` and returns its record.
  ProgressRecord Progress(double wall_s);
  // The summary at `wall_s` (does not change the recorder).
  SummaryRecord Summary(double wall_s) const;

  uint64_t train_steps() const { return loss_by_step_.size(); }
  uint64_t link_transitions_total() const { return transferred_total_; }
  // Transitions whose first training use was recorded (RecordFirstUse).
  uint64_t first_uses_total() const { return first_uses_total_; }
  bool solved() const { return solved_; }
  const ActorTotals& actor_totals() const { return actors_; }

 private:
  struct FirstUse {
    uint64_t train_steps;  // train_steps() when they were first trained on
    double priority_sum;
    uint64_t count;
  };

  const std::string replay_placement_;
  const uint64_t seed_;
  const double solve_return_;

  std::vector<float> loss_by_step_;
  std::vector<FirstUse> first_uses_;
  uint64_t transferred_total_ = 0;
  uint64_t first_uses_total_ = 0;
  LinkStats link_;
  std::optional<double> probe_loss_;
  std::optional<double> samples_per_insert_;
  std::optional<double> crossing_percentile_;
  double data_age_sum_ = 0;
  uint64_t data_age_count_ = 0;
  double policy_lag_sum_ = 0;
  uint64_t policy_lag_count_ = 0;
  double interval_lag_sum_ = 0;
  uint64_t interval_lag_count_ = 0;
  ActorTotals actors_;
  uint64_t transitions_dropped_ = 0;
  uint64_t params_withheld_ = 0;
  std::optional<double> last_eval_;
  std::optional<double> best_eval_;
  uint64_t evaluations_ = 0;
  bool solved_ = false;
  double time_to_solve_s_ = 0;
  uint64_t env_steps_to_solve_ = 0;

  // The interval being recorded.
  double interval_start_s_ = 0;
  uint64_t interval_first_step_ = 0;
  double interval_loss_sum_ = 0;
  uint64_t interval_transferred_ = 0;
  double interval_priority_sum_ = 0;
  uint64_t interval_priority_count_ = 0;
  uint64_t interval_link_bytes_start_ = 0;
  uint64_t interval_transitions_start_ = 0;
  double interval_trained_error_sum_ = 0;
  uint64_t interval_trained_count_ = 0;
  std::vector<double> interval_ages_;
};

// Writes records as JSON lines to a file (flushed after each record).
class MetricsFile {
 public:
  // Creates (truncates) `path`. InvalidArgument for an empty path or one
  // that cannot be created (the system's reason in the message).
  static absl::StatusOr<std::unique_ptr<MetricsFile>> Open(const std::string& path);
  ~MetricsFile();
  MetricsFile(const MetricsFile&) = delete;
  MetricsFile& operator=(const MetricsFile&) = delete;

  // Appends one line. DataLoss when the write fails.
  absl::Status Write(const std::string& json);

 private:
  MetricsFile(std::string path, std::FILE* file) : path_(std::move(path)), file_(file) {}
  const std::string path_;
  std::FILE* const file_;
};

}  // namespace dreplay::learner

#endif  // DREPLAY_LEARNER_CLIENT_METRICS_H_
