// Copyright dreplay authors.
//
// host_port.h: the "HOST:PORT" form in which every binary takes a server's
// address (--server, --listen, --connect).
//
// Pure; thread-safe.

#ifndef DREPLAY_PROTOCOL_HOST_PORT_H_
#define DREPLAY_PROTOCOL_HOST_PORT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace dreplay::protocol {

// "HOST:PORT" -> host, port, split at the last colon (so "[::1]:7471" keeps
// its brackets in host); InvalidArgument naming the bad value.
absl::Status ParseHostPort(const std::string& address, std::string* host, uint16_t* port);

}  // namespace dreplay::protocol

#endif  // DREPLAY_PROTOCOL_HOST_PORT_H_
