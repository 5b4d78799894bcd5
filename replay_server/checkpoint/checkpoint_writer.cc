// Copyright dreplay authors.

#include "replay_server/checkpoint/checkpoint_writer.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "glog/logging.h"

namespace dreplay::server {
namespace {

// The writer thread's nice value (Linux: per thread).
constexpr int kWriterNice = 10;

}  // namespace

CheckpointWriter::CheckpointWriter(WriteFn write, uint64_t capacity)
    : write_(std::move(write)), capacity_(capacity), thread_([this] { Loop(); }) {}

CheckpointWriter::~CheckpointWriter() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
    changed_.SignalAll();
  }
  thread_.join();
}

bool CheckpointWriter::busy() const {
  MutexLock lock(&mu_);
  return busy_;
}

void CheckpointWriter::Start(CheckpointCut cut) {
  MutexLock lock(&mu_);
  CHECK(!busy_) << "CheckpointWriter::Start while a write is in progress";
  busy_ = true;
  job_ = std::move(cut);
  changed_.SignalAll();
}

CheckpointCut CheckpointWriter::TakeSpare() {
  MutexLock lock(&mu_);
  CheckpointCut spare = std::move(spare_);
  spare_ = CheckpointCut();
  return spare;
}

bool CheckpointWriter::spare_ready() const {
  MutexLock lock(&mu_);
  return capacity_ == 0 || spare_.values.size() == capacity_;
}

std::optional<CheckpointWriter::Result> CheckpointWriter::TakeResult() {
  MutexLock lock(&mu_);
  std::optional<Result> result = std::move(result_);
  result_.reset();
  return result;
}

void CheckpointWriter::WaitIdle() {
  MutexLock lock(&mu_);
  while (busy_) changed_.Wait(&mu_);
}

void CheckpointWriter::Loop() {
  // Background work: where CPUs are scarce the core thread goes first. A
  // failure (no permission) leaves the thread at the process's priority.
  if (setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), kWriterNice) != 0) {
    VLOG(1) << "checkpoint writer keeps the process's priority: " << std::strerror(errno);
  }
  if (capacity_ > 0) {
    // Touched here, so the core's copy into them takes no page faults.
    CheckpointCut spare;
    spare.values.assign(capacity_, 0.0);
    spare.sequences.assign(capacity_, 0);
    MutexLock lock(&mu_);
    if (spare_.values.empty()) spare_ = std::move(spare);
  }
  while (true) {
    std::optional<CheckpointCut> cut;
    {
      MutexLock lock(&mu_);
      // A job handed over before the stop is still written.
      while (!stop_ && !job_.has_value()) changed_.Wait(&mu_);
      if (!job_.has_value()) return;
      cut = std::move(job_);
      job_.reset();
    }
    Result result = write_(&*cut);
    MutexLock lock(&mu_);
    if (capacity_ > 0 && cut->values.size() == capacity_) {
      spare_.values = std::move(cut->values);  // the next cut's buffers
      spare_.sequences = std::move(cut->sequences);
    }
    result_ = std::move(result);
    busy_ = false;
    changed_.SignalAll();
  }
}

}  // namespace dreplay::server
