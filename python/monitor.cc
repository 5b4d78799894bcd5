// Copyright dreplay authors.

#include "python/monitor.h"

#include <memory>
#include <vector>

#include "client/stats_reader.h"
#include "protocol/stats.h"
#include "python/session.h"
#include "python/status_error.h"

namespace dreplay::python {
namespace py = pybind11;
namespace {

py::dict StatsDict(const protocol::StatsBlock& s) {
  py::dict d;
#define DREPLAY_FIELD(name) d[#name] = s.name
  DREPLAY_FIELD(server_time_ns);
  DREPLAY_FIELD(epoch);
  DREPLAY_FIELD(ingest_cursor);
  DREPLAY_FIELD(size);
  DREPLAY_FIELD(capacity);
  DREPLAY_FIELD(inserted);
  DREPLAY_FIELD(overrun_slots);
  DREPLAY_FIELD(torn_slots);
  DREPLAY_FIELD(sampled);
  DREPLAY_FIELD(batches_staged);
  DREPLAY_FIELD(batches_released);
  DREPLAY_FIELD(sample_copy_rejects);
  DREPLAY_FIELD(priority_updates_applied);
  DREPLAY_FIELD(priority_updates_stale);
  DREPLAY_FIELD(priority_updates_invalid);
  DREPLAY_FIELD(mailbox_rejects);
  DREPLAY_FIELD(staging_stalls);
  DREPLAY_FIELD(priority_sum);
  DREPLAY_FIELD(priority_max);
  DREPLAY_FIELD(checkpoints_written);
  DREPLAY_FIELD(updates_timed_out);
  DREPLAY_FIELD(restore_dropped);
  DREPLAY_FIELD(limiter_sample_waits);
  DREPLAY_FIELD(limiter_sample_wait_ns);
  DREPLAY_FIELD(limiter_insert_wait_ns);
  DREPLAY_FIELD(staged_payloads);
  DREPLAY_FIELD(staged_cached);
  DREPLAY_FIELD(learner_cache_resets);
  DREPLAY_FIELD(priorities_bounded);
  DREPLAY_FIELD(transitions_invalid);
  DREPLAY_FIELD(forward_dropped);
  DREPLAY_FIELD(crossing_percentile_sum);
  DREPLAY_FIELD(crossing_percentile_count);
  DREPLAY_FIELD(actors_connected);
  DREPLAY_FIELD(learners_connected);
  DREPLAY_FIELD(monitors_connected);
  DREPLAY_FIELD(connections_total);
  DREPLAY_FIELD(connections_rejected);
#undef DREPLAY_FIELD
  return d;
}

py::dict ActorDict(const protocol::ActorLine& a) {
  py::dict d;
  d["actor_id"] = a.actor_id;
  d["env_steps"] = a.env_steps;
  d["episodes"] = a.episodes;
  d["returns_count"] = a.returns_count;
  d["returns_sum"] = a.returns_sum;
  d["last_return"] = a.last_return;
  d["updated_ns"] = a.updated_ns;
  d["transitions"] = a.transitions;
  return d;
}

class PyStatsReader {
 public:
  explicit PyStatsReader(std::shared_ptr<Session> session) : session_(session) {
    reader_ = CreateUnderLock(*session_,
                              [&] { return client::StatsReader::Create(&session_->client()); });
  }
  ~PyStatsReader() {
    SessionCall call(*session_);  // the client goes under the lock, without the GIL
    reader_.reset();
  }

  py::dict ReadStats() {
    absl::StatusOr<protocol::StatsBlock> stats;
    {
      SessionCall call(*session_);
      stats = reader_->ReadStats();
    }
    return StatsDict(ValueOrThrow(std::move(stats)));
  }

  py::list ReadActors() {
    absl::StatusOr<std::vector<protocol::ActorLine>> actors;
    {
      SessionCall call(*session_);
      actors = reader_->ReadActors();
    }
    py::list out;
    for (const protocol::ActorLine& a : ValueOrThrow(std::move(actors))) out.append(ActorDict(a));
    return out;
  }

 private:
  std::shared_ptr<Session> session_;
  std::unique_ptr<client::StatsReader> reader_;
};

}  // namespace

void RegisterMonitor(py::module_& m) {
  py::class_<PyStatsReader>(m, "StatsReader")
      .def(py::init<std::shared_ptr<Session>>(), py::arg("session"))
      .def("read_stats", &PyStatsReader::ReadStats,
           "A consistent snapshot of the server's stats region (monitor role).")
      .def("read_actors", &PyStatsReader::ReadActors,
           "Every published actor line (monitor or learner role).");
}

}  // namespace dreplay::python
