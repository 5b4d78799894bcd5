// Copyright dreplay authors.

#include "python/learner_clients.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "learner_client/batch_reader.h"
#include "learner_client/frame_batch.h"
#include "learner_client/param_publisher.h"
#include "learner_client/priority_writer.h"
#include "protocol/mailbox.h"
#include "pybind11/numpy.h"
#include "python/arrays.h"
#include "python/frame_batches.h"
#include "python/session.h"
#include "python/status_error.h"
#include "rl/transition.h"

namespace dreplay::python {
namespace py = pybind11;
namespace {

// One batch, copied out of the reader's buffers (see the header comment).
struct BatchCopy {
  uint64_t batch_number = 0;
  uint64_t epoch = 0;
  uint64_t incarnation = 0;
  uint32_t size = 0;
  float beta = 0;
  std::vector<float> weights;
  std::vector<uint64_t> sequences;
  std::vector<uint32_t> indices;
  std::vector<uint64_t> insert_time_ns;
  std::vector<uint8_t> arrived;
  uint32_t payload_stride = 0;
  std::vector<uint8_t> payloads;  // size x payload_stride
  std::vector<uint32_t> lengths;
  bool decoded = false;
  std::unique_ptr<rl::TransitionBatch> transitions;
  std::optional<FramesCopy> frames;  // a frame-stack server's
};

// How a batch's transitions are read.
struct ReadShape {
  const protocol::LayoutConfig* config = nullptr;
  uint32_t max_payload = 0;
  bool decode = false;
  uint32_t observation_size = 0;
  rl::ObservationType observation_type = rl::ObservationType::kFloat32;
  learner::FrameBatchAssembler* assembler = nullptr;  // a frame-stack server's
};

// Decodes (or, with frames, assembles) the transitions of `batch` into
// out->transitions; *rows gets the entries kept: with frames, a transition
// whose records the learner cache could not serve is left out.
absl::Status DecodeRows(const learner::StagedBatch& batch, const ReadShape& shape,
                        std::vector<uint32_t>* rows, BatchCopy* out) {
  if (shape.observation_size == 0) {
    return absl::FailedPreconditionError(
        "the server publishes no observation_size: read with decode=False");
  }
  out->transitions =
      std::make_unique<rl::TransitionBatch>(shape.observation_size, shape.observation_type);
  if (shape.assembler != nullptr) shape.assembler->Index(batch);
  for (uint32_t i = 0; i < batch.size(); ++i) {
    absl::Status s;
    if (shape.assembler != nullptr) {
      s = shape.assembler->Add(batch, i, out->transitions.get());
      if (absl::IsNotFound(s)) continue;
    } else {
      absl::StatusOr<absl::Span<const uint8_t>> encoded =
          rl::EncodedTransitionPrefix(batch.payload(i));
      s = encoded.ok() ? out->transitions->AddEncoded(*encoded) : encoded.status();
    }
    if (!s.ok()) {
      return absl::Status(
          s.code(), absl::StrCat("entry ", i, " of batch ", out->batch_number, ": ", s.message()));
    }
    rows->push_back(i);
  }
  out->decoded = true;
  return absl::OkStatus();
}

// Copies `batch` (decoding its transitions when shape.decode); runs without
// the GIL.
absl::Status CopyBatch(const learner::StagedBatch& batch, const ReadShape& shape, BatchCopy* out) {
  out->batch_number = batch.batch_number();
  out->epoch = batch.epoch();
  out->incarnation = batch.incarnation();
  out->beta = batch.header().beta;
  std::vector<uint32_t> rows;
  if (shape.decode) {
    RETURN_IF_ERROR(DecodeRows(batch, shape, &rows, out));
  } else {
    for (uint32_t i = 0; i < batch.size(); ++i) rows.push_back(i);
  }
  const auto n = static_cast<uint32_t>(rows.size());
  const uint32_t max_payload = shape.max_payload;
  out->size = n;
  out->payload_stride = max_payload;
  out->weights.resize(n);
  out->sequences.resize(n);
  out->indices.resize(n);
  out->insert_time_ns.resize(n);
  out->arrived.resize(n);
  out->payloads.assign(size_t{n} * max_payload, 0);
  out->lengths.resize(n);
  for (uint32_t k = 0; k < n; ++k) {
    const uint32_t i = rows[k];
    out->weights[k] = batch.weight(i);
    out->sequences[k] = batch.entry(i).slot_sequence;
    out->indices[k] = batch.entry(i).slot_index;
    out->insert_time_ns[k] = batch.insert_time_ns(i);
    out->arrived[k] = batch.arrived(i) ? 1 : 0;
    absl::Span<const uint8_t> payload = batch.payload(i);
    const size_t length = std::min<size_t>(payload.size(), max_payload);
    std::memcpy(out->payloads.data() + size_t{k} * max_payload, payload.data(), length);
    out->lengths[k] = static_cast<uint32_t>(length);
  }
  if (shape.config->frame_stack > 0) {
    out->frames.emplace();
    RETURN_IF_ERROR(CopyFrames(batch, *shape.config, rows, &*out->frames));
  }
  return absl::OkStatus();
}

py::dict BatchDict(BatchCopy&& b) {
  const py::ssize_t n = b.size;
  py::dict d;
  d["batch_number"] = b.batch_number;
  d["epoch"] = b.epoch;
  d["incarnation"] = b.incarnation;
  d["beta"] = b.beta;
  d["weights"] = ToArray(std::move(b.weights), {n});
  d["sequences"] = ToArray(std::move(b.sequences), {n});
  d["indices"] = ToArray(std::move(b.indices), {n});
  d["insert_time_ns"] = ToArray(std::move(b.insert_time_ns), {n});
  d["arrived"] = ToArray(std::move(b.arrived), {n}).attr("astype")("bool");
  d["payloads"] = ToArray(std::move(b.payloads), {n, static_cast<py::ssize_t>(b.payload_stride)});
  d["lengths"] = ToArray(std::move(b.lengths), {n});
  if (b.decoded) AddTransitionArrays(*b.transitions, &d);
  if (b.frames.has_value()) AddFrameArrays(*std::move(b.frames), &d);
  return d;
}

class PyBatchReader {
 public:
  PyBatchReader(std::shared_ptr<Session> session, uint32_t depth, bool verify_slots,
                bool learner_cache, bool decode)
      : session_(session) {
    learner::BatchReaderOptions options;
    options.depth = depth;
    options.verify_slots = verify_slots;
    options.learner_cache = learner_cache;
    absl::StatusOr<std::unique_ptr<learner::BatchReader>> reader;
    {
      SessionCall call(*session_);
      if (session_->client().policy().forward != 0) {
        reader = absl::FailedPreconditionError(
            "the server forwards each transition once (replay_server --forward): read with "
            "connect(..., placement=\"hybrid\") and forward_reader()");
      } else {
        reader = learner::BatchReader::Create(&session_->client(), options);
      }
      config_ = session_->client().config();
      shape_.config = &config_;
      shape_.max_payload = config_.max_payload();
      shape_.decode = decode;
      shape_.observation_size = config_.observation_size;
      shape_.observation_type = ObservationTypeOf(config_);
      if (config_.frame_stack > 0) {
        assembler_ = std::make_unique<learner::FrameBatchAssembler>(config_);
        shape_.assembler = assembler_.get();
      }
    }
    reader_ = ValueOrThrow(std::move(reader));
  }
  ~PyBatchReader() {
    SessionCall call(*session_);  // the client goes under the lock, without the GIL
    reader_.reset();
  }

