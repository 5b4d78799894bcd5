// Copyright dreplay authors.

// XXH3_state_t is used on the stack (its definition is in the static part).
#define XXH_STATIC_LINKING_ONLY
#include "protocol/staging.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "protocol/slots.h"
#include "xxhash.h"

namespace dreplay::protocol {

uint64_t BatchChecksum(const LayoutConfig& c, const void* staging_slot, uint32_t count) {
  count = std::min(count, c.batch_size);
  const auto* p = static_cast<const uint8_t*>(staging_slot);
  XXH3_state_t state;
  // A state on the stack must be initialized before a seeded reset (the
  // reset skips deriving the secret when the stale seed field matches).
  XXH3_INITSTATE(&state);
  XXH3_64bits_reset_withSeed(&state, kChecksumSeed);
  XXH3_64bits_update(&state, p + sizeof(uint64_t), sizeof(BatchHeader) - sizeof(uint64_t));
  XXH3_64bits_update(&state, p + StagingEntriesOffset(c), uint64_t{count} * sizeof(BatchEntry));
  XXH3_64bits_update(&state, p + StagingPayloadsOffset(c), uint64_t{count} * c.slot_size);
  return XXH3_64bits_digest(&state);
}

absl::Status CheckStagedBatch(const LayoutConfig& config, const void* image, uint64_t batch_number,
                              uint64_t epoch) {
  const auto* p = static_cast<const uint8_t*>(image);
  uint64_t commit;
  std::memcpy(&commit, p + StagingCommitOffset(config), sizeof(commit));
  BatchHeader header;
  std::memcpy(&header, p, sizeof(header));
  if (commit != BatchCommitValue(batch_number) || header.batch_number != batch_number) {
    return absl::UnavailableError(absl::StrCat("batch ", batch_number,
                                               " is not staged yet (commit ", commit,
                                               ", header batch ", header.batch_number, ")"));
  }
  // Only a whole image is judged: a READ that overlapped the server's write
  // can pair a new commit word with an old header.
  if (header.count > config.batch_size || header.slot_size != config.slot_size) {
    return absl::DataLossError(absl::StrCat("staged batch ", batch_number, " header has count ",
                                            header.count, " slot_size ", header.slot_size,
                                            " (torn read)"));
  }
  if (BatchChecksum(config, p, header.count) != header.checksum) {
    return absl::DataLossError(
        absl::StrCat("staged batch ", batch_number, " fails its checksum (torn read)"));
  }
  if (header.epoch != epoch) {
    return absl::FailedPreconditionError(absl::StrCat("staged batch ", batch_number, " has epoch ",
                                                      header.epoch, ", expected ", epoch));
  }
  return absl::OkStatus();
}

}  // namespace dreplay::protocol
