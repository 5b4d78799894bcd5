// Copyright dreplay authors.

#include "replay_server/invalid_priorities.h"

#include "absl/strings/str_format.h"

namespace dreplay::server {

std::optional<std::string> InvalidPriorityWarnings::Observe(const ReplayCounters& counters,
                                                            absl::Time now) {
  // Counters restart from a checkpoint's: never count backwards.
  if (counters.priority_updates_invalid < invalid_seen_ ||
      counters.priority_updates_applied < applied_seen_) {
    invalid_seen_ = counters.priority_updates_invalid;
    applied_seen_ = counters.priority_updates_applied;
  }
  const uint64_t invalid = counters.priority_updates_invalid - invalid_seen_;
  if (invalid == 0 || now - last_warning_ < interval_) return std::nullopt;
  const uint64_t applied = counters.priority_updates_applied - applied_seen_;
  const std::string since = last_warning_ == absl::InfinitePast()
                                ? std::string("since the start")
                                : "in the last " + absl::FormatDuration(now - last_warning_);
  last_warning_ = now;
  invalid_seen_ = counters.priority_updates_invalid;
  applied_seen_ = counters.priority_updates_applied;
  if (applied == 0) {
    return absl::StrFormat(
        "the learner sent %d priority records %s and every one was invalid (NaN, infinite, "
        "negative or not of the batch): prioritization is frozen (priority_updates_invalid)",
        invalid, since);
  }
  return absl::StrFormat(
      "the learner sent %d invalid priority records (NaN, infinite, negative or not of the "
      "batch) %s, beside %d "
      "applied: those transitions keep their old priorities (priority_updates_invalid)",
      invalid, since, applied);
}

}  // namespace dreplay::server
