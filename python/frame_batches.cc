// Copyright dreplay authors.

#include "python/frame_batches.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "protocol/frame_record.h"
#include "pybind11/numpy.h"
#include "pybind11/stl.h"
#include "python/arrays.h"
#include "python/status_error.h"
#include "rl/frame_recorder.h"

namespace dreplay::python {
namespace py = pybind11;
namespace {

// The record in a copied slot.
absl::Status DecodeSlot(const uint8_t* slot, const protocol::LayoutConfig& config,
                        size_t frame_bytes, protocol::FrameRecordView* view) {
  const auto* header = reinterpret_cast<const protocol::SlotHeader*>(slot);
  if (header->payload_length > config.max_payload()) {
    return absl::InternalError(absl::StrCat("slot of sequence ", header->sequence,
                                            " states a payload of ", header->payload_length));
  }
  const absl::Status s = protocol::DecodeFrameRecord(
      absl::MakeConstSpan(slot + sizeof(protocol::SlotHeader), header->payload_length), frame_bytes,
      view);
  if (!s.ok()) {
    return absl::InternalError(absl::StrCat("record ", header->sequence, ": ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CopyFrames(const learner::StagedBatch& batch, const protocol::LayoutConfig& config,
                        const std::vector<uint32_t>& rows, FramesCopy* out) {
  const uint32_t depth = config.frame_stack;
  const size_t frame_bytes = config.observation_size / depth;
  out->depth = depth;
  out->frame_bytes = static_cast<uint32_t>(frame_bytes);
  protocol::FrameRecordView view;
  auto keep_frame = [&](const protocol::BatchEntry& entry, const uint8_t* slot) -> absl::Status {
    RETURN_IF_ERROR(DecodeSlot(slot, config, frame_bytes, &view));
    if (!view.has_frame()) return absl::OkStatus();
    out->frame_indices.push_back(entry.slot_index);
    out->frame_sequences.push_back(entry.slot_sequence);
    out->frames.insert(out->frames.end(), view.frame.begin(), view.frame.end());
    return absl::OkStatus();
  };
  for (uint32_t i = 0; i < batch.size(); ++i) {
    if (batch.arrived(i)) RETURN_IF_ERROR(keep_frame(batch.entry(i), batch.slot(i)));
  }
  for (const learner::StagedEntry& r : batch.records()) {
    if (r.arrived) RETURN_IF_ERROR(keep_frame(r.entry, r.slot));
  }
  const uint64_t lease_slots = protocol::LeaseSlots(config);
  for (const uint32_t i : rows) {
    RETURN_IF_ERROR(DecodeSlot(batch.slot(i), config, frame_bytes, &view));
    if (!view.has_transition()) {
      return absl::InternalError(
          absl::StrCat("record ", batch.entry(i).slot_sequence, " carries no transition"));
    }
    out->actions.push_back(view.header.action);
    out->rewards.push_back(view.header.reward);
    out->discounts.push_back(view.header.discount);
    out->dones.push_back(view.header.done != 0 ? 1.0f : 0.0f);
    const uint64_t q = batch.entry(i).slot_sequence;
    const auto lease = static_cast<uint32_t>(batch.entry(i).slot_index / lease_slots);
    for (uint32_t k = 0; k < depth; ++k) {
      for (const bool next : {false, true}) {
        const uint64_t s = q - (next ? view.next_refs[k] : view.observation_refs[k]);
        const auto index = static_cast<uint32_t>(protocol::LeaseSlotIndex(config, lease, s));
        (next ? out->next_observation_slots : out->observation_slots).push_back(index);
        (next ? out->next_observation_sequences : out->observation_sequences).push_back(s);
      }
    }
  }
  return absl::OkStatus();
}

void AddFrameArrays(FramesCopy&& c, py::dict* d) {
  const auto rows = static_cast<py::ssize_t>(c.observation_slots.size() / std::max(1u, c.depth));
  const auto frames = static_cast<py::ssize_t>(c.frame_indices.size());
  const auto depth = static_cast<py::ssize_t>(c.depth);
  (*d)["frame_stack"] = c.depth;
  (*d)["frame_indices"] = ToArray(std::move(c.frame_indices), {frames});
  (*d)["frame_sequences"] = ToArray(std::move(c.frame_sequences), {frames});
  (*d)["frames"] = ToArray(std::move(c.frames), {frames, static_cast<py::ssize_t>(c.frame_bytes)});
  (*d)["observation_slots"] = ToArray(std::move(c.observation_slots), {rows, depth});
  (*d)["observation_sequences"] = ToArray(std::move(c.observation_sequences), {rows, depth});
  (*d)["next_observation_slots"] = ToArray(std::move(c.next_observation_slots), {rows, depth});
  (*d)["next_observation_sequences"] =
      ToArray(std::move(c.next_observation_sequences), {rows, depth});
  if (!d->contains("actions")) {
    (*d)["actions"] = ToArray(std::move(c.actions), {rows});
    (*d)["rewards"] = ToArray(std::move(c.rewards), {rows});
    (*d)["discounts"] = ToArray(std::move(c.discounts), {rows});
    (*d)["dones"] = ToArray(std::move(c.dones), {rows});
  }
}

void RegisterFrameRecorder(py::module_& m) {
  using Recorder = rl::FrameRecorder;
  auto records = [](std::vector<Recorder::Record>&& out) {
    py::list list;
    for (Recorder::Record& r : out) {
      list.append(py::make_tuple(
          r.sequence, py::bytes(reinterpret_cast<const char*>(r.bytes.data()), r.bytes.size())));
    }
    return list;
  };
  using U8Array = py::array_t<uint8_t, py::array::c_style | py::array::forcecast>;
  py::class_<Recorder>(m, "FrameRecorder",
                       "Frame records (frames stored once) from an actor's steps: each new "
                       "frame once, each n-step transition as references to its stacks' "
                       "frames. Append each record, in order, with ExperienceWriter.append.")
      .def(py::init([](int depth, size_t frame_bytes, int environments, int n, double gamma) {
             rl::FrameRecorderOptions o;
             o.depth = depth;
             o.frame_bytes = frame_bytes;
             o.environments = environments;
             o.nstep.n = n;
             o.nstep.discount = gamma;
             ThrowIfError(o.Validate());
             return std::make_unique<Recorder>(o);
           }),
           py::arg("depth"), py::arg("frame_bytes"), py::arg("environments") = 1, py::arg("n") = 3,
           py::arg("gamma") = 0.99)
      .def(
          "begin_episode",
          [records](Recorder& r, int environment, U8Array frame) {
            std::vector<Recorder::Record> out;
            ThrowIfError(
                r.BeginEpisode(environment, absl::MakeConstSpan(frame.data(), frame.size()), &out));
            return records(std::move(out));
          },
          py::arg("environment"), py::arg("frame"),
          "Starts an episode at `frame` (uint8, frame_bytes); [(sequence, record bytes)].")
      .def(
          "add_step",
          [records](Recorder& r, int environment, int action, double reward, U8Array frame,
                    bool terminated, bool truncated) {
            std::vector<Recorder::Record> out;
            ThrowIfError(r.AddStep(environment, action, reward,
                                   absl::MakeConstSpan(frame.data(), frame.size()), terminated,
                                   truncated, &out));
            return records(std::move(out));
          },
          py::arg("environment"), py::arg("action"), py::arg("reward"), py::arg("frame"),
          py::arg("terminated"), py::arg("truncated"),
          "One step: the new frame; [(sequence, record bytes)] to append in order.")
      .def_property_readonly("next_sequence", &Recorder::next_sequence);
}

}  // namespace dreplay::python