  py::dict Next(double timeout_s) {
    if (!(timeout_s >= 0)) {
      throw StatusError(
          absl::InvalidArgumentError(absl::StrCat("timeout_s=", timeout_s, ": must be >= 0")));
    }
    BatchCopy copy;
    absl::Status status;
    {
      SessionCall call(*session_);
      absl::StatusOr<learner::StagedBatch> batch = reader_->Next(absl::Seconds(timeout_s));
      status = batch.ok() ? CopyBatch(*batch, shape_, &copy) : batch.status();
    }
    ThrowIfError(status);
    return BatchDict(std::move(copy));
  }

  py::dict Stats() {
    learner::BatchReaderStats s;
    {
      SessionCall call(*session_);
      s = reader_->stats();
    }
    py::dict d;
    d["batches"] = s.batches;
    d["transitions"] = s.transitions;
    d["reads"] = s.reads;
    d["bytes_read"] = s.bytes_read;
    d["polls"] = s.polls;
    d["not_staged"] = s.not_staged;
    d["torn"] = s.torn;
    d["transitions_fetched"] = s.transitions_fetched;
    d["distinct_transitions_fetched"] = s.distinct_transitions_fetched;
    d["cache_hits"] = s.cache_hits;
    d["cache_misses"] = s.cache_misses;
    d["bad_slots"] = s.bad_slots;
    d["resyncs"] = s.resyncs;
    d["epoch_changes"] = s.epoch_changes;
    d["reconnects"] = s.reconnects;
    d["redelivered"] = s.redelivered;
    d["superseded"] = s.superseded;
    return d;
  }

