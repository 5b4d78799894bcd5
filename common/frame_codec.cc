// Copyright dreplay authors.

#include "common/frame_codec.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "lz4.h"
#include "lz4hc.h"
#include "zstd.h"

namespace dreplay {
namespace {

constexpr int kLz4MaxAcceleration = 65537;  // LZ4_ACCELERATION_MAX

struct Range {
  int min;
  int max;
};

Range LevelRange(CodecKind kind) {
  switch (kind) {
    case CodecKind::kRaw:
      return {0, 0};
    case CodecKind::kLz4:
      return {1, kLz4MaxAcceleration};
    case CodecKind::kLz4Hc:
      return {1, LZ4HC_CLEVEL_MAX};
    case CodecKind::kZstd:
      return {ZSTD_minCLevel(), ZSTD_maxCLevel()};
  }
  return {0, 0};
}

}  // namespace

struct FrameCodec::Contexts {
  ZSTD_CCtx* compress = nullptr;
  ZSTD_DCtx* decompress = nullptr;
  ~Contexts() {
    ZSTD_freeCCtx(compress);
    ZSTD_freeDCtx(decompress);
  }
};

const char* CodecKindName(CodecKind kind) {
  switch (kind) {
    case CodecKind::kRaw:
      return "raw";
    case CodecKind::kLz4:
      return "lz4";
    case CodecKind::kLz4Hc:
      return "lz4hc";
    case CodecKind::kZstd:
      return "zstd";
  }
  return "?";
}

absl::StatusOr<CodecKind> ParseCodecKind(absl::string_view name) {
  for (CodecKind kind : {CodecKind::kRaw, CodecKind::kLz4, CodecKind::kLz4Hc, CodecKind::kZstd}) {
    if (name == CodecKindName(kind)) return kind;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("codec \"", name, "\" is not one of raw, lz4, lz4hc, zstd"));
}

int DefaultCodecLevel(CodecKind kind) {
  switch (kind) {
    case CodecKind::kRaw:
      return 0;
    case CodecKind::kLz4:
      return 1;
    case CodecKind::kLz4Hc:
      return 9;  // LZ4HC_CLEVEL_DEFAULT
    case CodecKind::kZstd:
      return 1;
  }
  return 0;
}

absl::Status CodecOptions::Validate() const {
  const Range range = LevelRange(kind);
  if (level < range.min || level > range.max) {
    return absl::InvalidArgumentError(absl::StrFormat("codec %s: level %d is outside [%d, %d]",
                                                      CodecKindName(kind), level, range.min,
                                                      range.max));
  }
  return absl::OkStatus();
}

std::string CodecOptions::ToString() const {
  if (kind == CodecKind::kRaw) return CodecKindName(kind);
  return absl::StrCat(CodecKindName(kind), ":", level);
}

absl::StatusOr<CodecOptions> ParseCodecOptions(absl::string_view text) {
  const size_t colon = text.find(':');
  absl::StatusOr<CodecKind> kind = ParseCodecKind(text.substr(0, colon));
  if (!kind.ok()) return kind.status();
  CodecOptions options{*kind, DefaultCodecLevel(*kind)};
  if (colon != absl::string_view::npos &&
      !absl::SimpleAtoi(text.substr(colon + 1), &options.level)) {
    return absl::InvalidArgumentError(
        absl::StrCat("codec \"", text, "\": the level after ':' is not an integer"));
  }
  absl::Status valid = options.Validate();
  if (!valid.ok()) return valid;
  return options;
}

absl::StatusOr<std::unique_ptr<FrameCodec>> FrameCodec::Create(const CodecOptions& options) {
  absl::Status valid = options.Validate();
  if (!valid.ok()) return valid;
  std::unique_ptr<Contexts> contexts;
  if (options.kind == CodecKind::kZstd) {
    contexts = std::make_unique<Contexts>();
    contexts->compress = ZSTD_createCCtx();
    contexts->decompress = ZSTD_createDCtx();
    if (contexts->compress == nullptr || contexts->decompress == nullptr) {
      return absl::ResourceExhaustedError("zstd: cannot allocate a compression context");
    }
    const size_t set =
        ZSTD_CCtx_setParameter(contexts->compress, ZSTD_c_compressionLevel, options.level);
    if (ZSTD_isError(set)) {
      return absl::InvalidArgumentError(
          absl::StrCat("zstd: level ", options.level, ": ", ZSTD_getErrorName(set)));
    }
  }
  return std::unique_ptr<FrameCodec>(new FrameCodec(options, std::move(contexts)));
}

FrameCodec::FrameCodec(CodecOptions options, std::unique_ptr<Contexts> contexts)
    : options_(options), contexts_(std::move(contexts)) {}

FrameCodec::~FrameCodec() = default;

size_t FrameCodec::MaxCompressedSize(size_t raw_bytes) const {
  switch (options_.kind) {
    case CodecKind::kRaw:
      return raw_bytes;
    case CodecKind::kLz4:
    case CodecKind::kLz4Hc:
      return raw_bytes > kMaxChunkBytes ? 0 : LZ4_compressBound(static_cast<int>(raw_bytes));
    case CodecKind::kZstd:
      return ZSTD_compressBound(raw_bytes);
  }
  return 0;
}

absl::StatusOr<size_t> FrameCodec::Compress(absl::Span<const uint8_t> chunk,
                                            absl::Span<uint8_t> block) {
  if (chunk.empty() || chunk.size() > kMaxChunkBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "compress: a chunk of %d bytes (it must hold 1 to %d)", chunk.size(), kMaxChunkBytes));
  }
  if (block.size() < MaxCompressedSize(chunk.size())) {
    return absl::InvalidArgumentError(
        absl::StrFormat("compress: a block of %d bytes, below the bound %d for %d raw bytes",
                        block.size(), MaxCompressedSize(chunk.size()), chunk.size()));
  }
  const char* in = reinterpret_cast<const char*>(chunk.data());
  char* out = reinterpret_cast<char*>(block.data());
  const int in_size = static_cast<int>(chunk.size());
  const int out_size = static_cast<int>(
      std::min<size_t>(block.size(), static_cast<size_t>(std::numeric_limits<int>::max())));
  int written = 0;
  switch (options_.kind) {
    case CodecKind::kRaw:
      std::memcpy(block.data(), chunk.data(), chunk.size());
      return chunk.size();
    case CodecKind::kLz4:
      written = LZ4_compress_fast(in, out, in_size, out_size, options_.level);
      break;
    case CodecKind::kLz4Hc:
      written = LZ4_compress_HC(in, out, in_size, out_size, options_.level);
      break;
    case CodecKind::kZstd: {
      const size_t n = ZSTD_compress2(contexts_->compress, block.data(), block.size(), chunk.data(),
                                      chunk.size());
      if (ZSTD_isError(n)) return absl::InternalError(absl::StrCat("zstd: ", ZSTD_getErrorName(n)));
      return n;
    }
  }
  if (written <= 0) {
    return absl::InternalError(absl::StrCat(CodecKindName(options_.kind), ": compression failed"));
  }
  return static_cast<size_t>(written);
}

