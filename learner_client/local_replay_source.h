// Copyright dreplay authors.
//
// local_replay_source.h: the ReplaySource (replay_source.h) of the learner
// and hybrid placements. The buffer node only forwards: every ingested
// transition arrives in order (learner), or those it chose, once each
// (hybrid), from a TransitionStream. The source inserts
// it (with the actor's initial priority) into its own replay::ReplayMemory,
// the same code as the server's, samples batches from it with the same
// alpha and beta schedule, and updates the priorities locally.
//
// Its memory obeys a replay::RateLimiter (LearnerLoopOptions::
// samples_per_insert, spi_error_buffer, min_replay_size): inserted =
// transitions generated, sampled = transitions trained on, as the buffer
// node's limiter counts them. Generated is the server's ingest cursor as
// the stream last saw it (TransitionStream::generated(), counted from its
// value when the source is made), so transitions the forwarding lost or
// skipped count too,
// and at one samples per insert every placement trains as much per
// transition the actors made, whatever the link delivers. A stream that
// does not know falls back to counting arrivals. While the limiter allows
// a batch, Next() takes what has arrived without waiting.
//
// Metrics: the arrivals (they crossed the link), the data age of each
// sampled transition when it is given to train on, and the |TD error| of
// each arrival at its first training use (the train step's own, so no
// extra forward pass: MetricsRecorder::RecordFirstUse).
//
// Frames stored once (context.frame_stack > 0): the arrivals are frame
// records. Learner placement: every record arrives, in each lease's order;
// a LocalFrameStore keeps them, the memory holds the transitions whose
// records are all held, and batches are assembled from the store. Hybrid
// placement: transitions arrive in the forwarder's order and the stream
// keeps the records it received (TransitionStream::keeps_records()); a
// ForwardedFrameIndex keeps, from there, the records of the transitions in
// the memory, and assembles from them. A record that does not decode is
// left out and counted.
//
// Bad data: a forwarded transition that does not decode to the
// environment's shape, or that rl::CheckTrainable refuses, is left out and
// counted. Payloads may carry padding after their encoding (actor
// --payload_pad_bytes); only the encoding is stored.

#ifndef DREPLAY_LEARNER_CLIENT_LOCAL_REPLAY_SOURCE_H_
#define DREPLAY_LEARNER_CLIENT_LOCAL_REPLAY_SOURCE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "learner_client/forwarded_frames.h"
#include "learner_client/learner_loop.h"
#include "learner_client/local_frames.h"
#include "learner_client/replay_source.h"
#include "replay/rate_limiter.h"
#include "replay/replay_memory.h"
#include "rl/transition.h"

namespace dreplay::learner {

class LocalReplaySource : public ReplaySource {
 public:
  // `stream` is not owned and outlives the source. Uses options' memory,
  // beta, batch_size and limiter fields (LearnerLoopOptions::Validate()
  // checks them for this placement).
  static absl::StatusOr<std::unique_ptr<LocalReplaySource>> Create(
      const LearnerLoopOptions& options, TransitionStream* stream,
      const ReplaySourceContext& context);

  absl::StatusOr<bool> Next(absl::Duration timeout, rl::TransitionBatch* batch,
                            std::vector<float>* weights) override;
  absl::Status Idle(absl::Duration timeout) override;
  absl::Status Trained(absl::Span<const float> abs_td_errors) override;
  absl::StatusOr<std::optional<double>> SamplesPerInsert() override;
  uint64_t transitions_dropped() const override { return drops_.count(); }
  uint64_t local_size() const override { return memory_->size(); }
  const replay::RateLimiter* rate_limiter() const override { return &limiter_; }

 private:
  LocalReplaySource(const LearnerLoopOptions& options, TransitionStream* stream,
                    const ReplaySourceContext& context,
                    std::unique_ptr<replay::ReplayMemory> memory);
  // Decodes, checks, measures and stores arrivals_ (what the stream gave).
  absl::Status Accept();
  // The same for frame records (frames_ or forwarded_).
  absl::Status AcceptRecords();
  // Takes what the stream gives within `timeout`, counts what the server
  // ingested since the last reading as inserted, and Accept()s arrivals.
  absl::Status Receive(absl::Duration timeout);

  const replay::BetaSchedule beta_;
  const uint32_t batch_size_;
  TransitionStream* const stream_;
  const ReplaySourceContext context_;
  const size_t payload_size_;
  DropCounter drops_;
  replay::RateLimiter limiter_;
  std::unique_ptr<replay::ReplayMemory> memory_;
  std::unique_ptr<LocalFrameStore> frames_;         // frames stored once, learner placement
  std::unique_ptr<ForwardedFrameIndex> forwarded_;  // and hybrid placement
  uint64_t records_arrived_ = 0;                    // numbers the frame records by arrival
  // The payloads, one payload_size_ slot per ring index, and their
  // insert times (ForwardedItem::insert_time_ns).
  std::vector<uint8_t> ring_;
  std::vector<uint64_t> insert_ns_;
  // Per ring index: its transition was not trained on yet.
  std::vector<uint8_t> unused_;
  uint64_t batches_sampled_ = 0;
  // The stream's generated() at the last reading.
  std::optional<uint64_t> generated_seen_;
  // The batch Next() returned.
  std::vector<replay::SampledItem> items_;
  int sampled_count_ = 0;
  // Scratch for arrivals.
  std::vector<ForwardedItem> arrivals_;
  std::vector<ForwardedItem> kept_arrivals_;
  std::vector<float> first_use_errors_;
  rl::Transition scratch_;
};

}  // namespace dreplay::learner

#endif  // DREPLAY_LEARNER_CLIENT_LOCAL_REPLAY_SOURCE_H_
