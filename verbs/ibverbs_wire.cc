// Copyright dreplay authors.

#include "verbs/ibverbs_wire.h"

#include <arpa/inet.h>

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dreplay::verbs::ibverbs {
namespace {

// InfiniBand unicast LIDs are 0x0001 to 0xBFFF.
constexpr uint16_t kFirstMulticastLid = 0xc000;

}  // namespace

std::string EncodeSetup(const SetupMessage& m) {
  SetupHeader h;
  std::memset(&h, 0, sizeof(h));
  h.magic = htonl(kSetupMagic);
  h.version = htons(kSetupVersion);
  h.kind = static_cast<uint8_t>(m.kind);
  h.mtu = static_cast<uint8_t>(m.info.mtu);
  h.qpn = htonl(m.info.qpn);
  h.psn = htonl(m.info.psn);
  std::memcpy(h.gid, m.info.gid.raw, sizeof(h.gid));
  h.lid = htons(m.info.lid);
  h.initiator_depth = static_cast<uint8_t>(m.info.initiator_depth);
  h.responder_resources = static_cast<uint8_t>(m.info.responder_resources);
  h.payload_length = htonl(static_cast<uint32_t>(m.payload.size()));
  h.gid_kind = static_cast<uint8_t>(m.info.gid_kind);
  std::string out(sizeof(h) + m.payload.size(), '\0');
  std::memcpy(out.data(), &h, sizeof(h));
  std::memcpy(out.data() + sizeof(h), m.payload.data(), m.payload.size());
  return out;
}

absl::StatusOr<SetupMessage> DecodeSetup(const std::string& frame, const std::string& peer) {
  if (frame.size() < sizeof(SetupHeader)) {
    return absl::InvalidArgumentError(absl::StrCat("setup frame from ", peer, " has ", frame.size(),
                                                   " bytes, less than the ", sizeof(SetupHeader),
                                                   "-byte header"));
  }
  SetupHeader h;
  std::memcpy(&h, frame.data(), sizeof(h));
  if (ntohl(h.magic) != kSetupMagic) {
    return absl::InvalidArgumentError(
        absl::StrFormat("setup frame from %s has bad magic 0x%08x (not a dreplay ibverbs peer)",
                        peer, ntohl(h.magic)));
  }
  if (ntohs(h.version) != kSetupVersion) {
    return absl::InvalidArgumentError(absl::StrCat("setup frame from ", peer, " has version ",
                                                   ntohs(h.version), ", expected ", kSetupVersion));
  }
  if (h.kind < static_cast<uint8_t>(SetupKind::kHello) ||
      h.kind > static_cast<uint8_t>(SetupKind::kReady)) {
    return absl::InvalidArgumentError(
        absl::StrCat("setup frame from ", peer, " has unknown kind ", h.kind));
  }
  const size_t payload_length = ntohl(h.payload_length);
  if (payload_length != frame.size() - sizeof(h)) {
    return absl::InvalidArgumentError(absl::StrCat("setup frame from ", peer, " announces a ",
                                                   payload_length, "-byte payload but carries ",
                                                   frame.size() - sizeof(h)));
  }
  if (h.mtu < IBV_MTU_256 || h.mtu > IBV_MTU_4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("setup frame from ", peer, " has invalid MTU code ", h.mtu));
  }
  if (h.gid_kind > static_cast<uint8_t>(GidKind::kRoceV2)) {
    return absl::InvalidArgumentError(
        absl::StrCat("setup frame from ", peer, " has unknown GID kind ", h.gid_kind));
  }
  SetupMessage m;
  m.kind = static_cast<SetupKind>(h.kind);
  m.info.gid_kind = static_cast<GidKind>(h.gid_kind);
  m.info.qpn = ntohl(h.qpn);  // CheckPeerInfo checks its range
  m.info.psn = ntohl(h.psn) & kPsnMask;
  std::memcpy(m.info.gid.raw, h.gid, sizeof(h.gid));
  m.info.lid = ntohs(h.lid);
  m.info.mtu = static_cast<ibv_mtu>(h.mtu);
  m.info.initiator_depth = h.initiator_depth;
  m.info.responder_resources = h.responder_resources;
  m.payload = frame.substr(sizeof(h));
  return m;
}

const char* GidKindName(GidKind kind) {
  switch (kind) {
    case GidKind::kInfiniBand:
      return "InfiniBand";
    case GidKind::kRoceV1:
      return "RoCE v1";
    case GidKind::kRoceV2:
      return "RoCE v2";
  }
  return "unknown";
}

namespace {

// ::ffff:a.b.c.d
bool Ipv4Mapped(const ibv_gid& gid) {
  for (int i = 0; i < 10; ++i) {
    if (gid.raw[i] != 0) return false;
  }
  return gid.raw[10] == 0xff && gid.raw[11] == 0xff;
}

std::string GidText(const ibv_gid& gid) {
  char text[INET6_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET6, gid.raw, text, sizeof(text));
  return text;
}

}  // namespace

absl::Status CheckGidCompatible(GidKind local_kind, const ibv_gid& local_gid, const PeerInfo& peer,
                                const std::string& peer_name) {
  const auto describe = [](GidKind kind, const ibv_gid& gid) {
    return absl::StrCat(GidKindName(kind), " GID ", GidText(gid));
  };
  const std::string both =
      absl::StrCat("peer ", peer_name, " has a ", describe(peer.gid_kind, peer.gid),
                   ", this side a ", describe(local_kind, local_gid));
  if (local_kind != peer.gid_kind) {
    return absl::FailedPreconditionError(
        absl::StrCat(both,
                     ": the two cannot reach each other; choose GIDs of one kind on both "
                     "sides (--gid_index)"));
  }
  if (local_kind == GidKind::kRoceV2 && Ipv4Mapped(local_gid) != Ipv4Mapped(peer.gid)) {
    return absl::FailedPreconditionError(
        absl::StrCat(both,
                     ": RoCE v2 packets of one IP family do not reach the other; choose "
                     "GIDs of one family on both sides (--gid_index)"));
  }
  return absl::OkStatus();
}

absl::Status CheckPeerInfo(const PeerInfo& info, bool ethernet, const std::string& peer) {
  if (info.qpn < 2 || info.qpn > kPsnMask) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "peer %s sent QPN 0x%x, not a 24-bit number of an RC queue pair", peer, info.qpn));
  }
  if (ethernet || info.lid == 0) {
    bool zero = true;
    for (uint8_t b : info.gid.raw) zero = zero && b == 0;
    if (zero) {
      return absl::InvalidArgumentError(
          absl::StrCat("peer ", peer, " sent an all-zero GID, which cannot be routed",
                       ethernet ? " on RoCE" : " (and no LID)"));
    }
  } else if (info.lid >= kFirstMulticastLid) {
    return absl::InvalidArgumentError(
        absl::StrFormat("peer %s sent LID 0x%x, not a unicast LID", peer, info.lid));
  }
  return absl::OkStatus();
}

}  // namespace dreplay::verbs::ibverbs
