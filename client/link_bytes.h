// Copyright dreplay authors.
//
// link_bytes.h: the bytes a client's queue pair moves across its link, by
// what they carry. Counted by ClientSession for every operation posted
// through it (and, as control, for the operations the server initiates on
// it, such as heartbeats); the classes add up to the queue pair's own count
// of data bytes (verbs::QueuePair traffic). Data bytes only: transport
// headers (RoCE, or the soft provider's framing) are not included.
//
// Thread safety: plain values.

#ifndef DREPLAY_CLIENT_LINK_BYTES_H_
#define DREPLAY_CLIENT_LINK_BYTES_H_

#include <cstdint>

namespace dreplay::client {

enum class TrafficClass : uint8_t {
  kExperience,  // transition payloads (copied slots)
  kMetadata,    // batch headers, entries, commit words of forwarded ranges
  kPolling,     // small READs that ask whether there is something new
  kPriorities,  // priority updates (mailbox)
  kParams,      // model parameters
  kControl,     // handshake, control block and server line, heartbeats, stats
};
inline constexpr int kNumTrafficClasses = 6;

struct LinkBytes {
  uint64_t experience = 0;
  uint64_t metadata = 0;
  uint64_t polling = 0;
  uint64_t priorities = 0;
  uint64_t params = 0;
  uint64_t control = 0;

  uint64_t total() const { return experience + metadata + polling + priorities + params + control; }
  void Add(TrafficClass c, uint64_t bytes) {
    switch (c) {
      case TrafficClass::kExperience:
        experience += bytes;
        return;
      case TrafficClass::kMetadata:
        metadata += bytes;
        return;
      case TrafficClass::kPolling:
        polling += bytes;
        return;
      case TrafficClass::kPriorities:
        priorities += bytes;
        return;
      case TrafficClass::kParams:
        params += bytes;
        return;
      case TrafficClass::kControl:
        control += bytes;
        return;
    }
  }
};

}  // namespace dreplay::client

#endif  // DREPLAY_CLIENT_LINK_BYTES_H_
