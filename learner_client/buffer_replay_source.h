// Copyright dreplay authors.
//
// buffer_replay_source.h: the buffer placement's ReplaySource
// (replay_source.h). The replay memory is in the buffer node; batches are
// the ones the server pre-sampled (with their importance-sampling weights),
// read through a BatchSource, and the batch's new priorities go back
// through it.
//
// Metrics: the data age of every entry of the batch, crossed or held by
// the learner cache, when the batch is given to train on, and the |TD
// error| of the entries that crossed the link as TrainStep computes it
// before its update.
//
// Bad data: an entry rl::CheckTrainable refuses is left out of the batch
// and counted; its priority written back is 0 (the lowest the server
// stores: rarely sampled again). A batch with nothing left is answered with
// those priorities and not trained on.
//
// The samples per insert it reports: entries trained on over the
// transitions the server ingested, both since Start().

#ifndef DREPLAY_LEARNER_CLIENT_BUFFER_REPLAY_SOURCE_H_
#define DREPLAY_LEARNER_CLIENT_BUFFER_REPLAY_SOURCE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "learner_client/learner_loop.h"
#include "learner_client/replay_source.h"
#include "rl/transition.h"

namespace dreplay::learner {

class BufferReplaySource : public ReplaySource {
 public:
  // `batches` is not owned and outlives the source. `server_ingested`: the
  // server's ingest cursor now (empty: samples per insert unknown).
  BufferReplaySource(BatchSource* batches,
                     std::function<absl::StatusOr<uint64_t>()> server_ingested,
                     const ReplaySourceContext& context);

  absl::Status Start() override;
  absl::StatusOr<bool> Next(absl::Duration timeout, rl::TransitionBatch* batch,
                            std::vector<float>* weights) override;
  absl::Status Trained(absl::Span<const float> abs_td_errors) override;
  absl::StatusOr<std::optional<double>> SamplesPerInsert() override;
  uint64_t transitions_dropped() const override {
    return drops_.count() + batches_->transitions_dropped();
  }

 private:
  // Leaves the rows of `batch` that cannot be trained on out of it, of
  // `weights` and of origins_ (when not empty); kept_rows_ names the rows
  // kept, by their index in the batch as it came.
  void DropUntrainableRows(rl::TransitionBatch* batch, std::vector<float>* weights);

  BatchSource* const batches_;
  const std::function<absl::StatusOr<uint64_t>()> server_ingested_;
  const ReplaySourceContext context_;
  DropCounter drops_;
  // The batch Next() returned: its entries as they came, their origins,
  // the rows kept.
  size_t entries_ = 0;
  std::vector<EntryOrigin> origins_;
  std::vector<uint32_t> kept_rows_;
  // Scratch: |TD errors| of the arrived entries, priorities of all entries.
  std::vector<float> arrived_errors_;
  std::vector<float> entry_priorities_;
  // Entries trained on, and the server's ingest cursor at Start().
  uint64_t sampled_ = 0;
  std::optional<uint64_t> ingested_at_start_;
};

}  // namespace dreplay::learner

#endif  // DREPLAY_LEARNER_CLIENT_BUFFER_REPLAY_SOURCE_H_
