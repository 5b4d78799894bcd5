// Copyright dreplay authors.
//
// port_file.h: a listening port, written for a launcher to read. A process
// that listens on port 0 (the OS picks one) writes the port it got, so that
// tests and launchers never guess or race for ports.
//
//   RETURN_IF_ERROR(WritePortFile("/tmp/run/server.port", server->port()));

#ifndef DREPLAY_COMMON_PORT_FILE_H_
#define DREPLAY_COMMON_PORT_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace dreplay {

// Writes `port` and a newline to `path` through a temporary file and a
// rename, so a reader never sees a partial port. Internal error naming the
// file when it cannot be written.
absl::Status WritePortFile(const std::string& path, uint16_t port);

}  // namespace dreplay

#endif  // DREPLAY_COMMON_PORT_FILE_H_
