// Copyright dreplay authors.

#include "replay_server/checkpoint/checkpoint.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/checksum.h"
#include "common/shared_words.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "replay_server/checkpoint/durable_file.h"

namespace dreplay::server {
namespace {

// Sections are streamed through a buffer of this size.
constexpr size_t kChunkBytes = size_t{1} << 20;
static_assert(kChunkBytes % sizeof(uint64_t) == 0, "chunks keep word alignment");

// The checkpoint's running XXH3 (checksum.h), seeded as every checksum.
class Hasher : public Xxh3Stream {
 public:
  Hasher() : Xxh3Stream(protocol::kChecksumSeed) {}
};

absl::Status WriteAll(WritableFile* file, const void* data, size_t n) {
  return file->Append(absl::string_view(static_cast<const char*>(data), n));
}

absl::Status ReadAll(ReadableFile* file, void* data, size_t n, const std::string& path) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    ASSIGN_OR_RETURN(const size_t r, file->Read(p, n));
    if (r == 0) return absl::DataLossError(absl::StrCat("checkpoint ", path, " is truncated"));
    p += r;
    n -= r;
  }
  return absl::OkStatus();
}

uint64_t ParamsSectionBytes(const protocol::LayoutConfig& c) {
  return sizeof(protocol::ParamsHeader) + protocol::ParamsHalfStride(c);
}

CheckpointHeader MakeHeader(const protocol::LayoutConfig& config,
                            const replay::ReplayMemoryOptions& memory,
                            const CheckpointState& state) {
  CheckpointHeader h{};
  h.magic = kCheckpointMagic;
  h.format_version = kCheckpointVersion;
  h.header_bytes = sizeof(CheckpointHeader);
  h.config = config;
  h.alpha = memory.alpha;
  h.priority_epsilon = memory.priority_epsilon;
  h.sampling_mode = static_cast<uint32_t>(memory.mode);
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
  h.lease_holder_bytes = uint64_t{config.leases} * sizeof(CheckpointLeaseHolder);
  h.params_bytes = ParamsSectionBytes(config);
  return h;
}

// Streams the slot ring, keeping each slot only when it verifies as the
// cut's entry or as its lease's pending (committed, not ingested) sequence
// at that position; fills `commits` (the file's commit words) and empties
// the cut's entries found overwritten.
class SlotStreamer {
 public:
  SlotStreamer(const ReplayRegions& regions, CheckpointCut* cut, CheckpointWriteStats* stats)
      : regions_(regions),
        c_(regions.config()),
        lease_slots_(protocol::LeaseSlots(c_)),
        cut_(cut),
        stats_(stats),
        commits_(c_.capacity, protocol::kNeverCommitted) {}

  // Copies slot `i` into `out` (slot_size bytes) as the file records it.
  void Copy(uint64_t i, uint8_t* out) {
    const uint64_t commit = LoadAcquire(&regions_.commits()[i]);
    CopyFromShared(out, regions_.slot(i), c_.slot_size);
    uint64_t& entry = cut_->sequences[i];
    if (entry != replay::ReplayMemory::kNoSequence) {
      if (Holds(commit, out, entry)) {
        commits_[i] = protocol::CommitValue(entry);
        ++stats_->slots_kept;
        return;
      }
      if (cut_->log != nullptr) cut_->log->SlotAbsent(cut_->cut_id, i, entry);
      entry = replay::ReplayMemory::kNoSequence;
      cut_->values[i] = 0;
      ++stats_->slots_absent;
    }
    const auto lease = static_cast<uint32_t>(i / lease_slots_);
    if (lease < c_.leases) {
      const uint64_t cursor = cut_->state.lease_cursors[lease];
      const uint64_t position = i - protocol::LeaseBase(c_, lease);
      const uint64_t pending =
          cursor + (position + lease_slots_ - cursor % lease_slots_) % lease_slots_;
      if (Holds(commit, out, pending)) {
        commits_[i] = protocol::CommitValue(pending);
        ++stats_->pending_kept;
        return;
      }
      // Frames stored once: the record of the lease's last lap there, which
      // transitions kept may need for their stacks (a frame-only record is
      // not in the memory, and a record's own transition may have left).
      if (c_.frame_stack > 0 && pending >= lease_slots_ &&
          Holds(commit, out, pending - lease_slots_)) {
        commits_[i] = protocol::CommitValue(pending - lease_slots_);
        ++stats_->records_kept;
        return;
      }
    }
    std::memset(out, 0, c_.slot_size);
  }

