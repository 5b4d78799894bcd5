// Copyright dreplay authors.

#include "protocol/host_port.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace dreplay::protocol {

absl::Status ParseHostPort(const std::string& address, std::string* host, uint16_t* port) {
  const size_t colon = address.rfind(':');
  uint32_t value = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &value) || value > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("address \"", address, "\" is not HOST:PORT (e.g. 127.0.0.1:7471)"));
  }
  *host = address.substr(0, colon);
  *port = static_cast<uint16_t>(value);
  return absl::OkStatus();
}

}  // namespace dreplay::protocol