 private:
  std::shared_ptr<Session> session_;
  protocol::LayoutConfig config_;
  ReadShape shape_;
  std::unique_ptr<learner::FrameBatchAssembler> assembler_;  // a frame-stack server's
  std::unique_ptr<learner::BatchReader> reader_;
};

using U64Array = py::array_t<uint64_t, py::array::c_style | py::array::forcecast>;
using U32Array = py::array_t<uint32_t, py::array::c_style | py::array::forcecast>;
using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;

class PyPriorityWriter {
 public:
  explicit PyPriorityWriter(std::shared_ptr<Session> session) : session_(session) {
    writer_ = CreateUnderLock(*session_,
                              [&] { return learner::PriorityWriter::Create(&session_->client()); });
  }
  ~PyPriorityWriter() {
    SessionCall call(*session_);  // the client goes under the lock, without the GIL
    writer_.reset();
  }

  void Write(uint64_t batch_number, uint64_t epoch, uint64_t incarnation, U64Array sequences,
             U32Array indices, FloatArray priorities) {
    const py::ssize_t n = priorities.size();
    if (sequences.ndim() != 1 || indices.ndim() != 1 || priorities.ndim() != 1 ||
        sequences.size() != n || indices.size() != n) {
      throw StatusError(absl::InvalidArgumentError(
          absl::StrCat("sequences, indices and priorities must be 1-D arrays of one length (",
                       sequences.size(), ", ", indices.size(), ", ", n, ")")));
    }
    std::vector<protocol::PriorityRecord> records(n);
    for (py::ssize_t i = 0; i < n; ++i) {
      records[i].slot_sequence = sequences.at(i);
      records[i].slot_index = indices.at(i);
      records[i].priority = priorities.at(i);
    }
    absl::Status status;
    {
      SessionCall call(*session_);
      status = writer_->Write(batch_number, epoch, incarnation, records);
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

  py::dict Stats() {
    learner::PriorityWriterStats s;
    {
      SessionCall call(*session_);
      s = writer_->stats();
    }
    py::dict d;
    d["updates"] = s.updates;
    d["records"] = s.records;
    d["bytes_written"] = s.bytes_written;
    d["lost"] = s.lost;
    d["reconnects"] = s.reconnects;
    return d;
  }

 private:
  std::shared_ptr<Session> session_;
  std::unique_ptr<learner::PriorityWriter> writer_;
};

class PyParamPublisher {
 public:
  explicit PyParamPublisher(std::shared_ptr<Session> session) : session_(session) {
    publisher_ = CreateUnderLock(
        *session_, [&] { return learner::ParamPublisher::Create(&session_->client()); });
  }
  ~PyParamPublisher() {
    SessionCall call(*session_);  // the client goes under the lock, without the GIL
    publisher_.reset();
  }

  uint64_t Publish(py::bytes data) {
    std::string_view bytes = data;  // data is held by the caller for the call
    absl::StatusOr<uint64_t> version;
    {
      SessionCall call(*session_);
      version = publisher_->Publish(AsSpan(bytes));
    }
    return ValueOrThrow(std::move(version));
  }

  bool PublishIfIdle(py::bytes data) {
    std::string_view bytes = data;
    absl::StatusOr<bool> posted;
    {
      SessionCall call(*session_);
      posted = publisher_->PublishIfIdle(AsSpan(bytes));
    }
    return ValueOrThrow(std::move(posted));
  }

  uint64_t Version() {
    SessionCall call(*session_);
    return publisher_->version();
  }

 private:
  static absl::Span<const uint8_t> AsSpan(std::string_view s) {
    return absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  }
  std::shared_ptr<Session> session_;
  std::unique_ptr<learner::ParamPublisher> publisher_;
};

}  // namespace

void RegisterLearnerClients(py::module_& m) {
  py::class_<PyBatchReader>(m, "BatchReader")
      .def(py::init<std::shared_ptr<Session>, uint32_t, bool, bool, bool>(), py::arg("session"),
           py::arg("depth") = 0, py::arg("verify_slots") = true, py::arg("learner_cache") = false,
           py::arg("decode") = true)
      .def("next", &PyBatchReader::Next, py::arg("timeout_s") = 30.0,
           "The next batch as a dict of arrays it owns (see learner_clients.h).")
      .def("stats", &PyBatchReader::Stats);

  py::class_<PyPriorityWriter>(m, "PriorityWriter")
      .def(py::init<std::shared_ptr<Session>>(), py::arg("session"))
      .def("write", &PyPriorityWriter::Write, py::arg("batch_number"), py::arg("epoch"),
           py::arg("incarnation"), py::arg("sequences"), py::arg("indices"), py::arg("priorities"))
      .def("flush", &PyPriorityWriter::Flush)
      .def("stats", &PyPriorityWriter::Stats);

  py::class_<PyParamPublisher>(m, "ParamPublisher")
      .def(py::init<std::shared_ptr<Session>>(), py::arg("session"))
      .def("publish", &PyParamPublisher::Publish, py::arg("data"))
      .def("publish_if_idle", &PyParamPublisher::PublishIfIdle, py::arg("data"))
      .def_property_readonly("version", &PyParamPublisher::Version);
}

}  // namespace dreplay::python