  const std::vector<uint64_t>& commits() const { return commits_; }

 private:
  bool Holds(uint64_t commit, const uint8_t* copy, uint64_t sequence) const {
    return commit == protocol::CommitValue(sequence) &&
           protocol::VerifySlot(copy, c_.slot_size, sequence) == protocol::SlotCheck::kOk;
  }

  const ReplayRegions& regions_;
  const protocol::LayoutConfig& c_;
  const uint64_t lease_slots_;
  CheckpointCut* const cut_;
  CheckpointWriteStats* const stats_;
  std::vector<uint64_t> commits_;
};

// The params region's header and published half, when a copy catches them
// whole (protocol/params.h's reader protocol); all zero when nothing was
// published or no copy was whole. Returns the version copied (0: none).
uint64_t CopyParams(const ReplayRegions& regions, std::vector<uint8_t>* out) {
  const protocol::LayoutConfig& c = regions.config();
  out->assign(ParamsSectionBytes(c), 0);
  const uint8_t* region = regions.params();
  constexpr int kAttempts = 100;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    protocol::ParamsHeader header;
    CopyFromShared(&header, region, sizeof(header));
    if (header.version == 0) break;
    const uint32_t half = protocol::ParamsHalfOf(header.version);
    uint8_t* image = out->data() + sizeof(header);
    CopyFromShared(image, region + protocol::ParamsHalfOffset(c, half),
                   protocol::ParamsHalfStride(c));
    if (protocol::CheckParamsHalf(c, image, header.version).ok()) {
      header.active_half = half;
      std::memcpy(out->data(), &header, sizeof(header));
      return header.version;
    }
  }
  out->assign(out->size(), 0);
  return 0;
}

// Writes everything but the fsyncs and the rename.
absl::Status WriteContents(WritableFile* file, const ReplayRegions& regions,
                           const replay::ReplayMemoryOptions& memory, CheckpointCut* cut,
                           CheckpointWriteStats* stats) {
  const protocol::LayoutConfig& config = regions.config();
  // The header's absent count is known only at the end: the header is
  // written last, at offset 0, and the trailer is the hash of the header
  // followed by the hash of the sections.
  CheckpointHeader header = MakeHeader(config, memory, cut->state);
  const CheckpointHeader placeholder{};
  RETURN_IF_ERROR(WriteAll(file, &placeholder, sizeof(placeholder)));
  Hasher body;
  auto emit_body = [&](const void* p, size_t n) -> absl::Status {
    body.Update(p, n);
    return WriteAll(file, p, n);
  };
  SlotStreamer streamer(regions, cut, stats);
  const uint64_t per_chunk = std::max<uint64_t>(1, kChunkBytes / config.slot_size);
  std::vector<uint8_t> chunk(per_chunk * config.slot_size);
  for (uint64_t first = 0; first < config.capacity; first += per_chunk) {
    const uint64_t count = std::min(per_chunk, config.capacity - first);
    for (uint64_t k = 0; k < count; ++k) {
      streamer.Copy(first + k, chunk.data() + k * config.slot_size);
    }
    RETURN_IF_ERROR(emit_body(chunk.data(), count * config.slot_size));
  }
  RETURN_IF_ERROR(emit_body(streamer.commits().data(), header.commit_bytes));
  RETURN_IF_ERROR(emit_body(cut->values.data(), header.value_bytes));
  RETURN_IF_ERROR(emit_body(cut->sequences.data(), header.sequence_bytes));
  RETURN_IF_ERROR(emit_body(cut->state.lease_cursors.data(), header.lease_cursor_bytes));
  RETURN_IF_ERROR(emit_body(cut->state.lease_holders.data(), header.lease_holder_bytes));
  std::vector<uint8_t> params;
  stats->params_version = CopyParams(regions, &params);
  RETURN_IF_ERROR(emit_body(params.data(), params.size()));
  header.slots_absent = stats->slots_absent;
  Hasher hasher;
  hasher.Update(&header, sizeof(header));
  const uint64_t body_digest = body.Digest();
  hasher.Update(&body_digest, sizeof(body_digest));
  const uint64_t trailer = hasher.Digest();
  RETURN_IF_ERROR(WriteAll(file, &trailer, sizeof(trailer)));
  return file->WriteAt(0,
                       absl::string_view(reinterpret_cast<const char*>(&header), sizeof(header)));
}

