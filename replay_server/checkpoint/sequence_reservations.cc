// Copyright dreplay authors.

#include "replay_server/checkpoint/sequence_reservations.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "replay_server/checkpoint/durable_file.h"

namespace dreplay::server {
namespace {

constexpr char kMagicLine[] = "dreplay sequence reservations v1";

uint64_t Fnv1a64(absl::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (const char c : bytes) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

absl::Status Damaged(const std::string& why) {
  return absl::DataLossError(absl::StrCat("sequence reservations ", why));
}

}  // namespace

std::string EncodeSequenceReservations(absl::Span<const uint64_t> marks) {
  std::string text = absl::StrCat(kMagicLine, "\nleases ", marks.size(), "\n");
  for (const uint64_t mark : marks) absl::StrAppend(&text, mark, "\n");
  absl::StrAppend(&text, "checksum ", absl::Hex(Fnv1a64(text)), "\n");
  return text;
}

absl::StatusOr<std::vector<uint64_t>> DecodeSequenceReservations(const std::string& text) {
  const size_t checksum_at = text.rfind("checksum ");
  if (checksum_at == std::string::npos || (checksum_at > 0 && text[checksum_at - 1] != '\n')) {
    return Damaged("has no checksum line");
  }
  absl::string_view checksum_line = absl::string_view(text).substr(checksum_at + 9);
  if (checksum_line.empty() || checksum_line.back() != '\n') {
    return Damaged("checksum line is cut short");
  }
  checksum_line.remove_suffix(1);
  uint64_t checksum = 0;
  if (!absl::SimpleHexAtoi(checksum_line, &checksum)) {
    return Damaged(absl::StrCat("checksum '", checksum_line, "' is not hex"));
  }
  const absl::string_view body = absl::string_view(text).substr(0, checksum_at);
  if (Fnv1a64(body) != checksum) return Damaged("checksum does not match the contents");
  std::vector<absl::string_view> lines = absl::StrSplit(body, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  if (lines.size() < 2 || lines[0] != kMagicLine) {
    return Damaged(absl::StrCat("file does not start with '", kMagicLine, "'"));
  }
  uint64_t leases = 0;
  if (!absl::ConsumePrefix(&lines[1], "leases ") || !absl::SimpleAtoi(lines[1], &leases) ||
      leases != lines.size() - 2) {
    return Damaged("lease count line does not match its marks");
  }
  std::vector<uint64_t> marks(leases);
  for (uint64_t l = 0; l < leases; ++l) {
    if (!absl::SimpleAtoi(lines[l + 2], &marks[l])) {
      return Damaged(absl::StrCat("mark of lease ", l, " is not a number"));
    }
  }
  return marks;
}

absl::Status SequenceReservationsOptions::Validate() const {
  if (path.empty()) return absl::InvalidArgumentError("SequenceReservationsOptions.path is empty");
  if (leases == 0) return absl::InvalidArgumentError("SequenceReservationsOptions.leases=0");
  if (lease_slots == 0) {
    return absl::InvalidArgumentError("SequenceReservationsOptions.lease_slots=0");
  }
  if (step_leases == 0 || step_leases > (uint64_t{1} << 20)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SequenceReservationsOptions.step_leases=", step_leases, " must be in [1, 2^20]"));
  }
  return absl::OkStatus();
}

SequenceReservations::SequenceReservations(const SequenceReservationsOptions& options)
    : options_(options),
      floors_(options.leases, 0),
      marks_(new std::atomic<uint64_t>[options.leases]),
      asked_(options.leases, 0),
      stalled_(options.leases, false),
      wanted_(options.leases, 0) {
  for (uint32_t l = 0; l < options.leases; ++l) marks_[l].store(0, std::memory_order_relaxed);
}

SequenceReservations::~SequenceReservations() { StopSyncThread(); }

std::vector<uint64_t> SequenceReservations::Marks() const {
  std::vector<uint64_t> marks(options_.leases);
  for (uint32_t l = 0; l < options_.leases; ++l) marks[l] = reserved(l);
  return marks;
}

absl::StatusOr<std::unique_ptr<SequenceReservations>> SequenceReservations::Open(
    const SequenceReservationsOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<SequenceReservations> table(new SequenceReservations(options));
  const absl::StatusOr<std::string> text =
      ReadWholeFile(OrDefault(options.file_system), options.path);
  if (absl::IsNotFound(text.status())) return table;
  if (!text.ok()) return text.status();
  absl::StatusOr<std::vector<uint64_t>> marks = DecodeSequenceReservations(*text);
  if (!marks.ok()) {
    return absl::DataLossError(absl::StrCat(
        options.path, ": ", marks.status().message(),
        ". Without it a restart could hand out sequences the last server already published; "
        "move it away only if every actor's lease should start over"));
  }
  if (marks->size() != options.leases) {
    return absl::FailedPreconditionError(absl::StrCat(options.path, " holds marks for ",
                                                      marks->size(), " leases, the layout has ",
                                                      options.leases));
  }
  table->loaded_ = true;
  table->floors_ = *marks;
  for (uint32_t l = 0; l < options.leases; ++l) {
    table->marks_[l].store((*marks)[l], std::memory_order_relaxed);
  }
  return table;
}

absl::Status SequenceReservations::ReserveAll(absl::Span<const uint64_t> needed) {
  std::vector<uint64_t> next = Marks();
  bool grew = false;
  for (uint32_t l = 0; l < options_.leases; ++l) {
    if (next[l] >= needed[l]) continue;
    next[l] = needed[l] + options_.step_leases * options_.lease_slots;
    grew = true;
  }
  if (!grew) return absl::OkStatus();
  return Persist(next);
}

absl::Status SequenceReservations::Reserve(uint32_t l, uint64_t needed) {
  if (reserved(l) >= needed) return absl::OkStatus();
  std::vector<uint64_t> next = Marks();
  next[l] = needed + options_.step_leases * options_.lease_slots;
  return Persist(next);
}

absl::Status SequenceReservations::WriteExact(absl::Span<const uint64_t> cursors) {
  StopSyncThread();
  return Persist(std::vector<uint64_t>(cursors.begin(), cursors.end()));
}

absl::Status SequenceReservations::Persist(const std::vector<uint64_t>& marks) {
  MutexLock lock(&file_mu_);
  RETURN_IF_ERROR(
      ReplaceFileDurably(options_.path, EncodeSequenceReservations(marks), options_.file_system));
  for (uint32_t l = 0; l < options_.leases; ++l) {
    marks_[l].store(marks[l], std::memory_order_release);
  }
  syncs_.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

uint64_t SequenceReservations::Publishable(uint32_t l, uint64_t cursor) {
  const uint64_t lease_slots = options_.lease_slots;
  const uint64_t step = options_.step_leases * lease_slots;
  const uint64_t needed = cursor + lease_slots;
  if (std::max(asked_[l], reserved(l)) < needed + step / 2) {
    // Half the headroom is gone: the next mark, before it is needed.
    asked_[l] = needed + step;
    MutexLock lock(&mu_);
    wanted_[l] = std::max(wanted_[l], asked_[l]);
    if (!thread_.joinable() && !stop_) thread_ = std::thread([this] { SyncLoop(); });
    changed_.SignalAll();
  }
  const uint64_t mark = reserved(l);
  const uint64_t published = std::min(cursor, mark >= lease_slots ? mark - lease_slots : 0);
  const bool stalled = published < cursor;
  if (stalled && !stalled_[l]) stalls_.fetch_add(1, std::memory_order_relaxed);
  stalled_[l] = stalled;
  return published;
}

void SequenceReservations::SyncLoop() {
  while (true) {
    std::vector<uint64_t> next;
    {
      MutexLock lock(&mu_);
      while (true) {
        if (stop_) return;
        next = Marks();
        bool grows = false;
        for (uint32_t l = 0; l < options_.leases; ++l) {
          if (wanted_[l] > next[l]) {
            next[l] = wanted_[l];
            grows = true;
          }
        }
        if (grows) break;
        changed_.Wait(&mu_);
      }
    }
    const absl::Time start = absl::Now();
    const absl::Status status = Persist(next);
    const int64_t ns = absl::ToInt64Nanoseconds(absl::Now() - start);
    if (ns > max_background_sync_ns_.load(std::memory_order_relaxed)) {
      max_background_sync_ns_.store(ns, std::memory_order_relaxed);
    }
    if (status.ok()) {
      sync_generation_.fetch_add(1, std::memory_order_acq_rel);
      continue;
    }
    MutexLock lock(&mu_);
    if (failures_++ % 1000 == 0) {
      LOG(ERROR) << "cannot reserve sequences (" << status
                 << "); leases wait at their reserved marks";
    }
    // Retried at the next request, or after a short wait.
    changed_.WaitWithTimeout(&mu_, absl::Milliseconds(100));
  }
}

void SequenceReservations::StopSyncThread() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
    changed_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
}

}  // namespace dreplay::server
