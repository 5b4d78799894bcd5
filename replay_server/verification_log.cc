// Copyright dreplay authors.

#include "replay_server/verification_log.h"

#include <cstring>

#include "protocol/layout.h"

namespace dreplay::server {

void LogRestoredSlots(const ReplayRegions& regions, const replay::ReplayMemory& memory,
                      VerificationLog* log) {
  if (log == nullptr) return;
  const uint64_t capacity = regions.config().capacity;
  for (uint64_t i = 0; i < capacity; ++i) {
    protocol::SlotHeader header;
    std::memcpy(&header, regions.slot(i), sizeof(header));
    const bool valid = memory.valid(i);
    if (!valid && header.checksum == 0) continue;
    log->Restored(i, valid ? memory.sequence(i) : header.sequence, header.checksum, valid);
  }
}

}  // namespace dreplay::server