absl::Status CheckHeader(const CheckpointHeader& h, const std::string& path,
                         const protocol::LayoutConfig& config, const replay::ReplayMemory& memory) {
  if (h.magic != kCheckpointMagic) {
    return absl::DataLossError(absl::StrCat(path, " is not a dreplay checkpoint (bad magic)"));
  }
  if (h.format_version != kCheckpointVersion || h.header_bytes != sizeof(h)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", path, " has format version ", h.format_version, " (header ", h.header_bytes,
        " bytes); this build reads version ", kCheckpointVersion,
        " only (move the file away to start empty, or restore it with the build that wrote it)"));
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
      h.lease_cursor_bytes != uint64_t{config.leases} * sizeof(uint64_t) ||
      h.lease_holder_bytes != uint64_t{config.leases} * sizeof(CheckpointLeaseHolder) ||
      h.params_bytes != ParamsSectionBytes(config)) {
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

absl::Status Forged(const std::string& path, const std::string& why) {
  return absl::DataLossError(absl::StrCat("checkpoint ", path, " is inconsistent: ", why,
                                          " (a damaged or forged file; move it away to fall "
                                          "back to an older one or to start empty)"));
}

// What the checksum cannot vouch for (a file written with a valid checksum by
// anyone): every stored sequence sits at its lease's position and below its
// lease's cursor, the cursors add up to the ingest cursor, and each lease's
// holder is a state the lease table can take, with one lease per actor.
absl::Status ValidateLeases(const std::string& path, const protocol::LayoutConfig& c,
                            const CheckpointHeader& header, const std::vector<uint64_t>& sequences,
                            const std::vector<uint64_t>& cursors,
                            const std::vector<CheckpointLeaseHolder>& holders) {
  const uint64_t lease_slots = protocol::LeaseSlots(c);
  uint64_t total = 0;
  for (uint32_t l = 0; l < c.leases; ++l) {
    if (cursors[l] > UINT64_MAX - total) return Forged(path, "the lease cursors overflow");
    total += cursors[l];
  }
  if (total != header.ingest_cursor) {
    return Forged(path, absl::StrCat("the lease cursors add up to ", total,
                                     ", the ingest cursor is ", header.ingest_cursor));
  }
  for (uint64_t i = 0; i < c.capacity; ++i) {
    const uint64_t q = sequences[i];
    if (q == replay::ReplayMemory::kNoSequence) continue;
    const uint64_t lease = i / lease_slots;
    if (lease >= c.leases || protocol::LeaseSlotIndex(c, static_cast<uint32_t>(lease), q) != i) {
      return Forged(path, absl::StrCat("index ", i, " holds sequence ", q,
                                       ", which belongs at another index"));
    }
    if (q >= cursors[lease]) {
      return Forged(path, absl::StrCat("index ", i, " holds sequence ", q, " of lease ", lease,
                                       ", not below its cursor ", cursors[lease]));
    }
  }
  absl::flat_hash_map<uint32_t, uint32_t> lease_of_actor;
  for (uint32_t l = 0; l < c.leases; ++l) {
    const CheckpointLeaseHolder& h = holders[l];
    const auto state = static_cast<protocol::LeaseState>(h.state);
    if (state == protocol::LeaseState::kNeverHeld) {
      if (h.actor_id != 0 || h.grants != 0) {
        return Forged(path, absl::StrCat("lease ", l, " was never held but names actor ",
                                         h.actor_id, " and ", h.grants, " grants"));
      }
      continue;
    }
    if (state != protocol::LeaseState::kHeld && state != protocol::LeaseState::kReleased) {
      return Forged(path, absl::StrCat("lease ", l, " has holder state ", h.state));
    }
    if (h.grants == 0)
      return Forged(path, absl::StrCat("lease ", l, " was held but never granted"));
    const auto [it, inserted] = lease_of_actor.emplace(h.actor_id, l);
    if (!inserted) {
      return Forged(path,
                    absl::StrCat("actor ", h.actor_id, " holds leases ", it->second, " and ", l));
    }
  }
  return absl::OkStatus();
}

// Loads the params section into the params region (its header, and the
// half it names at that half's place).
void LoadParams(const std::vector<uint8_t>& section, ReplayRegions* regions) {
  const protocol::LayoutConfig& c = regions->config();
  protocol::ParamsHeader header;
  std::memcpy(&header, section.data(), sizeof(header));
  if (header.version == 0) return;
  uint8_t* region = regions->params();
  std::memcpy(region + protocol::ParamsHalfOffset(c, protocol::ParamsHalfOf(header.version)),
              section.data() + sizeof(header), protocol::ParamsHalfStride(c));
  std::memcpy(region, &header, sizeof(header));
}

absl::Status ReadContents(ReadableFile* file, const std::string& path, ReplayRegions* regions,
                          replay::ReplayMemory* memory, CheckpointState* state) {
  const protocol::LayoutConfig& config = regions->config();
  ASSIGN_OR_RETURN(const uint64_t file_size, file->Size());
  CheckpointHeader header{};
  // Enough for the version fields of any format.
  constexpr size_t kPrefix = offsetof(CheckpointHeader, config);
  if (file_size < kPrefix) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, " is truncated"));
  }
  RETURN_IF_ERROR(ReadAll(file, &header, kPrefix, path));
  if (header.magic == kCheckpointMagic && header.format_version == kCheckpointVersion) {
    if (file_size < sizeof(header)) {
      return absl::DataLossError(absl::StrCat("checkpoint ", path, " is truncated"));
    }
    RETURN_IF_ERROR(ReadAll(file, reinterpret_cast<uint8_t*>(&header) + kPrefix,
                            sizeof(header) - kPrefix, path));
  }
  RETURN_IF_ERROR(CheckHeader(header, path, config, *memory));
  const uint64_t expected_size = sizeof(header) + header.slot_bytes + header.commit_bytes +
                                 header.value_bytes + header.sequence_bytes +
                                 header.lease_cursor_bytes + header.lease_holder_bytes +
                                 header.params_bytes + sizeof(uint64_t);
  if (file_size != expected_size) {
    return absl::DataLossError(
        absl::StrCat("checkpoint ", path, " has ", file_size, " bytes, expected ", expected_size));
  }
  Hasher body;
  // No peer uses the regions yet: read straight into them.
  auto load = [&](void* destination, uint64_t bytes) -> absl::Status {
    auto* p = static_cast<uint8_t*>(destination);
    for (uint64_t offset = 0; offset < bytes; offset += kChunkBytes) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunkBytes, bytes - offset));
      RETURN_IF_ERROR(ReadAll(file, p + offset, n, path));
      body.Update(p + offset, n);
    }
    return absl::OkStatus();
  };
  std::vector<double> values(config.capacity);
  std::vector<uint64_t> sequences(config.capacity);
  std::vector<uint64_t> lease_cursors(config.leases);
  std::vector<CheckpointLeaseHolder> lease_holders(config.leases);
  std::vector<uint8_t> params(header.params_bytes);
  RETURN_IF_ERROR(load(regions->slots(), header.slot_bytes));
  RETURN_IF_ERROR(load(regions->commits(), header.commit_bytes));
  RETURN_IF_ERROR(load(values.data(), header.value_bytes));
  RETURN_IF_ERROR(load(sequences.data(), header.sequence_bytes));
  RETURN_IF_ERROR(load(lease_cursors.data(), header.lease_cursor_bytes));
  RETURN_IF_ERROR(load(lease_holders.data(), header.lease_holder_bytes));
  RETURN_IF_ERROR(load(params.data(), header.params_bytes));
  uint64_t trailer;
  RETURN_IF_ERROR(ReadAll(file, &trailer, sizeof(trailer), path));
  Hasher hasher;
  hasher.Update(&header, sizeof(header));
  const uint64_t body_digest = body.Digest();
  hasher.Update(&body_digest, sizeof(body_digest));
  if (trailer != hasher.Digest()) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, " fails its checksum"));
  }
  RETURN_IF_ERROR(ValidateLeases(path, config, header, sequences, lease_cursors, lease_holders));
  if (absl::Status s = memory->Restore(values, sequences); !s.ok()) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, ": ", s.message()));
  }
  state->epoch = header.epoch;
  state->incarnation = header.incarnation;
  state->journal_end = header.journal_end;
  state->ingest_cursor = header.ingest_cursor;
  state->lease_cursors = lease_cursors;
  state->lease_holders = lease_holders;
  std::memcpy(&state->counters, header.counters, sizeof(header.counters));
  LoadParams(params, regions);
  ClearUnverifiedCommits(lease_cursors, regions);
  // A file this build wrote holds only slots that verify: a failure here
  // is a bug or a damaged file the checksum missed.
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

