// Copyright dreplay authors.
//
// replay_monitor.h: what tools/replay_top shows, computed from snapshots of
// the regions a monitor READs (the stats region and the actors region), and
// rendered as text or JSON.
//
//   MonitorSnapshot before = ...;  // StatsReader::ReadStats / ReadActors
//   MonitorSnapshot now = ...;
//   std::cout << RenderMonitorText(info, now, &before);
//   std::cout << RenderMonitorJson(info, now, &before) << "\n";
//
// Rates come from two snapshots of the same epoch: counter deltas divided by
// the server's own clock (StatsBlock::server_time_ns), so they do not depend
// on when the monitor's READs happened. Per-actor step rates use the actors'
// own clocks (ActorLine::updated_ns). Without a usable earlier snapshot
// (none, another epoch, or the server has not refreshed its stats since),
// rates are absent: "-" in text, null in JSON.
//
// Priorities are shown as the sum tree holds them (p^alpha): mean =
// priority_sum / size, and the maximum.
//
// Warnings (MonitorWarnings) come first in text, and as "warnings" (an
// array of strings) in JSON.
//
// The replay ratio: the achieved samples per insert (sampled / inserted)
// beside the published policy (PolicyLine), and the limiter's waits; the
// transfer-once figures: entries staged with their payload vs. as
// references, and how often the learner's holdings were forgotten.
//
// Leases: one line per lease ever held (state, holder, ingest cursor,
// inserted, torn, overrun, priorities bounded), after a count of those held.
//
// Several buffer nodes (replay_top --servers): one NodeView per node, read
// or failed, combined into totals over the nodes read (CombineNodes) and
// rendered as the totals and then one view per node (RenderNodesText,
// RenderNodesJson).
//
// Pure functions; thread-safe.

#ifndef DREPLAY_TOOLS_REPLAY_MONITOR_H_
#define DREPLAY_TOOLS_REPLAY_MONITOR_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "protocol/layout.h"

namespace dreplay::tools {

// What a monitor READ at one moment.
struct MonitorSnapshot {
  protocol::StatsBlock stats{};
  std::vector<protocol::ActorLine> actors;  // published lines, by actor id
  std::vector<protocol::LeaseLine> leases;  // every lease's line, by lease
  absl::Time taken;                         // the monitor's wall clock
};

// Constant facts about the server shown with every view.
struct MonitorInfo {
  std::string server;  // "host:port"
  protocol::LayoutConfig config;
  protocol::PolicyLine policy{};  // the control block's replay policy
};

// Rates between two snapshots of one epoch, per second of server time.
struct MonitorRates {
  double window_s = 0;
  double inserts_per_s = 0;
  double samples_per_s = 0;     // transitions staged for the learner
  double batches_per_s = 0;     // batches staged
  double updates_per_s = 0;     // batches released (priority updates consumed)
  double priorities_per_s = 0;  // priority records applied
};

// nullopt when `before` is missing, of another epoch, or not older than
// `now` by the server's clock.
std::optional<MonitorRates> ComputeRates(const MonitorSnapshot* before, const MonitorSnapshot& now);

// Achieved samples per insert, sampled / inserted over the epoch's
// counters; nullopt before anything was inserted.
std::optional<double> AchievedSamplesPerInsert(const protocol::StatsBlock& stats);

// Share of staged entries sent as references (transfer-once), in [0, 1];
// nullopt before anything was staged.
std::optional<double> CachedFraction(const protocol::StatsBlock& stats);

// Conditions an operator should act on, as sentences (empty: none). Today:
// invalid priority records from the learner (NaN, infinite, negative or not
// of the batch), which leave their transitions' priorities unchanged, so a
// learner that sends only such records freezes prioritization. Over the window since
// `before` when it is usable (see ComputeRates), else over the epoch.
std::vector<std::string> MonitorWarnings(const MonitorSnapshot* before, const MonitorSnapshot& now);

// Mean of p^alpha over memory; nullopt for an empty memory.
std::optional<double> PriorityMean(const protocol::StatsBlock& stats);

// Environment steps per second of actor `line`, from its line in `before`
// (nullopt when absent, or when the actor has not published since).
std::optional<double> ActorStepRate(const MonitorSnapshot* before, const protocol::ActorLine& line);

// One JSON object (no trailing newline). Non-finite numbers become null.
std::string RenderMonitorJson(const MonitorInfo& info, const MonitorSnapshot& now,
                              const MonitorSnapshot* before);

// A screenful of text (lines ending in '\n'), without terminal control codes.
std::string RenderMonitorText(const MonitorInfo& info, const MonitorSnapshot& now,
                              const MonitorSnapshot* before);

// ---------------------------------------------------------------------------
// Several buffer nodes.

// One node as a monitor saw it: read (error empty: `info` and `now` hold
// what it published), or failed (`error` says why; nothing else is used).
struct NodeView {
  std::string server;  // "host:port", as given
  std::string error;   // empty: read
  MonitorInfo info;
  MonitorSnapshot now;
  std::optional<MonitorSnapshot> before;  // the node's previous snapshot, for rates
};

// Figures over the nodes read; a failed node adds nothing.
struct NodeTotals {
  size_t nodes = 0;      // all of them
  size_t reachable = 0;  // those read (an empty error)
  uint64_t size = 0;     // transitions held
  uint64_t capacity = 0;
  uint64_t inserted = 0;
  uint64_t sampled = 0;
  // Sums of the nodes' rates (ComputeRates); nullopt unless every node read
  // has rates, so a total never leaves out a node that was read.
  std::optional<double> inserts_per_s;
  std::optional<double> samples_per_s;
  // The priority mass S = sum of S_k, S_k a node's sum of p^alpha
  // (StatsBlock::priority_sum).
  double priority_sum = 0;
  // S_k / S by node, in the order of the views: nullopt for a failed node,
  // and for every node while S is 0.
  std::vector<std::optional<double>> priority_share;
};

NodeTotals CombineNodes(const std::vector<NodeView>& nodes);

// {"nodes": [...], "totals": {...}} (no trailing newline): a node read as
// RenderMonitorJson's object; a failed one as {"server": ..., "error": ...}.
std::string RenderNodesJson(const std::vector<NodeView>& nodes);

// The totals (two lines), then each node's block, read (as
// RenderMonitorText) or failed ("unreachable" and its error), each after a
// blank line. Lines end in '\n'; no terminal control codes.
std::string RenderNodesText(const std::vector<NodeView>& nodes);

}  // namespace dreplay::tools

#endif  // DREPLAY_TOOLS_REPLAY_MONITOR_H_
