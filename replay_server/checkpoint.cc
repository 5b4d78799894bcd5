// Copyright dreplay authors.

// XXH3_INITSTATE needs the state's definition (the static part).
#define XXH_STATIC_LINKING_ONLY
#include "replay_server/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/shared_words.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "xxhash.h"

namespace dreplay::server {
namespace {

// Sections are streamed through a buffer of this size.
constexpr size_t kChunkBytes = size_t{1} << 20;
static_assert(kChunkBytes % sizeof(uint64_t) == 0, "chunks keep word alignment");

absl::Status ErrnoError(const std::string& what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

// Closes a descriptor on scope exit unless released.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int Release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

// XXH3 streaming state on the heap (its size is not part of the stable API).
class Hasher {
 public:
  Hasher() : state_(XXH3_createState()) {
    CHECK(state_ != nullptr) << "out of memory for an XXH3 state";
    // A seeded reset of an uninitialized state may keep a stale secret.
    XXH3_INITSTATE(state_);
    XXH3_64bits_reset_withSeed(state_, protocol::kChecksumSeed);
  }
  ~Hasher() { XXH3_freeState(state_); }
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;
  void Update(const void* p, size_t n) { XXH3_64bits_update(state_, p, n); }
  uint64_t Digest() const { return XXH3_64bits_digest(state_); }

 private:
  XXH3_state_t* state_;
};

absl::Status WriteAll(int fd, const void* data, size_t n, const std::string& path) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("write", path);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

absl::Status ReadAll(int fd, void* data, size_t n, const std::string& path) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    const ssize_t r = read(fd, p, n);
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("read", path);
    }
    if (r == 0) return absl::DataLossError(absl::StrCat("checkpoint ", path, " is truncated"));
    p += r;
    n -= static_cast<size_t>(r);
  }
  return absl::OkStatus();
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

CheckpointHeader MakeHeader(const protocol::LayoutConfig& config,
                            const replay::ReplayMemory& memory, const CheckpointState& state) {
  CheckpointHeader h{};
  h.magic = kCheckpointMagic;
  h.format_version = kCheckpointVersion;
  h.header_bytes = sizeof(CheckpointHeader);
  h.config = config;
  h.alpha = memory.options().alpha;
  h.priority_epsilon = memory.options().priority_epsilon;
  h.sampling_mode = static_cast<uint32_t>(memory.options().mode);
  h.epoch = state.epoch;
  h.incarnation = state.incarnation;
  h.journal_end = state.journal_end;
  h.ingest_cursor = state.ingest_cursor;
  std::memcpy(h.counters, &state.counters, sizeof(h.counters));
  h.slot_bytes = protocol::SlotRingBytes(config);
  h.commit_bytes = protocol::CommitWordsBytes(config);
  h.value_bytes = config.capacity * sizeof(double);
  h.sequence_bytes = config.capacity * sizeof(uint64_t);
  h.lease_cursor_bytes = uint64_t{config.leases} * sizeof(uint64_t);
  return h;
}

// Writes everything but the fsyncs and the rename.
absl::Status WriteContents(int fd, const std::string& path, const ReplayRegions& regions,
                           const replay::ReplayMemory& memory, const CheckpointState& state) {
  const protocol::LayoutConfig& config = regions.config();
  Hasher hasher;
  std::vector<uint8_t> chunk(kChunkBytes);
  auto emit = [&](const void* p, size_t n) -> absl::Status {
    hasher.Update(p, n);
    return WriteAll(fd, p, n, path);
  };
  const CheckpointHeader header = MakeHeader(config, memory, state);
  RETURN_IF_ERROR(emit(&header, sizeof(header)));
  // Shared regions: copy out with atomic loads, then hash and write the copy.
  for (const auto& [base, bytes] :
       {std::pair<const uint8_t*, uint64_t>{regions.slots(), header.slot_bytes},
        {reinterpret_cast<const uint8_t*>(regions.commits()), header.commit_bytes}}) {
    for (uint64_t offset = 0; offset < bytes; offset += kChunkBytes) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunkBytes, bytes - offset));
      CopyFromShared(chunk.data(), base + offset, n);
      RETURN_IF_ERROR(emit(chunk.data(), n));
    }
  }
  constexpr uint64_t kPerChunk = kChunkBytes / sizeof(uint64_t);
  for (int section = 0; section < 2; ++section) {
    for (uint64_t first = 0; first < config.capacity; first += kPerChunk) {
      const uint64_t count = std::min(kPerChunk, config.capacity - first);
      for (uint64_t k = 0; k < count; ++k) {
        if (section == 0) {
          const double v = memory.stored_priority(first + k);
          std::memcpy(chunk.data() + k * 8, &v, 8);
        } else {
          const uint64_t s = memory.sequence(first + k);
          std::memcpy(chunk.data() + k * 8, &s, 8);
        }
      }
      RETURN_IF_ERROR(emit(chunk.data(), count * 8));
    }
  }
  if (state.lease_cursors.size() != config.leases) {
    return absl::InternalError(absl::StrCat("checkpoint state has ", state.lease_cursors.size(),
                                            " lease cursors for ", config.leases, " leases"));
  }
  RETURN_IF_ERROR(emit(state.lease_cursors.data(), header.lease_cursor_bytes));
  const uint64_t trailer = hasher.Digest();
  return WriteAll(fd, &trailer, sizeof(trailer), path);
}