double CheckpointWriteStats::bytes_per_second() const {
  const double seconds = absl::ToDoubleSeconds(write_time);
  return seconds > 0 ? static_cast<double>(bytes) / seconds : 0.0;
}

std::string CheckpointWriteStats::Summary() const {
  return absl::StrFormat(
      "the cut took %d steps over %.3f ms, the longest holding the core %.3f ms (ingest cursor "
      "%d); %d bytes written in %.3f s "
      "(%.1f MB/s); %d slots kept, %d overwritten during the write (recorded empty), %d "
      "committed but not ingested kept, %d frame records kept; params version %d",
      cut_steps, absl::ToDoubleMilliseconds(cut_time), absl::ToDoubleMilliseconds(cut_pause),
      cut_ingest_cursor, bytes, absl::ToDoubleSeconds(write_time), bytes_per_second() / 1e6,
      slots_kept, slots_absent, pending_kept, records_kept, params_version);
}

absl::StatusOr<CheckpointWriteStats> WriteCheckpoint(const std::string& path,
                                                     const ReplayRegions& regions,
                                                     CheckpointCut* cut, FileSystem* fs) {
  fs = OrDefault(fs);
  const protocol::LayoutConfig& c = regions.config();
  if (cut->values.size() != c.capacity || cut->sequences.size() != c.capacity ||
      cut->state.lease_cursors.size() != c.leases || cut->state.lease_holders.size() != c.leases) {
    return absl::InvalidArgumentError(
        absl::StrCat("the checkpoint cut has ", cut->values.size(), " values, ",
                     cut->sequences.size(), " sequences, ", cut->state.lease_cursors.size(),
                     " lease cursors and ", cut->state.lease_holders.size(),
                     " lease holders for capacity ", c.capacity, " and ", c.leases, " leases"));
  }
  const absl::Time start = absl::Now();
  CheckpointWriteStats stats;
  stats.cut_pause = cut->pause;
  stats.cut_steps = cut->steps;
  stats.cut_time = cut->cut_time;
  stats.cut_id = cut->cut_id;
  stats.cut_ingest_cursor = cut->state.ingest_cursor;
  const std::string temp = path + ".tmp";
  absl::Status status;
  {
    ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, fs->NewWritableFile(temp));
    status = WriteContents(file.get(), regions, cut->memory_options, cut, &stats);
    if (status.ok()) status = file->Sync();
    if (status.ok()) status = file->Close();
  }
  if (status.ok()) status = fs->Rename(temp, path);
  if (!status.ok()) {
    fs->Remove(temp).IgnoreError();  // frees the space a full disk needs back
    return status;
  }
  RETURN_IF_ERROR(fs->SyncDirectory(DirectoryOf(path)));
  stats.write_time = absl::Now() - start;
  stats.bytes = sizeof(CheckpointHeader) + protocol::SlotRingBytes(c) +
                protocol::CommitWordsBytes(c) + c.capacity * 16 + uint64_t{c.leases} * 24 +
                ParamsSectionBytes(c) + sizeof(uint64_t);
  if (cut->log != nullptr) cut->log->CheckpointWritten(cut->cut_id);
  return stats;
}

absl::Status ReadCheckpoint(const std::string& path, ReplayRegions* regions,
                            replay::ReplayMemory* memory, CheckpointState* state, FileSystem* fs) {
  fs = OrDefault(fs);
  if (memory->capacity() != regions->config().capacity) {
    return absl::InvalidArgumentError(absl::StrCat("memory capacity ", memory->capacity(),
                                                   " differs from the regions' ",
                                                   regions->config().capacity));
  }
  absl::StatusOr<std::unique_ptr<ReadableFile>> file = fs->NewReadableFile(path);
  if (absl::IsNotFound(file.status())) {
    return absl::NotFoundError(absl::StrCat("no checkpoint at ", path));
  }
  if (!file.ok()) return file.status();
  absl::Status status = ReadContents(file->get(), path, regions, memory, state);
  if (!status.ok()) {
    std::memset(regions->slots(), 0, protocol::SlotRingBytes(regions->config()));
    std::memset(regions->commits(), 0, protocol::CommitWordsBytes(regions->config()));
    std::memset(regions->params(), 0, regions->region_bytes(protocol::RegionKind::kParams));
    memory->Clear();
  }
  return status;
}

}  // namespace dreplay::server
