// Copyright dreplay authors.

#include "tools/bench/verbs_bench_runner.h"

#include <chrono>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "tools/bench/host_cpu.h"

namespace dreplay::tools {
namespace {

using verbs::Completion;
using verbs::Opcode;
using verbs::WorkRequest;
using Clock = std::chrono::steady_clock;

// Completions taken per Poll().
constexpr int kPollBatch = 64;

Clock::time_point After(Clock::time_point t, double seconds) {
  return t + std::chrono::nanoseconds(static_cast<int64_t>(seconds * 1e9));
}

// The requests in flight on one queue pair. RC completes requests in
// posting order, so slot i % depth is free again once fewer than `depth`
// requests are in flight.
class RequestWindow {
 public:
  RequestWindow(verbs::QueuePair* qp, const verbs::MemoryRegion& local,
                const verbs::RemoteRegion& remote, const VerbsBenchConfig& config)
      : qp_(qp),
        local_(local),
        remote_(remote),
        config_(config),
        posted_at_(config.depth),
        wrs_(config.batch),
        completions_(kPollBatch) {}

  uint64_t in_flight() const { return posted_ - completed_; }
  uint64_t measured() const { return measured_; }
  const LatencyHistogram& latency() const { return latency_; }

  // Posts whole batches while one fits in the window, until `until`; `now`
  // is the time of the last post.
  absl::Status PostWhileRoom(Clock::time_point until, Clock::time_point* now) {
    const auto depth = static_cast<uint64_t>(config_.depth);
    const int batch = config_.batch;
    while (*now < until && in_flight() + batch <= depth) {
      for (int i = 0; i < batch; ++i) Fill(posted_ + i, &wrs_[i]);
      const absl::Status s = qp_->PostSend(wrs_);
      if (absl::IsResourceExhausted(s)) break;
      RETURN_IF_ERROR(s);
      *now = Clock::now();
      for (int i = 0; i < batch; ++i) posted_at_[(posted_ + i) % depth] = *now;
      posted_ += batch;
    }
    return absl::OkStatus();
  }

  // Polls once; completions seen within [from, to) are measured. `now` is
  // the time of the poll.
  absl::Status PollOnce(Clock::time_point from, Clock::time_point to, Clock::time_point* now) {
    const int n = qp_->Poll(absl::MakeSpan(completions_));
    *now = Clock::now();
    for (int i = 0; i < n; ++i) {
      const Completion& c = completions_[i];
      if (!c.ok()) return c.ToStatus();
      ++completed_;
      if (*now >= from && *now < to) {
        ++measured_;
        latency_.Record(absl::FromChrono(*now - posted_at_[c.wr_id % config_.depth]));
      }
    }
    return absl::OkStatus();
  }

 private:
  void Fill(uint64_t seq, WorkRequest* wr) const {
    const uint64_t slot = seq % config_.depth;
    *wr = WorkRequest();
    wr->wr_id = seq;
    wr->opcode = config_.op;
    wr->signaled = true;
    wr->local = &local_;
    wr->local_addr = static_cast<char*>(local_.addr()) + slot * config_.size;
    wr->length = static_cast<uint32_t>(config_.size);
    wr->remote_addr = remote_.addr + slot * config_.size;
    wr->rkey = remote_.rkey;
    if (config_.op == Opcode::kFetchAdd) wr->compare_add = 1;
    // compare_swap: compare 0, swap 0; succeeds without changing the word.
  }

  verbs::QueuePair* const qp_;
  const verbs::MemoryRegion& local_;
  const verbs::RemoteRegion remote_;
  const VerbsBenchConfig& config_;
  std::vector<Clock::time_point> posted_at_;  // by slot
  std::vector<WorkRequest> wrs_;              // one batch
  std::vector<Completion> completions_;
  uint64_t posted_ = 0;
  uint64_t completed_ = 0;
  uint64_t measured_ = 0;
  LatencyHistogram latency_;
};

}  // namespace

absl::StatusOr<RdmaResult> RunBenchOps(verbs::QueuePair* qp, const verbs::MemoryRegion& local,
                                       const verbs::RemoteRegion& remote,
                                       const VerbsBenchConfig& config) {
  RequestWindow window(qp, local, remote, config);
  const Clock::time_point start = Clock::now();
  const Clock::time_point measure_from = After(start, config.warmup_s);
  const Clock::time_point measure_to = After(measure_from, config.duration_s);
  Clock::time_point now = start;
  Clock::time_point drain_deadline = Clock::time_point::max();
  // The host's busy CPU at the window's two ends.
  absl::StatusOr<double> cpu_from = absl::UnavailableError("not read");
  absl::StatusOr<double> cpu_to = absl::UnavailableError("not read");
  bool cpu_from_read = false;
  bool cpu_to_read = false;
  while (window.in_flight() > 0 || now < measure_to) {
    RETURN_IF_ERROR(window.PostWhileRoom(measure_to, &now));
    RETURN_IF_ERROR(window.PollOnce(measure_from, measure_to, &now));
    if (!cpu_from_read && now >= measure_from) {
      cpu_from = HostBusyCpuSeconds();
      cpu_from_read = true;
    }
    if (cpu_from_read && !cpu_to_read && now >= measure_to) {
      cpu_to = HostBusyCpuSeconds();
      cpu_to_read = true;
    }
    if (now >= measure_to && drain_deadline == Clock::time_point::max()) {
      drain_deadline = now + absl::ToChronoNanoseconds(kBenchDrainTimeout);
    }
    if (now > drain_deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(window.in_flight(), " requests did not complete within ",
                       absl::FormatDuration(kBenchDrainTimeout), " after the measurement"));
    }
  }
  RdmaResult r;
  r.ops = window.measured();
  r.seconds = config.duration_s;
  r.ops_per_s = r.ops / config.duration_s;
  r.gbps = r.ops_per_s * config.size * 8 / 1e9;
  r.latency = window.latency();
  if (cpu_from.ok() && cpu_to.ok()) r.host_cpu_s = *cpu_to - *cpu_from;
  return r;
}

}  // namespace dreplay::tools