absl::Status CheckHeader(const CheckpointHeader& h, const std::string& path,
                         const protocol::LayoutConfig& config, const replay::ReplayMemory& memory) {
  if (h.magic != kCheckpointMagic) {
    return absl::DataLossError(absl::StrCat(path, " is not a dreplay checkpoint (bad magic)"));
  }
  if (h.format_version != kCheckpointVersion || h.header_bytes != sizeof(h)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", path, " has format version ", h.format_version, " (header ", h.header_bytes,
        " bytes); this build reads version ", kCheckpointVersion, " only"));
  }
  if (h.config != config) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", path, " was written with a different layout (",
                     h.config.FirstDifference(config), " [checkpoint vs server])"));
  }
  const replay::ReplayMemoryOptions& o = memory.options();
  if (h.alpha != o.alpha || h.priority_epsilon != o.priority_epsilon ||
      h.sampling_mode != static_cast<uint32_t>(o.mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", path, " stores priorities for alpha=", h.alpha, " epsilon=",
        h.priority_epsilon, " mode=", h.sampling_mode, " but the server has alpha=", o.alpha,
        " epsilon=", o.priority_epsilon, " mode=", static_cast<uint32_t>(o.mode)));
  }
  if (h.slot_bytes != protocol::SlotRingBytes(config) ||
      h.commit_bytes != protocol::CommitWordsBytes(config) ||
      h.value_bytes != config.capacity * sizeof(double) ||
      h.sequence_bytes != config.capacity * sizeof(uint64_t) ||
      h.lease_cursor_bytes != uint64_t{config.leases} * sizeof(uint64_t)) {
    return absl::DataLossError(
        absl::StrCat("checkpoint ", path, " has section sizes that do not match its config"));
  }
  return absl::OkStatus();
}

// Actors keep writing while the ring is streamed: the file may hold commit
// words whose slots were caught mid-write. In each lease, the verified
// prefix from the saved cursor stays; every commit word at or after the first
// sequence that fails is cleared, so the handshake resumes the reconnecting
// actor there (protocol/README.md) and ingest never takes an old word for a
// new commit.
void ClearUnverifiedCommits(const std::vector<uint64_t>& cursors, ReplayRegions* regions) {
  const protocol::LayoutConfig& c = regions->config();
  const uint64_t lease_slots = protocol::LeaseSlots(c);
  uint64_t cleared = 0;
  for (uint32_t l = 0; l < c.leases; ++l) {
    uint64_t q = cursors[l];
    for (; q < cursors[l] + lease_slots; ++q) {
      const uint64_t i = protocol::LeaseSlotIndex(c, l, q);
      if (regions->commits()[i] != protocol::CommitValue(q) ||
          protocol::VerifySlot(regions->slot(i), c.slot_size, q) != protocol::SlotCheck::kOk) {
        break;
      }
    }
    for (uint64_t k = 0; k < lease_slots; ++k) {
      uint64_t& word = regions->commits()[protocol::LeaseBase(c, l) + k];
      if (word >= protocol::CommitValue(q)) {
        word = protocol::kNeverCommitted;
        ++cleared;
      }
    }
  }
  if (cleared > 0) {
    LOG(INFO) << "restore: cleared " << cleared
              << " commit words after the leases' verified prefixes";
  }
}

