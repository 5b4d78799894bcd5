// Copyright dreplay authors.

#include "replay_server/checkpoint_writer.h"

#include <utility>

#include "glog/logging.h"

namespace dreplay::server {

CheckpointWriter::CheckpointWriter(WriteFn write)
    : write_(std::move(write)), thread_([this] { Loop(); }) {}

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
    cut.reset();  // frees the cut's copies before the result is seen
    MutexLock lock(&mu_);
    result_ = std::move(result);
    busy_ = false;
    changed_.SignalAll();
  }
}

}  // namespace dreplay::server