absl::Status FrameCodec::Decompress(absl::Span<const uint8_t> block, absl::Span<uint8_t> chunk) {
  const auto mismatch = [&](int64_t got) {
    return absl::DataLossError(
        absl::StrFormat("%s: a block of %d bytes decodes to %d bytes, not %d",
                        CodecKindName(options_.kind), block.size(), got, chunk.size()));
  };
  switch (options_.kind) {
    case CodecKind::kRaw:
      if (block.size() != chunk.size()) return mismatch(block.size());
      std::memcpy(chunk.data(), block.data(), block.size());
      return absl::OkStatus();
    case CodecKind::kLz4:
    case CodecKind::kLz4Hc: {
      if (block.size() > kMaxChunkBytes || chunk.size() > kMaxChunkBytes) return mismatch(-1);
      const int n = LZ4_decompress_safe(
          reinterpret_cast<const char*>(block.data()), reinterpret_cast<char*>(chunk.data()),
          static_cast<int>(block.size()), static_cast<int>(chunk.size()));
      if (n < 0) {
        return absl::DataLossError(absl::StrFormat("%s: a block of %d bytes is corrupt",
                                                   CodecKindName(options_.kind), block.size()));
      }
      if (static_cast<size_t>(n) != chunk.size()) return mismatch(n);
      return absl::OkStatus();
    }
    case CodecKind::kZstd: {
      const size_t n = ZSTD_decompressDCtx(contexts_->decompress, chunk.data(), chunk.size(),
                                           block.data(), block.size());
      if (ZSTD_isError(n)) {
        return absl::DataLossError(
            absl::StrFormat("zstd: a block of %d bytes: %s", block.size(), ZSTD_getErrorName(n)));
      }
      if (n != chunk.size()) return mismatch(static_cast<int64_t>(n));
      return absl::OkStatus();
    }
  }
  return absl::InternalError("unknown codec");
}

}  // namespace dreplay