absl::Status ReadContents(int fd, const std::string& path, ReplayRegions* regions,
                          replay::ReplayMemory* memory, CheckpointState* state) {
  const protocol::LayoutConfig& config = regions->config();
  struct stat st;
  if (fstat(fd, &st) != 0) return ErrnoError("stat", path);
  CheckpointHeader header{};
  if (static_cast<uint64_t>(st.st_size) < sizeof(header)) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, " is truncated"));
  }
  RETURN_IF_ERROR(ReadAll(fd, &header, sizeof(header), path));
  const size_t header_bytes = sizeof(header);
  RETURN_IF_ERROR(CheckHeader(header, path, config, *memory));
  const uint64_t expected_size = header_bytes + header.slot_bytes + header.commit_bytes +
                                 header.value_bytes + header.sequence_bytes +
                                 header.lease_cursor_bytes + sizeof(uint64_t);
  if (static_cast<uint64_t>(st.st_size) != expected_size) {
    return absl::DataLossError(
        absl::StrCat("checkpoint ", path, " has ", st.st_size, " bytes, expected ", expected_size));
  }
  Hasher hasher;
  hasher.Update(&header, header_bytes);
  // No peer uses the regions yet: read straight into them.
  auto load = [&](void* destination, uint64_t bytes) -> absl::Status {
    auto* p = static_cast<uint8_t*>(destination);
    for (uint64_t offset = 0; offset < bytes; offset += kChunkBytes) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunkBytes, bytes - offset));
      RETURN_IF_ERROR(ReadAll(fd, p + offset, n, path));
      hasher.Update(p + offset, n);
    }
    return absl::OkStatus();
  };
  std::vector<double> values(config.capacity);
  std::vector<uint64_t> sequences(config.capacity);
  RETURN_IF_ERROR(load(regions->slots(), header.slot_bytes));
  RETURN_IF_ERROR(load(regions->commits(), header.commit_bytes));
  RETURN_IF_ERROR(load(values.data(), header.value_bytes));
  RETURN_IF_ERROR(load(sequences.data(), header.sequence_bytes));
  std::vector<uint64_t> lease_cursors(config.leases);
  RETURN_IF_ERROR(load(lease_cursors.data(), header.lease_cursor_bytes));
  uint64_t trailer;
  RETURN_IF_ERROR(ReadAll(fd, &trailer, sizeof(trailer), path));
  if (trailer != hasher.Digest()) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, " fails its checksum"));
  }
  if (absl::Status s = memory->Restore(values, sequences); !s.ok()) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, ": ", s.message()));
  }
  state->epoch = header.epoch;
  state->incarnation = header.incarnation;  // 0 in older files
  state->journal_end = header.journal_end;
  state->ingest_cursor = header.ingest_cursor;
  state->lease_cursors = lease_cursors;
  std::memcpy(&state->counters, header.counters, sizeof(header.counters));
  ClearUnverifiedCommits(lease_cursors, regions);
  // Slots caught mid-write when the checkpoint was taken fail here.
  for (uint64_t i = 0; i < config.capacity; ++i) {
    const uint64_t sequence = memory->sequence(i);
    if (sequence == replay::ReplayMemory::kNoSequence) continue;
    if (regions->commits()[i] != protocol::CommitValue(sequence) ||
        protocol::VerifySlot(regions->slot(i), config.slot_size, sequence) !=
            protocol::SlotCheck::kOk) {
      memory->Remove(i);
      ++state->counters.restore_dropped;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteCheckpoint(const std::string& path, const ReplayRegions& regions,
                             const replay::ReplayMemory& memory, const CheckpointState& state) {
  if (memory.capacity() != regions.config().capacity) {
    return absl::InvalidArgumentError(absl::StrCat("memory capacity ", memory.capacity(),
                                                   " differs from the regions' ",
                                                   regions.config().capacity));
  }
  const std::string temp = path + ".tmp";
  Fd fd(open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) return ErrnoError("open", temp);
  absl::Status status = WriteContents(fd.get(), temp, regions, memory, state);
  if (status.ok() && fsync(fd.get()) != 0) status = ErrnoError("fsync", temp);
  if (status.ok() && close(fd.Release()) != 0) status = ErrnoError("close", temp);
  if (status.ok() && rename(temp.c_str(), path.c_str()) != 0) {
    status = ErrnoError("rename to " + path, temp);
  }
  if (!status.ok()) {
    unlink(temp.c_str());
    return status;
  }
  const std::string dir = DirectoryOf(path);
  Fd dir_fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd.get() < 0) return ErrnoError("open directory", dir);
  if (fsync(dir_fd.get()) != 0) return ErrnoError("fsync directory", dir);
  return absl::OkStatus();
}

absl::Status ReadCheckpoint(const std::string& path, ReplayRegions* regions,
                            replay::ReplayMemory* memory, CheckpointState* state) {
  if (memory->capacity() != regions->config().capacity) {
    return absl::InvalidArgumentError(absl::StrCat("memory capacity ", memory->capacity(),
                                                   " differs from the regions' ",
                                                   regions->config().capacity));
  }
  Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("no checkpoint at ", path));
    return ErrnoError("open", path);
  }
  absl::Status status = ReadContents(fd.get(), path, regions, memory, state);
  if (!status.ok()) {
    std::memset(regions->slots(), 0, protocol::SlotRingBytes(regions->config()));
    std::memset(regions->commits(), 0, protocol::CommitWordsBytes(regions->config()));
    memory->Clear();
  }
  return status;
}

}  // namespace dreplay::server
