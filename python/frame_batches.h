// Copyright dreplay authors.
//
// frame_batches.h: what the Python BatchReader hands over for a server that
// stores frames once (LayoutConfig::frame_stack D > 0), so that a learner
// can keep its frames on its own device and gather stacks there
// (dreplay.FrameCache): the frames that arrived with the batch, once each,
// with the slot index and sequence that name them, and per transition the
// 2D (slot index, sequence) pairs of its two stacks' frames, oldest first.
// Host memory and the bus then carry about one frame per new record, not
// 2D per sample. With decode, the stacks are also assembled on the CPU
// (learner::FrameBatchAssembler), the same bytes the C++ learner trains on.
//
// And dreplay.FrameRecorder: rl::FrameRecorder for Python actors.

#ifndef DREPLAY_PYTHON_FRAME_BATCHES_H_
#define DREPLAY_PYTHON_FRAME_BATCHES_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "learner_client/batch_reader.h"
#include "protocol/layout.h"
#include "pybind11/pybind11.h"

namespace dreplay::python {

struct FramesCopy {
  uint32_t depth = 0;
  uint32_t frame_bytes = 0;
  // The frames that arrived with the batch: slot index, sequence, bytes.
  std::vector<uint32_t> frame_indices;
  std::vector<uint64_t> frame_sequences;
  std::vector<uint8_t> frames;  // frame_indices.size() x frame_bytes
  // Per transition row, depth each: its observation's and its next
  // observation's frames, by slot index and sequence.
  std::vector<uint32_t> observation_slots, next_observation_slots;
  std::vector<uint64_t> observation_sequences, next_observation_sequences;
  // Per row: the transition's own fields, from its record.
  std::vector<int64_t> actions;
  std::vector<float> rewards, discounts, dones;
};

// Fills `out` from the transitions `rows` of `batch` (entry numbers) and
// every record the batch carried. INTERNAL when a record of the batch does
// not decode (the server checks them at ingest).
absl::Status CopyFrames(const learner::StagedBatch& batch, const protocol::LayoutConfig& config,
                        const std::vector<uint32_t>& rows, FramesCopy* out);

// Adds frame_indices, frame_sequences, frames, observation_slots,
// observation_sequences, next_observation_slots, next_observation_sequences
// and frame_stack to `d`, and actions, rewards, discounts and dones where
// `d` has none yet (a batch read without decoding).
void AddFrameArrays(FramesCopy&& copy, pybind11::dict* d);

// dreplay.FrameRecorder.
void RegisterFrameRecorder(pybind11::module_& m);

}  // namespace dreplay::python

#endif  // DREPLAY_PYTHON_FRAME_BATCHES_H_
