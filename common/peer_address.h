// Copyright dreplay authors.
//
// peer_address.h: the source host of a peer address, the key of every
// per-source bound (half-open connections in verbs/, challenges in the
// replay server).
//
//   SourceOf("10.0.0.7:51234") == "10.0.0.7"
//   SourceOf("[::1]:4242") == "::1"

#ifndef DREPLAY_COMMON_PEER_ADDRESS_H_
#define DREPLAY_COMMON_PEER_ADDRESS_H_

#include <string>

namespace dreplay {

// The host part of "host:port": IPv4, or IPv6 with or without brackets.
// Without a ':' the whole string is the host.
std::string SourceOf(const std::string& peer);

}  // namespace dreplay

#endif  // DREPLAY_COMMON_PEER_ADDRESS_H_
