// Copyright dreplay authors.
//
// batch_assembly.h: a staged batch (batch_reader.h) made into training rows,
// on a thread of its own. Each entry's payload is decoded
// (rl::EncodedTransitionPrefix) or, with frames stored once, its two stacks
// are assembled from the batch's records and the learner cache
// (frame_batch.h). An entry that does not decode is left out and counted.
//
// Assembly costs the learner's thread about half a core at the rates a GPU
// learner consumes (docs/benchmarks.md, "Feeding a GPU learner"), so
// LearnerServiceIo runs it here while the learner trains on the batch
// before:
//
//   BatchAssembly assembly(config, {});
//   assembly.Start(staged, &buffer);        // assembled on the worker thread
//   ... train on the batch before; the reader is not called meanwhile ...
//   AssembledBatch* done = assembly.Take();  // waits for it
//
// The views of `staged` (the reader's buffers and its learner cache) must
// stay valid until Take() returns: the caller does not call the reader's
// Next() in between. An AssembledBatch keeps what the batch's priority
// update needs (its number, epoch, incarnation and each entry's slot
// sequence and index), copied, because the reader reuses its buffers at
// its next Next(). Buffers are reused: a batch's rows, weights and origins
// are cleared, not freed, so assembly allocates nothing once they have
// grown to a batch.
//
// Thread safety: Start(), Take() and busy() from one thread at a time (the
// one that uses the batch reader); the worker touches only the batch being
// assembled and the frame assembler.

#ifndef DREPLAY_LEARNER_CLIENT_BATCH_ASSEMBLY_H_
#define DREPLAY_LEARNER_CLIENT_BATCH_ASSEMBLY_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/verification_log.h"
#include "learner_client/batch_reader.h"
#include "learner_client/frame_batch.h"
#include "learner_client/learner_io.h"
#include "protocol/layout.h"
#include "protocol/mailbox.h"
#include "rl/transition.h"

namespace dreplay::learner {

// A staged batch as training rows, and what its priority update needs.
struct AssembledBatch {
  AssembledBatch(size_t observation_size, rl::ObservationType type)
      : rows(observation_size, type) {}

  rl::TransitionBatch rows;
  std::vector<float> weights;         // one per row
  std::vector<float> priority_alpha;  // one per row: p^alpha as the node sampled it
  float beta = 0;                     // the batch header's
  std::vector<EntryOrigin> origins;   // one per row
  // The staged entry each row came from (ascending).
  std::vector<uint32_t> kept_entries;
  // The batch's identity and every staged entry's (slot sequence, slot
  // index), in entry order, each with priority 0: PriorityWriter::Write's
  // records once the priorities are filled in.
  uint64_t batch_number = 0;
  uint64_t epoch = 0;
  uint64_t incarnation = 0;
  std::vector<protocol::PriorityRecord> records;
  uint64_t dropped = 0;  // entries that did not decode
};

struct BatchAssemblyOptions {
  // False: Start() assembles at once on the caller's thread (no worker).
  bool on_thread = true;
  // Not owned; nullptr: off. An A record for every entry handed over
  // (common/verification_log.h).
  VerificationLog* verification_log = nullptr;
};

class BatchAssembly {
 public:
  // `config`: the session's (its frame_stack says whether entries are frame
  // records).
  BatchAssembly(const protocol::LayoutConfig& config, const BatchAssemblyOptions& options);
  // Waits for a batch being assembled, then joins the worker.
  ~BatchAssembly();
  BatchAssembly(const BatchAssembly&) = delete;
  BatchAssembly& operator=(const BatchAssembly&) = delete;

  // Starts assembling `staged` into `out` (cleared first; its rows keep
  // their shape). REQUIRES: !busy(); `out` and the views of `staged` stay
  // valid until Take() returns.
  void Start(const StagedBatch& staged, AssembledBatch* out);
  // True from Start() until Take().
  bool busy() const { return job_out_ != nullptr; }
  // Waits until the batch Start() was given is assembled, and returns it.
  // REQUIRES: busy().
  AssembledBatch* Take();

  // CPU time spent assembling so far, on whichever thread.
  uint64_t cpu_ns() const { return cpu_ns_.load(std::memory_order_relaxed); }

 private:
  // The work itself, on any thread.
  void Assemble(const StagedBatch& staged, AssembledBatch* out);
  void Run();

  const uint32_t slot_size_;
  const BatchAssemblyOptions options_;
  // Frames stored once; null otherwise. Used by one assembly at a time.
  std::unique_ptr<FrameBatchAssembler> frames_;

  // The caller's side.
  AssembledBatch* job_out_ = nullptr;  // non-null: busy
  std::atomic<uint64_t> cpu_ns_{0};

  // Hand-over between the caller and the worker.
  Mutex mu_;
  CondVar cv_;
  StagedBatch staged_ ABSL_GUARDED_BY(mu_);
  AssembledBatch* pending_ ABSL_GUARDED_BY(mu_) = nullptr;  // to assemble
  bool done_ ABSL_GUARDED_BY(mu_) = false;                  // pending_ assembled
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread worker_;  // last: started once the rest is built
};

}  // namespace dreplay::learner

#endif  // DREPLAY_LEARNER_CLIENT_BATCH_ASSEMBLY_H_
