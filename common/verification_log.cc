// Copyright dreplay authors.

#include "common/verification_log.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dreplay {
namespace {

// The longest record: a letter, four 20-digit fields, separators, newline.
constexpr int kMaxRecord = 128;

}  // namespace

absl::StatusOr<std::unique_ptr<VerificationLog>> VerificationLog::Open(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("verification log: empty path");
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("verification log: cannot open ", path, ": ", strerror(errno)));
  }
  return std::unique_ptr<VerificationLog>(new VerificationLog(fd));
}

VerificationLog::~VerificationLog() { close(fd_); }

void VerificationLog::Write(const char* line, int length) {
  if (length <= 0 || length >= kMaxRecord) {
    failed_writes_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  ssize_t n;
  do {
    n = write(fd_, line, static_cast<size_t>(length));
  } while (n < 0 && errno == EINTR);
  if (n != length) failed_writes_.fetch_add(1, std::memory_order_relaxed);
}

void VerificationLog::Started(uint64_t epoch) {
  char line[kMaxRecord];
  Write(line, snprintf(line, sizeof(line), "S %" PRIu64 "\n", epoch));
}

void VerificationLog::Ingested(uint64_t index, uint64_t sequence, uint64_t checksum) {
  char line[kMaxRecord];
  Write(line, snprintf(line, sizeof(line), "I %" PRIu64 " %" PRIu64 " %016" PRIx64 "\n", index,
                       sequence, checksum));
}

void VerificationLog::HeldAsRecord(uint64_t index, uint64_t sequence, uint64_t checksum) {
  char line[kMaxRecord];
  Write(line, snprintf(line, sizeof(line), "F %" PRIu64 " %" PRIu64 " %016" PRIx64 "\n", index,
                       sequence, checksum));
}

void VerificationLog::Evicted(uint64_t index, uint64_t sequence) {
  char line[kMaxRecord];
  Write(line, snprintf(line, sizeof(line), "E %" PRIu64 " %" PRIu64 "\n", index, sequence));
}

void VerificationLog::Forwarded(uint64_t index, uint64_t sequence) {
  char line[kMaxRecord];
  Write(line, snprintf(line, sizeof(line), "X %" PRIu64 " %" PRIu64 "\n", index, sequence));
}

void VerificationLog::Torn(uint64_t index, uint64_t sequence) {
  char line[kMaxRecord];
  Write(line, snprintf(line, sizeof(line), "T %" PRIu64 " %" PRIu64 "\n", index, sequence));
}

void VerificationLog::CheckpointCut(uint64_t id, uint64_t epoch, uint64_t ingest_cursor) {
  char line[kMaxRecord];
  Write(line, snprintf(line, sizeof(line), "K %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", id, epoch,
                       ingest_cursor));
}

void VerificationLog::SlotAbsent(uint64_t cut_id, uint64_t index, uint64_t sequence) {
  char line[kMaxRecord];
  Write(line, snprintf(line, sizeof(line), "D %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", cut_id, index,
                       sequence));
}

void VerificationLog::CheckpointWritten(uint64_t cut_id) {
  char line[kMaxRecord];
  Write(line, snprintf(line, sizeof(line), "C %" PRIu64 "\n", cut_id));
}

void VerificationLog::CheckpointRestored(uint64_t epoch, uint64_t ingest_cursor) {
  char line[kMaxRecord];
  Write(line, snprintf(line, sizeof(line), "B %" PRIu64 " %" PRIu64 "\n", epoch, ingest_cursor));
}

void VerificationLog::Restored(uint64_t index, uint64_t sequence, uint64_t checksum, bool valid) {
  char line[kMaxRecord];
  Write(line, snprintf(line, sizeof(line), "R %" PRIu64 " %" PRIu64 " %016" PRIx64 " %d\n", index,
                       sequence, checksum, valid ? 1 : 0));
}

void VerificationLog::Accepted(uint64_t index, uint64_t sequence, uint64_t checksum, bool ok) {
  char line[kMaxRecord];
  Write(line, snprintf(line, sizeof(line), "A %" PRIu64 " %" PRIu64 " %016" PRIx64 " %d\n", index,
                       sequence, checksum, ok ? 1 : 0));
}

void VerificationLog::Committed(uint64_t epoch, uint64_t index, uint64_t sequence,
                                uint64_t checksum) {
  char line[kMaxRecord];
  Write(line, snprintf(line, sizeof(line), "P %" PRIu64 " %" PRIu64 " %" PRIu64 " %016" PRIx64 "\n",
                       epoch, index, sequence, checksum));
}

}  // namespace dreplay
