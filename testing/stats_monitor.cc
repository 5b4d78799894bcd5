// Copyright dreplay authors.

#include "testing/stats_monitor.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "testing/session_options.h"

namespace dreplay::testing {

using protocol::StatsBlock;

namespace {
constexpr absl::Duration kPollInterval = absl::Milliseconds(5);
}  // namespace

client::ClientSessionOptions ClientOptions(const ServerProcess& server, protocol::Role role,
                                           uint32_t actor_id, const std::string& token) {
  return TestSessionOptions(server.host(), server.port(), role, actor_id, token, absl::Seconds(20),
                            absl::Milliseconds(100));
}

absl::StatusOr<std::unique_ptr<StatsMonitor>> StatsMonitor::Connect(verbs::Provider* provider,
                                                                    const ServerProcess& server,
                                                                    const std::string& token) {
  std::unique_ptr<StatsMonitor> m(new StatsMonitor());
  ASSIGN_OR_RETURN(m->session_,
                   client::ClientSession::Connect(
                       provider, ClientOptions(server, protocol::Role::kMonitor, 0, token)));
  ASSIGN_OR_RETURN(m->reader_, client::StatsReader::Create(m->session_.get()));
  return m;
}

absl::StatusOr<StatsBlock> StatsMonitor::Stats() { return reader_->ReadStats(); }

absl::StatusOr<StatsBlock> StatsMonitor::WaitUntil(
    const std::string& what, const std::function<bool(const StatsBlock&)>& condition,
    absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    ASSIGN_OR_RETURN(const StatsBlock s, Stats());
    if (condition(s)) return s;
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat("not within ", absl::FormatDuration(timeout),
                                                      ": ", what,
                                                      "; last stats: ", StatsSummary(s)));
    }
    absl::SleepFor(kPollInterval);
  }
}

std::string StatsSummary(const StatsBlock& s) {
  return absl::StrCat("epoch=", s.epoch, " inserted=", s.inserted, " size=", s.size,
                      " ingest_cursor=", s.ingest_cursor, " torn=", s.torn_slots,
                      " overrun=", s.overrun_slots, " sampled=", s.sampled,
                      " batches_staged=", s.batches_staged, " released=", s.batches_released,
                      " copy_rejects=", s.sample_copy_rejects, " stale=", s.priority_updates_stale,
                      " mailbox_rejects=", s.mailbox_rejects, " actors=", s.actors_connected,
                      " learners=", s.learners_connected, " monitors=", s.monitors_connected,
                      " rejected=", s.connections_rejected);
}

}  // namespace dreplay::testing
