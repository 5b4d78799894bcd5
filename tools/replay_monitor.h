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

}  // namespace dreplay::tools

#endif  // DREPLAY_TOOLS_REPLAY_MONITOR_H_
