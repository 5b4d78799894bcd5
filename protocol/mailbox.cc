// Copyright dreplay authors.

#include "protocol/mailbox.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/checksum.h"

namespace dreplay::protocol {

uint64_t MailboxChecksum(const LayoutConfig& c, const void* entry, uint32_t count) {
  count = std::min(count, c.batch_size);
  const auto* p = static_cast<const uint8_t*>(entry);
  return Xxh3(p + sizeof(uint64_t),
              MailboxRecordsOffset(c) - sizeof(uint64_t) + uint64_t{count} * sizeof(PriorityRecord),
              kChecksumSeed);
}

absl::Status EncodePriorityUpdate(const LayoutConfig& config, uint64_t batch_number, uint64_t epoch,
                                  uint64_t incarnation, absl::Span<const PriorityRecord> records,
                                  absl::Span<uint8_t> entry) {
  if (records.size() > config.batch_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("priority update has ", records.size(),
                     " records, more than batch_size=", config.batch_size));
  }
  if (entry.size() < MailboxEntryStride(config)) {
    return absl::InvalidArgumentError(absl::StrCat("mailbox entry buffer of ", entry.size(),
                                                   " bytes, need ", MailboxEntryStride(config)));
  }
  std::memset(entry.data(), 0, MailboxEntryStride(config));
  MailboxHeader header{};
  header.batch_number = batch_number;
  header.epoch = epoch;
  header.incarnation = incarnation;
  header.count = static_cast<uint32_t>(records.size());
  std::memcpy(entry.data(), &header, sizeof(header));
  if (!records.empty()) {
    std::memcpy(entry.data() + MailboxRecordsOffset(config), records.data(),
                records.size() * sizeof(PriorityRecord));
  }
  header.checksum = MailboxChecksum(config, entry.data(), header.count);
  std::memcpy(entry.data(), &header.checksum, sizeof(header.checksum));
  const uint64_t commit = BatchCommitValue(batch_number);
  std::memcpy(entry.data() + MailboxCommitOffset(config), &commit, sizeof(commit));
  return absl::OkStatus();
}

}  // namespace dreplay::protocol
