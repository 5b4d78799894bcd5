// Copyright dreplay authors.
//
// frame_codec.h: lossless compression of observation frames for the long
// link, with zstd or LZ4 (Debian's libzstd and liblz4). A codec compresses
// one chunk (a frame, or the frames a staged batch or forwarded run
// carries, concatenated) into a self-contained block; the receiver, which
// knows the chunk's raw size from its own header, decompresses it into a
// buffer of exactly that size.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<FrameCodec> codec,
//                    FrameCodec::Create({CodecKind::kZstd, /*level=*/1}));
//   std::vector<uint8_t> block(codec->MaxCompressedSize(raw.size()));
//   ASSIGN_OR_RETURN(size_t n, codec->Compress(raw, absl::MakeSpan(block)));
//   ...
//   RETURN_IF_ERROR(codec->Decompress(absl::MakeConstSpan(block.data(), n),
//                                     absl::MakeSpan(out)));  // out.size() == raw.size()
//
// Kinds and what `level` means for each (the default in brackets):
//   raw    no compression: the block is the chunk (level 0)
//   lz4    LZ4's fast compressor; level is its acceleration, 1 (its best
//          ratio) up to 65537 (faster, larger) [1]
//   lz4hc  LZ4's high-compression compressor, level 1..12 [9]; blocks
//          decode with LZ4's one fast decoder
//   zstd   zstd at level ZSTD_minCLevel() (negative: faster) up to
//          ZSTD_maxCLevel() (19 or more) [1]
// Which kind and level to use on pixels84 frames is measured by
// tools/bench/frame_codec_bench (docs/benchmarks.md#frame-compression).
//
// Thread safety: a FrameCodec is not thread-safe (it reuses its zstd
// contexts); use one per thread. Create() may be called from any thread.

#ifndef DREPLAY_COMMON_FRAME_CODEC_H_
#define DREPLAY_COMMON_FRAME_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace dreplay {

enum class CodecKind { kRaw, kLz4, kLz4Hc, kZstd };

// "raw", "lz4", "lz4hc" or "zstd".
const char* CodecKindName(CodecKind kind);

// The kind named `name`; INVALID_ARGUMENT naming it and the choices otherwise.
absl::StatusOr<CodecKind> ParseCodecKind(absl::string_view name);

// The default level of `kind` (see the table above).
int DefaultCodecLevel(CodecKind kind);

struct CodecOptions {
  CodecKind kind = CodecKind::kZstd;
  int level = 1;

  // INVALID_ARGUMENT naming the level and its range when `level` is outside
  // the kind's range.
  absl::Status Validate() const;
  // "zstd:1", "lz4:1", "raw".
  std::string ToString() const;
};

// Parses "KIND" (its default level) or "KIND:LEVEL" and validates it;
// INVALID_ARGUMENT otherwise.
absl::StatusOr<CodecOptions> ParseCodecOptions(absl::string_view text);

class FrameCodec {
 public:
  // INVALID_ARGUMENT for options that do not validate; RESOURCE_EXHAUSTED
  // when a compression context cannot be allocated.
  static absl::StatusOr<std::unique_ptr<FrameCodec>> Create(const CodecOptions& options);

  ~FrameCodec();
  FrameCodec(const FrameCodec&) = delete;
  FrameCodec& operator=(const FrameCodec&) = delete;

  const CodecOptions& options() const { return options_; }

  // The largest block a chunk of `raw_bytes` can compress to.
  size_t MaxCompressedSize(size_t raw_bytes) const;

  // The largest chunk Compress() accepts (LZ4 counts in int).
  static constexpr size_t kMaxChunkBytes = size_t{0x7E000000};

  // Compresses `chunk` into `block`; returns the block's size.
  // INVALID_ARGUMENT when chunk is empty or above kMaxChunkBytes, or block
  // is smaller than MaxCompressedSize(chunk.size()); INTERNAL when the
  // library fails.
  absl::StatusOr<size_t> Compress(absl::Span<const uint8_t> chunk, absl::Span<uint8_t> block);

  // Decompresses `block` into `chunk`, which must be the chunk's raw size.
  // DATA_LOSS when the block is corrupt or does not decode to exactly
  // chunk.size() bytes.
  absl::Status Decompress(absl::Span<const uint8_t> block, absl::Span<uint8_t> chunk);

 private:
  struct Contexts;
  FrameCodec(CodecOptions options, std::unique_ptr<Contexts> contexts);

  const CodecOptions options_;
  const std::unique_ptr<Contexts> contexts_;  // zstd only; null otherwise
};

}  // namespace dreplay

#endif  // DREPLAY_COMMON_FRAME_CODEC_H_
