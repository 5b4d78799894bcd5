// Copyright dreplay authors.
//
// ibverbs_wire.h: the ibverbs provider's connection setup messages, sent as
// frames on the TCP control channel (tcp_channel.h).
//
// Connection setup (three messages on the control channel):
//
//   client                                   listener
//   create CQ+QP, RESET->INIT
//   kHello {qpn, psn, gid, lid, mtu, rd}  -->  (the connection manager reads
//                                            it, checks it with CheckPeerInfo)
//                                            Listener::Accept returns it
//                                            Accept(): create CQ+QP,
//                                            INIT -> RTR -> RTS
//                                       <--  kAccept {qpn, psn, gid, ...}
//   CheckPeerInfo, INIT -> RTR -> RTS
//   kReady                                -->
//   Connect() returns                        Accept() returns
//                                     (or <-- a reject and its reason)
//
// So when either side's call returns, both queue pairs are in RTS.
//
// The hello and the accept are the body of a connection-manager preamble
// (setup_preamble.h: provider ibverbs; a reject is the preamble's kReject
// and the reason); kReady is a frame of the control channel
// (tcp_channel.h). Each is a SetupHeader, all integers big-endian, followed
// by its payload (the application payload or the reply).

#ifndef DREPLAY_VERBS_IBVERBS_WIRE_H_
#define DREPLAY_VERBS_IBVERBS_WIRE_H_

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "absl/status/statusor.h"

namespace dreplay::verbs::ibverbs {

// PSNs (and QPNs) are 24-bit.
inline constexpr uint32_t kPsnMask = 0xffffff;
// Largest application payload (Connect payload, Accept reply, Reject reason).
inline constexpr size_t kMaxPayloadBytes = 64 * 1024;

inline constexpr uint32_t kSetupMagic = 0x44524942;  // "DRIB"
// 2: hello and accept follow the connection manager's preamble.
// 3: the GID's kind (InfiniBand, RoCE v1, RoCE v2).
inline constexpr uint16_t kSetupVersion = 3;

// What kind of GID a side addresses its queue pair with. Two RoCE sides must
// use one RoCE version, and for RoCE v2 one IP family (IPv4-mapped or
// IPv6): the packets of one are not routed to the other.
enum class GidKind : uint8_t { kInfiniBand = 0, kRoceV1 = 1, kRoceV2 = 2 };
const char* GidKindName(GidKind kind);

enum class SetupKind : uint8_t { kHello = 1, kAccept = 2, kReject = 3, kReady = 4 };

// The fixed part of each setup frame, all integers big-endian. The payload
// (application payload, reply or reject reason) follows it in the frame.
struct SetupHeader {
  uint32_t magic;
  uint16_t version;
  uint8_t kind;  // SetupKind
  uint8_t mtu;   // the sender port's active_mtu (enum ibv_mtu)
  uint32_t qpn;
  uint32_t psn;
  uint8_t gid[16];
  uint16_t lid;
  uint8_t initiator_depth;      // READs/atomics this side may have in flight
  uint8_t responder_resources;  // ... and may serve for the peer
  uint32_t payload_length;
  uint8_t gid_kind;  // GidKind
  uint8_t reserved[3];
};
static_assert(sizeof(SetupHeader) == 44, "SetupHeader is a wire structure");
static_assert(std::is_trivially_copyable<SetupHeader>::value, "SetupHeader is copied with memcpy");
static_assert(sizeof(ibv_gid) == sizeof(SetupHeader::gid), "GID is 16 bytes");
inline constexpr size_t kMaxSetupFrameBytes = sizeof(SetupHeader) + kMaxPayloadBytes;

// What one side tells the other about its queue pair.
struct PeerInfo {
  uint32_t qpn = 0;
  uint32_t psn = 0;
  ibv_gid gid = {};
  uint16_t lid = 0;
  ibv_mtu mtu = IBV_MTU_1024;
  int initiator_depth = 0;
  int responder_resources = 0;
  GidKind gid_kind = GidKind::kRoceV2;
};

struct SetupMessage {
  SetupKind kind = SetupKind::kHello;
  PeerInfo info;
  std::string payload;
};

// Sanity of what a peer says about its queue pair, checked before any queue
// pair is modified against it: the QPN is 24-bit and not 0 or 1 (the
// management QPs); a peer reached by GID (RoCE, `ethernet`, or a LID of 0)
// sent a GID that is not all zero; an InfiniBand LID is unicast
// (below 0xC000). kInvalidArgument naming `peer` and the field otherwise.
absl::Status CheckPeerInfo(const PeerInfo& info, bool ethernet, const std::string& peer);

// Whether this side (its GID `local_gid` of kind `local_kind`) and the peer
// can reach each other: on RoCE one version and, for RoCE v2, one IP family.
// kFailedPrecondition naming both GIDs and what to change (--gid_index)
// otherwise.
absl::Status CheckGidCompatible(GidKind local_kind, const ibv_gid& local_gid, const PeerInfo& peer,
                                const std::string& peer_name);

// The frame for `m`.
std::string EncodeSetup(const SetupMessage& m);
// Parses and validates a setup frame from `peer` (named in errors):
// kInvalidArgument for a short frame, bad magic, version, kind, length or
// MTU.
absl::StatusOr<SetupMessage> DecodeSetup(const std::string& frame, const std::string& peer);

}  // namespace dreplay::verbs::ibverbs

#endif  // DREPLAY_VERBS_IBVERBS_WIRE_H_
