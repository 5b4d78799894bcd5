// Copyright dreplay authors.

#include "python/forward_clients.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "actor_client/actor_stats_publisher.h"
#include "learner_client/forward_reader.h"
#include "learner_client/forwarded_batch_reader.h"
#include "python/arrays.h"
#include "python/session.h"
#include "python/status_error.h"
#include "rl/transition.h"

namespace dreplay::python {
namespace py = pybind11;
namespace {

// What one next() handed over, copied out (runs without the GIL).
struct ForwardedCopy {
  std::vector<uint64_t> sequences;
  std::vector<uint32_t> leases;
  std::vector<uint64_t> lease_sequences;
  std::vector<float> initial_priorities;
  std::vector<uint64_t> insert_time_ns;
  uint32_t payload_stride = 0;
  std::vector<uint8_t> payloads;  // size x payload_stride
  std::vector<uint32_t> lengths;
  std::unique_ptr<rl::TransitionBatch> transitions;  // when decoding
};

absl::Status CopyForwarded(const std::vector<learner::ForwardedTransition>& in,
                           uint32_t max_payload, bool decode, uint32_t observation_size,
                           rl::ObservationType observation_type, ForwardedCopy* out) {
  const size_t n = in.size();
  out->payload_stride = max_payload;
  out->payloads.assign(n * max_payload, 0);
  if (decode) {
    if (observation_size == 0) {
      return absl::FailedPreconditionError(
          "the server publishes no observation_size: read with decode=False");
    }
    out->transitions = std::make_unique<rl::TransitionBatch>(observation_size, observation_type);
  }
  for (size_t i = 0; i < n; ++i) {
    const learner::ForwardedTransition& t = in[i];
    out->sequences.push_back(t.sequence);
    out->leases.push_back(t.lease);
    out->lease_sequences.push_back(t.lease_sequence);
    out->initial_priorities.push_back(t.initial_priority());
    out->insert_time_ns.push_back(t.insert_time_ns());
    const size_t length = std::min<size_t>(t.payload.size(), max_payload);
    std::memcpy(out->payloads.data() + i * max_payload, t.payload.data(), length);
    out->lengths.push_back(static_cast<uint32_t>(length));
    if (!decode) continue;
    absl::StatusOr<absl::Span<const uint8_t>> encoded = rl::EncodedTransitionPrefix(t.payload);
    absl::Status s = encoded.ok() ? out->transitions->AddEncoded(*encoded) : encoded.status();
    if (!s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat("forwarded transition ", t.sequence, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

py::dict ForwardedDict(ForwardedCopy&& c) {
  const auto n = static_cast<py::ssize_t>(c.sequences.size());
  py::dict d;
  d["sequences"] = ToArray(std::move(c.sequences), {n});
  d["leases"] = ToArray(std::move(c.leases), {n});
  d["lease_sequences"] = ToArray(std::move(c.lease_sequences), {n});
  d["initial_priorities"] = ToArray(std::move(c.initial_priorities), {n});
  d["insert_time_ns"] = ToArray(std::move(c.insert_time_ns), {n});
  d["payloads"] = ToArray(std::move(c.payloads), {n, static_cast<py::ssize_t>(c.payload_stride)});
  d["lengths"] = ToArray(std::move(c.lengths), {n});
  if (c.transitions != nullptr) AddTransitionArrays(*c.transitions, &d);
  return d;
}

class PyForwardReader {
 public:
  // `forwarded_batches`: the hybrid placement's batches (a server started
  // with --forward), else the learner placement's journal. `policy`:
  // "in_order" or "freshest" (learner placement); "in_order" for forwarded
  // batches (the server chooses what crosses).
  PyForwardReader(std::shared_ptr<Session> session, bool forwarded_batches,
                  const std::string& policy, uint64_t window, uint32_t chunk_slots,
                  uint32_t chunks_in_flight, uint32_t depth, bool decode)
      : session_(session), decode_(decode), forwarded_batches_(forwarded_batches) {
    if (policy != "in_order" && policy != "freshest") {
      throw StatusError(absl::InvalidArgumentError(
          absl::StrCat("policy=", policy, ": must be in_order or freshest")));
    }
    absl::Status status;
    {
      SessionCall call(*session_);
      client::ClientSession& client = session_->client();
      if (client.config().frame_stack > 0) {
        status = absl::FailedPreconditionError(absl::StrCat(
            "the server stores frames once (frame_stack=", client.config().frame_stack,
            "): forward_reader() hands over transitions, not frame records; train on it from "
            "Python with the buffer placement (reader() and dreplay.FrameCache), or with the "
            "C++ learner's --replay_placement learner or hybrid"));
      }
      max_payload_ = client.config().max_payload();
      observation_size_ = client.config().observation_size;
      observation_type_ = ObservationTypeOf(client.config());
      if (!status.ok()) {
        // Refused above.
      } else if (forwarded_batches_) {
        learner::ForwardedBatchReaderOptions options;
        options.batch_reader.depth = depth;
        absl::StatusOr<std::unique_ptr<learner::ForwardedBatchReader>> r =
            learner::ForwardedBatchReader::Create(&client, options);
        if (r.ok()) batches_ = *std::move(r);
        status = r.status();
      } else {
        learner::ForwardReaderOptions options;
        options.policy = policy == "freshest" ? learner::ForwardPolicy::kFreshest
                                              : learner::ForwardPolicy::kInOrder;
        options.window = window;
        options.chunk_slots = chunk_slots;
        options.max_chunks_in_flight = chunks_in_flight;
        absl::StatusOr<std::unique_ptr<learner::ForwardReader>> r =
            learner::ForwardReader::Create(&client, options);
        if (r.ok()) reader_ = *std::move(r);
        status = r.status();
      }
    }
    ThrowIfError(status);
    if (forwarded_batches_ && policy != "in_order") {
      throw StatusError(absl::InvalidArgumentError(absl::StrCat(
          "policy=", policy, ": the server forwards (--forward) and chooses what crosses")));
    }
  }
  ~PyForwardReader() {
    SessionCall call(*session_);  // the clients go under the lock, without the GIL
    reader_.reset();
    batches_.reset();
  }

  py::dict Next(double timeout_s) {
    if (!(timeout_s >= 0)) {
      throw StatusError(
          absl::InvalidArgumentError(absl::StrCat("timeout_s=", timeout_s, ": must be >= 0")));
    }
    ForwardedCopy copy;
    absl::Status status;
    {
      SessionCall call(*session_);
      const absl::Duration timeout = absl::Seconds(timeout_s);
      status =
          reader_ != nullptr ? reader_->Next(timeout, &fresh_) : batches_->Next(timeout, &fresh_);
      if (status.ok()) {
        status = CopyForwarded(fresh_, max_payload_, decode_, observation_size_, observation_type_,
                               &copy);
      }
    }
    ThrowIfError(status);
    return ForwardedDict(std::move(copy));
  }

  // The server's ingest cursor as last READ: the transitions generated.
  uint64_t ServerIngested() {
    SessionCall call(*session_);
    return reader_ != nullptr ? reader_->server_ingested() : batches_->server_ingested();
  }

  std::string Kind() const { return forwarded_batches_ ? "forwarded_batches" : "journal"; }

  py::dict Stats() {
    learner::ForwardReaderStats f;
    learner::BatchReaderStats b;
    {
      SessionCall call(*session_);  // without the GIL: no Python object here
      if (reader_ != nullptr) f = reader_->stats();
      if (batches_ != nullptr) b = batches_->stats();
    }
    py::dict d;
    if (!forwarded_batches_) {
      d["transitions"] = f.transitions;
      d["overwritten"] = f.overwritten;
      d["skipped_uncommitted"] = f.skipped_uncommitted;
      d["skipped_behind"] = f.skipped_behind;
      d["skipped_sequences"] = f.skipped_sequences;
      d["journal_entries_lost"] = f.journal_entries_lost;
      d["transitions_fetched"] = f.transitions_fetched;
      d["distinct_transitions_fetched"] = f.distinct_transitions_fetched;
      d["bytes_read"] = f.bytes_read;
    } else {
      d["transitions"] = b.transitions;
      d["batches"] = b.batches;
      d["transitions_fetched"] = b.transitions_fetched;
      d["distinct_transitions_fetched"] = b.distinct_transitions_fetched;
      d["bytes_read"] = b.bytes_read;
      d["redelivered"] = b.redelivered;
    }
    return d;
  }

 private:
  std::shared_ptr<Session> session_;
  const bool decode_;
  const bool forwarded_batches_;
  uint32_t max_payload_ = 0;
  uint32_t observation_size_ = 0;
  rl::ObservationType observation_type_ = rl::ObservationType::kFloat32;
  std::unique_ptr<learner::ForwardReader> reader_;          // the journal
  std::unique_ptr<learner::ForwardedBatchReader> batches_;  // --forward's batches
  std::vector<learner::ForwardedTransition> fresh_;
};

class PyActorStatsPublisher {
 public:
  explicit PyActorStatsPublisher(std::shared_ptr<Session> session) : session_(session) {
    publisher_ = CreateUnderLock(
        *session_, [&] { return actor::ActorStatsPublisher::Create(&session_->client()); });
  }
  ~PyActorStatsPublisher() {
    SessionCall call(*session_);
    publisher_.reset();
  }

  void RecordStep(uint64_t steps) {
    SessionCall call(*session_);
    publisher_->RecordStep(steps);
  }
  void RecordEpisode(double episode_return) {
    SessionCall call(*session_);
    publisher_->RecordEpisode(episode_return);
  }
  void Publish(uint64_t transitions) {
    absl::Status status;
    {
      SessionCall call(*session_);
      status = publisher_->Publish(transitions);
    }
    ThrowIfError(status);
  }

 private:
  std::shared_ptr<Session> session_;
  std::unique_ptr<actor::ActorStatsPublisher> publisher_;
};

}  // namespace

void RegisterForwardClients(py::module_& m) {
  py::class_<PyForwardReader>(m, "ForwardReader")
      .def(py::init<std::shared_ptr<Session>, bool, const std::string&, uint64_t, uint32_t,
                    uint32_t, uint32_t, bool>(),
           py::arg("session"), py::arg("forwarded_batches"), py::arg("policy") = "in_order",
           py::arg("window") = 0, py::arg("chunk_slots") = 256, py::arg("chunks_in_flight") = 8,
           py::arg("depth") = 0, py::arg("decode") = true)
      .def("next", &PyForwardReader::Next, py::arg("timeout_s") = 1.0,
           "What arrived within timeout_s (arrays; empty when nothing did).")
      .def_property_readonly("server_ingested", &PyForwardReader::ServerIngested)
      .def_property_readonly("kind", &PyForwardReader::Kind)
      .def("stats", &PyForwardReader::Stats);

  py::class_<PyActorStatsPublisher>(m, "ActorStatsPublisher")
      .def(py::init<std::shared_ptr<Session>>(), py::arg("session"))
      .def("record_step", &PyActorStatsPublisher::RecordStep, py::arg("steps") = 1)
      .def("record_episode", &PyActorStatsPublisher::RecordEpisode, py::arg("episode_return"))
      .def("publish", &PyActorStatsPublisher::Publish, py::arg("transitions"),
           "WRITEs the actor's line: counts, returns, and `transitions` committed.");
}

}  // namespace dreplay::python
