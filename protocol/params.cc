// Copyright dreplay authors.

#include "protocol/params.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/checksum.h"

namespace dreplay::protocol {

uint64_t ParamsChecksum(const LayoutConfig& c, const void* half, uint64_t size) {
  size = std::min(size, c.param_bytes);
  const auto* p = static_cast<const uint8_t*>(half);
  return Xxh3(p + sizeof(uint64_t), sizeof(ParamsHalfHeader) - sizeof(uint64_t) + size,
              kChecksumSeed);
}

absl::Status EncodeParamsHalf(const LayoutConfig& config, uint64_t version,
                              absl::Span<const uint8_t> data, absl::Span<uint8_t> half) {
  if (data.size() > config.param_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "parameters of ", data.size(), " bytes exceed param_bytes=", config.param_bytes));
  }
  if (half.size() < sizeof(ParamsHalfHeader) + data.size()) {
    return absl::InvalidArgumentError(absl::StrCat("params half buffer of ", half.size(),
                                                   " bytes, need ",
                                                   sizeof(ParamsHalfHeader) + data.size()));
  }
  ParamsHalfHeader header{};
  header.version = version;
  header.size = data.size();
  std::memcpy(half.data(), &header, sizeof(header));
  if (!data.empty()) std::memcpy(half.data() + sizeof(header), data.data(), data.size());
  header.checksum = ParamsChecksum(config, half.data(), header.size);
  std::memcpy(half.data(), &header.checksum, sizeof(header.checksum));
  return absl::OkStatus();
}

absl::Status CheckParamsHalf(const LayoutConfig& config, const void* half,
                             uint64_t expected_version) {
  ParamsHalfHeader header;
  std::memcpy(&header, half, sizeof(header));
  if (header.version != expected_version) {
    return absl::UnavailableError(absl::StrCat("params half holds version ", header.version,
                                               ", expected ", expected_version));
  }
  if (header.size > config.param_bytes) {
    return absl::DataLossError(absl::StrCat("params half size ", header.size,
                                            " exceeds param_bytes=", config.param_bytes));
  }
  if (ParamsChecksum(config, half, header.size) != header.checksum) {
    return absl::DataLossError(
        absl::StrCat("params version ", expected_version, " fails its checksum (torn read)"));
  }
  return absl::OkStatus();
}

}  // namespace dreplay::protocol
