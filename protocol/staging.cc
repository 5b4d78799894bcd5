// Copyright dreplay authors.

#include "protocol/staging.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/checksum.h"
#include "protocol/slots.h"

namespace dreplay::protocol {

uint64_t BatchChecksum(const LayoutConfig& c, const void* staging_slot, uint32_t entries,
                       uint32_t payload_count) {
  payload_count = std::min(payload_count, StagingEntryCapacity(c));
  return BatchChecksumBytes(c, staging_slot, entries, uint64_t{payload_count} * c.slot_size);
}

uint64_t BatchChecksumBytes(const LayoutConfig& c, const void* staging_slot, uint32_t entries,
                            uint64_t payload_bytes) {
  entries = std::min(entries, StagingEntryCapacity(c));
  payload_bytes = std::min(payload_bytes, StagingCommitOffset(c) - StagingPayloadsOffset(c));
  const auto* p = static_cast<const uint8_t*>(staging_slot);
  Xxh3Stream stream(kChecksumSeed);
  stream.Update(p + sizeof(uint64_t), sizeof(BatchHeader) - sizeof(uint64_t));
  stream.Update(p + StagingEntriesOffset(c), uint64_t{entries} * sizeof(BatchEntry));
  stream.Update(p + StagingPayloadsOffset(c), payload_bytes);
  return stream.Digest();
}

absl::StatusOr<uint64_t> StagedBatchBytes(const LayoutConfig& config, const CommitLine& line,
                                          uint64_t batch_number) {
  if (line.commit != BatchCommitValue(batch_number)) {
    return absl::UnavailableError(
        absl::StrCat("batch ", batch_number, " is not staged yet (commit ", line.commit, ")"));
  }
  // Each word is written whole, so a READ that overlaps the server's write
  // sees each one old or new, never a value no batch has: an impossible one
  // is the server's (or its memory's) fault.
  if (line.used_bytes < StagingUsedBytes(config, 0) ||
      line.used_bytes > StagingUsedBytes(config, StagingEntryCapacity(config))) {
    return absl::DataLossError(
        absl::StrCat("staged batch ", batch_number, " says it uses ", line.used_bytes,
                     " bytes, which no batch of this layout can (at most ",
                     StagingUsedBytes(config, StagingEntryCapacity(config)), ")"));
  }
  const uint64_t max_entry_bytes = uint64_t{StagingEntryCapacity(config)} * sizeof(BatchEntry);
  if (line.entry_bytes % sizeof(BatchEntry) != 0 || line.entry_bytes > max_entry_bytes) {
    return absl::DataLossError(
        absl::StrCat("staged batch ", batch_number, " says its entries take ", line.entry_bytes,
                     " bytes, which no batch of this layout can (a multiple of ",
                     sizeof(BatchEntry), " up to ", max_entry_bytes, ")"));
  }
  return line.used_bytes;
}

absl::Status CheckBatchImage(const LayoutConfig& config, const void* image, uint64_t image_bytes,
                             uint64_t batch_number, uint64_t epoch) {
  const auto* p = static_cast<const uint8_t*>(image);
  if (image_bytes < sizeof(BatchHeader)) {
    return absl::DataLossError(absl::StrCat("staged batch ", batch_number, " image of ",
                                            image_bytes, " bytes has no header"));
  }
  BatchHeader header;
  std::memcpy(&header, p, sizeof(header));
  if (header.batch_number != batch_number) {
    return absl::UnavailableError(absl::StrCat(
        "batch ", batch_number, " is not staged yet (header batch ", header.batch_number, ")"));
  }
  // Only a whole image is judged: a READ that overlapped the server's write
  // can pair a new header with old entries.
  const uint64_t entries = uint64_t{header.count} + header.record_count;
  if (header.count > config.batch_size || entries > StagingEntryCapacity(config) ||
      (config.frame_stack == 0 && header.record_count != 0) || header.payload_count > entries ||
      (header.packed_bytes != 0 &&
       header.packed_bytes >= uint64_t{header.payload_count} * config.slot_size) ||
      header.used_bytes !=
          StagingPayloadsOffset(config) +
              StagedPayloadBytes(config, header.payload_count, header.packed_bytes) ||
      header.used_bytes > image_bytes) {
    return absl::DataLossError(
        absl::StrCat("staged batch ", batch_number, " header has count ", header.count,
                     " record_count ", header.record_count, " payload_count ", header.payload_count,
                     " packed_bytes ", header.packed_bytes, " used_bytes ", header.used_bytes,
                     " for an image of ", image_bytes, " bytes (torn read)"));
  }
  if (BatchChecksumBytes(config, p, static_cast<uint32_t>(entries),
                         header.used_bytes - StagingPayloadsOffset(config)) != header.checksum) {
    return absl::DataLossError(
        absl::StrCat("staged batch ", batch_number, " fails its checksum (torn read)"));
  }
  if (header.epoch != epoch) {
    return absl::FailedPreconditionError(absl::StrCat("staged batch ", batch_number, " has epoch ",
                                                      header.epoch, ", expected ", epoch));
  }
  return absl::OkStatus();
}

absl::Status CheckStagedBatch(const LayoutConfig& config, const void* image, uint64_t batch_number,
                              uint64_t epoch) {
  CommitLine line;
  std::memcpy(&line, static_cast<const uint8_t*>(image) + StagingCommitOffset(config),
              sizeof(line));
  const absl::StatusOr<uint64_t> used = StagedBatchBytes(config, line, batch_number);
  if (!used.ok()) return used.status();
  return CheckBatchImage(config, image, StagingSlotStride(config), batch_number, epoch);
}

void StagedWeights(absl::Span<const BatchEntry> transitions, float beta,
                   absl::Span<float> weights) {
  auto usable = [](float pa) { return pa > 0 && std::isfinite(pa); };
  float min_alpha = std::numeric_limits<float>::infinity();
  for (const BatchEntry& e : transitions) {
    if (usable(e.priority_alpha)) min_alpha = std::min(min_alpha, e.priority_alpha);
  }
  const bool weighted = beta > 0 && std::isfinite(beta);
  for (size_t i = 0; i < transitions.size(); ++i) {
    const float pa = transitions[i].priority_alpha;
    // In ratio form, as ComputeWeights: no p^alpha however small overflows.
    weights[i] = weighted && usable(pa)
                     ? static_cast<float>(std::pow(double{min_alpha} / double{pa}, double{beta}))
                     : 1.0f;
  }
}

}  // namespace dreplay::protocol
