// Copyright dreplay authors.

#include "rl/params_format.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace dreplay::rl {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the params buffer is little-endian and copied as is");

constexpr uint64_t kFnvOffsetBasis = 14695981039346656037ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

void HashWord(uint64_t word, uint64_t* hash) {
  for (int byte = 0; byte < 8; ++byte) {
    *hash ^= (word >> (8 * byte)) & 0xff;
    *hash *= kFnvPrime;
  }
}

}  // namespace

uint64_t ParamsShapeHash(absl::Span<const std::vector<int64_t>> shapes) {
  uint64_t hash = kFnvOffsetBasis;
  HashWord(shapes.size(), &hash);
  for (const std::vector<int64_t>& shape : shapes) {
    HashWord(shape.size(), &hash);
    for (int64_t dim : shape) HashWord(static_cast<uint64_t>(dim), &hash);
  }
  return hash;
}

absl::StatusOr<size_t> WriteParams(uint64_t shape_hash, uint64_t version,
                                   absl::Span<const float> values, absl::Span<uint8_t> out) {
  const size_t size = ParamsBufferSize(values.size());
  if (out.size() < size) {
    return absl::InvalidArgumentError(absl::StrCat("writing ", values.size(), " parameters needs ",
                                                   size, " bytes, buffer has ", out.size()));
  }
  ParamsHeader header;
  header.shape_hash = shape_hash;
  header.version = version;
  header.count = values.size();
  std::memcpy(out.data(), &header, sizeof(header));
  std::memcpy(out.data() + sizeof(header), values.data(), values.size() * sizeof(float));
  return size;
}

absl::StatusOr<ParamsHeader> ReadParamsHeader(absl::Span<const uint8_t> in) {
  if (in.size() < sizeof(ParamsHeader)) {
    return absl::InvalidArgumentError(
        absl::StrCat("params buffer of ", in.size(), " bytes is shorter than its header"));
  }
  ParamsHeader header;
  std::memcpy(&header, in.data(), sizeof(header));
  if (header.magic != kParamsMagic) {
    return absl::InvalidArgumentError(absl::StrCat("params buffer has magic 0x",
                                                   absl::Hex(header.magic), ", expected 0x",
                                                   absl::Hex(kParamsMagic)));
  }
  if (header.format_version != kParamsFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat("params buffer has format version ",
                                                      header.format_version, ", this build reads ",
                                                      kParamsFormatVersion));
  }
  // Checked before multiplying so that a huge count cannot overflow.
  if (header.count > (in.size() - sizeof(ParamsHeader)) / sizeof(float)) {
    return absl::InvalidArgumentError(absl::StrCat("params buffer announces ", header.count,
                                                   " values but holds only ", in.size(), " bytes"));
  }
  return header;
}

absl::StatusOr<uint64_t> ReadParams(absl::Span<const uint8_t> in, uint64_t expected_shape_hash,
                                    absl::Span<float> values) {
  ASSIGN_OR_RETURN(const ParamsHeader header, ReadParamsHeader(in));
  if (header.shape_hash != expected_shape_hash) {
    return absl::FailedPreconditionError(
        absl::StrCat("params buffer is for network shape 0x", absl::Hex(header.shape_hash),
                     ", this network is 0x", absl::Hex(expected_shape_hash)));
  }
  if (header.count != values.size()) {
    return absl::FailedPreconditionError(absl::StrCat("params buffer holds ", header.count,
                                                      " values, this network has ", values.size()));
  }
  std::memcpy(values.data(), in.data() + sizeof(ParamsHeader), values.size() * sizeof(float));
  return header.version;
}

absl::Status CheckParamsFinite(absl::Span<const uint8_t> in) {
  ASSIGN_OR_RETURN(const ParamsHeader header, ReadParamsHeader(in));
  const uint8_t* values = in.data() + sizeof(ParamsHeader);
  for (uint64_t i = 0; i < header.count; ++i) {
    float value;
    std::memcpy(&value, values + i * sizeof(float), sizeof(value));
    if (!std::isfinite(value)) {
      return absl::InvalidArgumentError(absl::StrCat("parameter ", i, " of ", header.count,
                                                     " (version ", header.version, ") is ", value));
    }
  }
  return absl::OkStatus();
}

}  // namespace dreplay::rl
