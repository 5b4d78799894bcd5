// Copyright dreplay authors.

#include "python/actor_clients.h"

#include <cmath>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "actor_client/experience_writer.h"
#include "actor_client/param_fetcher.h"
#include "pybind11/numpy.h"
#include "pybind11/stl.h"
#include "python/session.h"
#include "python/status_error.h"
#include "rl/transition.h"

namespace dreplay::python {
namespace py = pybind11;
namespace {

using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;
using IntArray = py::array_t<int32_t, py::array::c_style | py::array::forcecast>;
using ByteArray = py::array_t<uint8_t, py::array::c_style | py::array::forcecast>;

// The bytes of a contiguous buffer (bytes, bytearray, a NumPy array...).
absl::Span<const uint8_t> BufferBytes(const py::buffer_info& info) {
  for (size_t d = info.ndim; d-- > 1;) {
    // C-contiguous: each stride is the next one's times its extent.
    if (info.strides[d - 1] != info.strides[d] * info.shape[d]) {
      throw StatusError(absl::InvalidArgumentError("the buffer is not C-contiguous"));
    }
  }
  if (info.ndim > 0 && info.strides[info.ndim - 1] != info.itemsize) {
    throw StatusError(absl::InvalidArgumentError("the buffer is not C-contiguous"));
  }
  return absl::MakeConstSpan(static_cast<const uint8_t*>(info.ptr), info.size * info.itemsize);
}

class PyExperienceWriter {
 public:
  PyExperienceWriter(std::shared_ptr<Session> session, uint32_t max_batch) : session_(session) {
    actor::ExperienceWriterOptions options;
    options.max_batch = max_batch;
    writer_ = CreateUnderLock(*session_, [&] {
      observation_type_ = ObservationTypeOf(session_->client().config());
      return actor::ExperienceWriter::Create(&session_->client(), options);
    });
  }
  // The version of the parameters the actor acts with (ParamFetcher.version):
  // sealed into the transitions appended from now on.
  void SetParamsVersion(uint64_t version) {
    SessionCall call(*session_);
    writer_->set_params_version(version);
  }
  ~PyExperienceWriter() {
    SessionCall call(*session_);  // the client goes under the lock, without the GIL
    writer_.reset();
  }

  void Append(py::buffer data, float priority) {
    py::buffer_info info = data.request();  // released after the call, with the GIL
    absl::Span<const uint8_t> bytes = BufferBytes(info);
    absl::Status status;
    {
      SessionCall call(*session_);
      status = writer_->Append(bytes, priority);
    }
    ThrowIfError(status);
  }

  // Encodes rows 0..B-1 as rl/transition.h transitions and appends them.
  void AppendTransitions(FloatArray observations, IntArray actions, FloatArray rewards,
                         FloatArray next_observations, py::array_t<bool> dones,
                         std::optional<FloatArray> discounts, std::optional<IntArray> steps,
                         std::optional<FloatArray> priorities) {
    if (observations.ndim() != 2 || next_observations.ndim() != 2) {
      throw StatusError(absl::InvalidArgumentError(
          "observations and next_observations must be [B, observation_size] arrays"));
    }
    const size_t rows = observations.shape(0);
    const size_t width = observations.shape(1);
    auto check = [&](const py::array& a, const char* name) {
      if (a.ndim() != 1 || static_cast<size_t>(a.shape(0)) != rows) {
        throw StatusError(absl::InvalidArgumentError(
            absl::StrCat(name, " must be a 1-D array of ", rows, " values")));
      }
    };
    if (static_cast<size_t>(next_observations.shape(0)) != rows ||
        static_cast<size_t>(next_observations.shape(1)) != width) {
      throw StatusError(
          absl::InvalidArgumentError("next_observations must have the shape of observations"));
    }
    check(actions, "actions");
    check(rewards, "rewards");
    check(dones, "dones");
    if (discounts) check(*discounts, "discounts");
    if (steps) check(*steps, "steps");
    if (priorities) check(*priorities, "priorities");
    auto done = dones.unchecked<1>();
    std::vector<uint8_t> done_bytes(rows);
    for (size_t i = 0; i < rows; ++i) done_bytes[i] = done(i) ? 1 : 0;

    absl::Status status;
    {
      SessionCall call(*session_);
      status = AppendRows(observations.data(), actions.data(), rewards.data(),
                          next_observations.data(), done_bytes.data(),
                          discounts ? discounts->data() : nullptr, steps ? steps->data() : nullptr,
                          priorities ? priorities->data() : nullptr, rows, width);
    }
    ThrowIfError(status);
  }

  void Flush() {
    absl::Status status;
    {
      SessionCall call(*session_);
      status = writer_->Flush();
    }
    ThrowIfError(status);
  }

  size_t Pending() {
    SessionCall call(*session_);
    return writer_->pending();
  }

