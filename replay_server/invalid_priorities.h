// Copyright dreplay authors.
//
// invalid_priorities.h: a rate-limited warning about invalid priority
// records.
//
// A priority record that is NaN, infinite or negative, or that names an entry
// the batch it answers does not hold, is dropped (counted in
// priority_updates_invalid; priority_updates.h) and its transition keeps its
// old priority. A
// learner that sends only such records (a diverged network) freezes
// prioritization without any error; this turns the counters into a warning
// the server logs at most once per interval:
//
//   InvalidPriorityWarnings warnings(absl::Seconds(10));
//   ...  // on the core thread, after each step
//   if (std::optional<std::string> w = warnings.Observe(core.counters(), absl::Now())) {
//     LOG(WARNING) << *w;
//   }
//
// Thread safety: none; one thread observes.

#ifndef DREPLAY_REPLAY_SERVER_INVALID_PRIORITIES_H_
#define DREPLAY_REPLAY_SERVER_INVALID_PRIORITIES_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "replay_server/counters.h"

namespace dreplay::server {

class InvalidPriorityWarnings {
 public:
  // At most one warning per `interval` (> 0).
  explicit InvalidPriorityWarnings(absl::Duration interval) : interval_(interval) {}

  // A warning when invalid records arrived since the last warning and the
  // interval has passed since it (the first one at once); nullopt otherwise.
  // The warning says how many of the records since the last one were
  // invalid, and that priorities are frozen when none was applied.
  std::optional<std::string> Observe(const ReplayCounters& counters, absl::Time now);

  // Takes `counters` as already seen, without a warning (counters restored
  // from a checkpoint count records of an earlier run).
  void Baseline(const ReplayCounters& counters) {
    invalid_seen_ = counters.priority_updates_invalid;
    applied_seen_ = counters.priority_updates_applied;
  }

 private:
  const absl::Duration interval_;
  absl::Time last_warning_ = absl::InfinitePast();
  uint64_t invalid_seen_ = 0;  // priority_updates_invalid at the last warning
  uint64_t applied_seen_ = 0;  // priority_updates_applied then
};

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_INVALID_PRIORITIES_H_
