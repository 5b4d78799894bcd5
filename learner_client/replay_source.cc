// Copyright dreplay authors.

#include "learner_client/replay_source.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "learner_client/buffer_replay_source.h"
#include "learner_client/local_replay_source.h"

namespace dreplay::learner {

void DropCounter::Count(uint64_t count, absl::string_view why) {
  count_ += count;
  const absl::Time now = absl::Now();
  if (now - last_warning_ < kDropWarningInterval) return;
  last_warning_ = now;
  LOG(WARNING) << "dropped " << why << " (" << count_
               << " transitions dropped in all; training goes on)";
}

void RecordDataAge(MetricsRecorder* metrics, uint64_t insert_time_ns, uint64_t now_ns) {
  if (insert_time_ns == 0) return;
  const double age = now_ns > insert_time_ns ? static_cast<double>(now_ns - insert_time_ns) : 0.0;
  metrics->RecordDataAge(age * 1e-9);
}

absl::Status ReplaySource::Idle(absl::Duration timeout) {
  absl::SleepFor(timeout);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ReplaySource>> MakeReplaySource(const LearnerLoopOptions& options,
                                                               const LearnerIo& io,
                                                               const ReplaySourceContext& context) {
  switch (options.placement) {
    case ReplayPlacement::kBuffer:
      if (io.batches == nullptr) {
        return absl::InvalidArgumentError("the buffer placement needs a batch source");
      }
      return std::unique_ptr<ReplaySource>(
          new BufferReplaySource(io.batches, io.server_ingested, context));
    case ReplayPlacement::kLearner:
    case ReplayPlacement::kHybrid: {
      if (io.stream == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("the ",
                                                       ReplayPlacementName(options.placement),
                                                       " placement needs a transition stream"));
      }
      ASSIGN_OR_RETURN(std::unique_ptr<LocalReplaySource> source,
                       LocalReplaySource::Create(options, io.stream, context));
      return std::unique_ptr<ReplaySource>(std::move(source));
    }
  }
  return absl::InvalidArgumentError("unknown replay placement");
}

}  // namespace dreplay::learner