  py::dict Stats() {
    actor::ExperienceWriterStats s;
    {
      SessionCall call(*session_);
      s = writer_->stats();
    }
    py::dict d;
    d["committed"] = s.committed;
    d["abandoned"] = s.abandoned;
    d["flushes"] = s.flushes;
    d["reconnects"] = s.reconnects;
    d["room_waits"] = s.room_waits;
    d["bytes_written"] = s.bytes_written;
    d["latency_mean_us"] = absl::ToDoubleMicroseconds(s.latency.mean());
    d["latency_p99_us"] = absl::ToDoubleMicroseconds(s.latency.Percentile(0.99));
    return d;
  }

 private:
  // Runs without the GIL, under the session's lock.
  absl::Status AppendRows(const float* obs, const int32_t* actions, const float* rewards,
                          const float* next_obs, const uint8_t* dones, const float* discounts,
                          const int32_t* steps, const float* priorities, size_t rows,
                          size_t width) {
    rl::Transition t;
    std::vector<uint8_t> encoded(rl::EncodedTransitionSize(width, observation_type_));
    for (size_t i = 0; i < rows; ++i) {
      t.observation.assign(obs + i * width, obs + (i + 1) * width);
      t.next_observation.assign(next_obs + i * width, next_obs + (i + 1) * width);
      t.action = actions[i];
      t.reward = rewards[i];
      t.done = dones[i] != 0;
      t.discount = discounts ? discounts[i] : 1.0f;
      const int32_t step_count = steps ? steps[i] : 1;
      if (step_count < 1 || step_count > rl::kMaxTransitionSteps) {
        return absl::InvalidArgumentError(absl::StrCat(
            "steps[", i, "]=", step_count, ": must be in [1, ", rl::kMaxTransitionSteps, "]"));
      }
      t.steps = static_cast<uint8_t>(step_count);
      absl::StatusOr<size_t> n =
          rl::EncodeTransition(t, absl::MakeSpan(encoded), observation_type_);
      if (!n.ok()) return n.status();
      absl::Status s = writer_->Append(encoded, priorities ? priorities[i] : 0.0f);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

  std::shared_ptr<Session> session_;
  std::unique_ptr<actor::ExperienceWriter> writer_;
  // How AppendTransitions() encodes observations: the server's spec's type.
  rl::ObservationType observation_type_ = rl::ObservationType::kFloat32;
};

class PyParamFetcher {
 public:
  explicit PyParamFetcher(std::shared_ptr<Session> session) : session_(session) {
    fetcher_ = CreateUnderLock(
        *session_, [&] { return actor::ParamFetcher::Create(&session_->client(), {}); });
  }
  ~PyParamFetcher() {
    SessionCall call(*session_);  // the client goes under the lock, without the GIL
    fetcher_.reset();
  }

  // The newer parameters as bytes, or None.
  py::object FetchIfNewer() {
    absl::StatusOr<bool> fresh;
    {
      SessionCall call(*session_);
      fresh = fetcher_->FetchIfNewer(&buffer_);
    }
    if (!ValueOrThrow(std::move(fresh))) return py::none();
    return py::bytes(reinterpret_cast<const char*>(buffer_.data()), buffer_.size());
  }

  uint64_t Version() {
    SessionCall call(*session_);
    return fetcher_->version();
  }

  py::dict Stats() {
    actor::ParamFetcherStats s;
    {
      SessionCall call(*session_);
      s = fetcher_->stats();
    }
    py::dict d;
    d["fetches"] = s.fetches;
    d["checks"] = s.checks;
    d["retries"] = s.retries;
    d["bytes_read"] = s.bytes_read;
    d["reconnects"] = s.reconnects;
    return d;
  }

 private:
  std::shared_ptr<Session> session_;
  std::unique_ptr<actor::ParamFetcher> fetcher_;
  std::vector<uint8_t> buffer_;
};

}  // namespace

void RegisterActorClients(py::module_& m) {
  py::class_<PyExperienceWriter>(m, "ExperienceWriter")
      .def(py::init<std::shared_ptr<Session>, uint32_t>(), py::arg("session"),
           py::arg("max_batch") = 32)
      .def("append", &PyExperienceWriter::Append, py::arg("data"), py::arg("priority") = 0.0f,
           "Appends one payload (any contiguous buffer); flushes when max_batch are pending.")
      .def("append_transitions", &PyExperienceWriter::AppendTransitions, py::arg("observations"),
           py::arg("actions"), py::arg("rewards"), py::arg("next_observations"), py::arg("dones"),
           py::arg("discounts") = py::none(), py::arg("steps") = py::none(),
           py::arg("priorities") = py::none())
      .def("flush", &PyExperienceWriter::Flush)
      .def("set_params_version", &PyExperienceWriter::SetParamsVersion, py::arg("version"),
           "The version of the parameters the actor acts with (ParamFetcher.version), sealed "
           "into each transition appended from now on, for the learner's policy lag.")
      .def_property_readonly("pending", &PyExperienceWriter::Pending)
      .def("stats", &PyExperienceWriter::Stats);

  py::class_<PyParamFetcher>(m, "ParamFetcher")
      .def(py::init<std::shared_ptr<Session>>(), py::arg("session"))
      .def("fetch_if_newer", &PyParamFetcher::FetchIfNewer)
      .def_property_readonly("version", &PyParamFetcher::Version)
      .def("stats", &PyParamFetcher::Stats);
}

}  // namespace dreplay::python
