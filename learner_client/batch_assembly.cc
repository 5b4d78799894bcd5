// Copyright dreplay authors.

#include "learner_client/batch_assembly.h"

#include <utility>

#include "common/thread_cpu.h"
#include "glog/logging.h"
#include "protocol/slots.h"

namespace dreplay::learner {

BatchAssembly::BatchAssembly(const protocol::LayoutConfig& config,
                             const BatchAssemblyOptions& options)
    : slot_size_(config.slot_size), options_(options) {
  if (config.frame_stack > 0) frames_ = std::make_unique<FrameBatchAssembler>(config);
  if (options_.on_thread) worker_ = std::thread([this] { Run(); });
}

BatchAssembly::~BatchAssembly() {
  if (!worker_.joinable()) return;
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  worker_.join();
}

void BatchAssembly::Start(const StagedBatch& staged, AssembledBatch* out) {
  CHECK(!busy()) << "a batch is being assembled: Take() it first";
  job_out_ = out;
  if (!options_.on_thread) {
    Assemble(staged, out);
    return;
  }
  {
    MutexLock lock(&mu_);
    staged_ = staged;
    pending_ = out;
    done_ = false;
  }
  cv_.SignalAll();
}

AssembledBatch* BatchAssembly::Take() {
  CHECK(busy()) << "Take() without Start()";
  AssembledBatch* out = job_out_;
  job_out_ = nullptr;
  if (!options_.on_thread) return out;
  MutexLock lock(&mu_);
  while (!done_) cv_.Wait(&mu_);
  pending_ = nullptr;
  done_ = false;
  staged_ = StagedBatch();
  return out;
}

void BatchAssembly::Run() {
  MutexLock lock(&mu_);
  while (true) {
    while (!stop_ && (pending_ == nullptr || done_)) cv_.Wait(&mu_);
    if (stop_) return;
    const StagedBatch staged = staged_;
    AssembledBatch* out = pending_;
    mu_.Unlock();
    Assemble(staged, out);
    mu_.Lock();
    done_ = true;
    cv_.SignalAll();
  }
}

void BatchAssembly::Assemble(const StagedBatch& staged, AssembledBatch* out) {
  const uint64_t cpu_begin = ThreadCpuNanos();
  out->rows.Clear();
  out->weights.clear();
  out->priority_alpha.clear();
  out->origins.clear();
  out->kept_entries.clear();
  out->records.clear();
  out->dropped = 0;
  out->batch_number = staged.batch_number();
  out->epoch = staged.epoch();
  out->incarnation = staged.incarnation();
  out->beta = staged.header().beta;
  if (frames_ != nullptr) frames_->Index(staged);
  for (uint32_t i = 0; i < staged.size(); ++i) {
    const protocol::BatchEntry& entry = staged.entry(i);
    out->records.push_back(protocol::PriorityRecord{entry.slot_sequence, entry.slot_index, 0.0f});
    absl::Status s;
    if (frames_ != nullptr) {
      s = frames_->Add(staged, i, &out->rows);  // the stacks, from the batch's records
    } else {
      absl::StatusOr<absl::Span<const uint8_t>> encoded =
          rl::EncodedTransitionPrefix(staged.payload(i));
      s = encoded.ok() ? out->rows.AddEncoded(*encoded) : encoded.status();
    }
    if (!s.ok()) {
      ++out->dropped;
      LOG_EVERY_N(WARNING, 1000) << "batch " << staged.batch_number() << " entry " << i
                                 << " does not decode, dropped: " << s.message();
      continue;
    }
    out->kept_entries.push_back(i);
    out->weights.push_back(staged.weight(i));
    out->priority_alpha.push_back(staged.priority_alpha(i));
    out->origins.push_back(
        {staged.insert_time_ns(i), staged.arrived(i), staged.slot_header(i).params_version});
    if (options_.verification_log != nullptr) {
      const bool ok = protocol::VerifySlot(staged.slot(i), slot_size_, entry.slot_sequence) ==
                      protocol::SlotCheck::kOk;
      options_.verification_log->Accepted(protocol::EntryIndex(entry), entry.slot_sequence,
                                          staged.slot_header(i).checksum, ok);
    }
  }
  cpu_ns_.fetch_add(ThreadCpuNanos() - cpu_begin, std::memory_order_relaxed);
}

}  // namespace dreplay::learner
