// Copyright dreplay authors.
//
// verification_log.h: the server's records for the chaos soak's checker
// (common/verification_log.h holds the log and the record formats): after a
// checkpoint restore, one R record per slot of the restored ring that holds
// anything, with the sequence and checksum its header names and whether the
// restored memory holds it.
//
// Thread safety: as the core's (call on the core's thread, before peers use
// the regions).

#ifndef DREPLAY_REPLAY_SERVER_VERIFICATION_LOG_H_
#define DREPLAY_REPLAY_SERVER_VERIFICATION_LOG_H_

#include "common/verification_log.h"
#include "replay/replay_memory.h"
#include "replay_server/regions.h"

namespace dreplay::server {

// Writes the R records of `regions`' slot ring and `memory`; nothing when
// `log` is nullptr. A slot holds something when its memory entry is valid or
// its header's checksum is not 0.
void LogRestoredSlots(const ReplayRegions& regions, const replay::ReplayMemory& memory,
                      VerificationLog* log);

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_VERIFICATION_LOG_H_
