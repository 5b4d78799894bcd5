// Copyright dreplay authors.
//
// frame_codec_bench: how well, and how fast, each codec of
// common/frame_codec.h compresses pixels84 frames (MinAtar's 10x10 grid
// rendered to 84x84 grays, rl/minatar/render.h), the figures that choose
// the long link's codec and level.
//
// The frames: --frames_per_game frames of each of MinAtar's five games,
// played by a uniformly random policy from --seed, one 7,056-byte frame per
// step (the newest of the 4-frame stack; an episode's first frame too).
// Each codec (--codecs, KIND[:LEVEL] as common/frame_codec.h names them)
// compresses them in three chunkings, the units the link would carry:
//   frame   each frame alone (a transfer-once cache that lacks one frame)
//   run     --run_frames consecutive frames of one game (a forwarded run,
//           or the new frames a cache-holding learner receives)
//   batch   the distinct frames of --batch_size transitions drawn uniformly
//           from one game's frames, in frame order: each transition's
//           stack (up to 4 frames, not across an episode's start) and its
//           successor's new frame (a staged batch that carries each frame
//           once)
// For each it prints the ratio (raw bytes / compressed bytes, over every
// chunk) and the compression and decompression speeds in MB/s of raw data
// per CPU-second of this thread (one core each way, whatever else runs on
// the machine; each pass repeated for --min_cpu_s), and checks that every
// chunk decompresses to its frames byte
// for byte (exit 1 otherwise). --json prints one JSON object instead.
//
//   bazel run -c opt //tools/bench:frame_codec_bench -- --json

#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/binary_main.h"
#include "common/frame_codec.h"
#include "common/json_writer.h"
#include "gflags/gflags.h"
#include "rl/make_environment.h"
#include "rl/minatar/render.h"

DEFINE_int32(frames_per_game, 2048, "frames of each of the five games");
DEFINE_int32(run_frames, 32, "frames in a chunk of the run chunking");
DEFINE_int32(batch_size, 64,
             "transitions whose distinct frames make a chunk of the batch chunking");
DEFINE_int32(batches_per_game, 64, "batch chunks drawn from each game's frames");
DEFINE_string(codecs, "lz4:1,lz4hc:9,zstd:-3,zstd:1,zstd:3,zstd:9",
              "comma-separated codecs, KIND[:LEVEL] (raw, lz4, lz4hc, zstd)");
DEFINE_double(min_cpu_s, 0.25,
              "CPU seconds each codec runs each way on each chunking, repeating its pass "
              "(the ratio is from the first)");
DEFINE_uint64(seed, 1, "seed of the games and the random policy");
DEFINE_bool(json, false, "print one JSON object on stdout");

namespace dreplay {
namespace {

constexpr char kUsage[] =
    "frame_codec_bench: compression ratio and MB/s per core, each way, of each\n"
    "codec on MinAtar's pixels84 frames, per frame, per run of consecutive frames\n"
    "and per batch of sampled transitions' distinct frames.\n"
    "Exit status: 0 done, 1 a chunk did not round-trip, 2 a bad flag.\n"
    "  frame_codec_bench [--codecs=zstd:1,lz4] [--frames_per_game=2048] [--json]";

constexpr size_t kFrameBytes = rl::minatar::kPixels84Size;
constexpr int kStackDepth = rl::minatar::kFrameStackDepth;

// One game's frames, in play order, and the first frame of each episode.
struct GameFrames {
  std::string game;
  std::vector<uint8_t> bytes;  // frames * kFrameBytes
  std::vector<bool> episode_start;
  size_t frames() const { return episode_start.size(); }
};

struct Options {
  int frames_per_game = 0;
  int run_frames = 0;
  int batch_size = 0;
  int batches_per_game = 0;
  std::vector<CodecOptions> codecs;
  double min_cpu_s = 0;
  uint64_t seed = 0;

  absl::Status Validate() const {
    if (frames_per_game < kStackDepth + 2) {
      return absl::InvalidArgumentError(absl::StrFormat("--frames_per_game=%d: at least %d frames",
                                                        frames_per_game, kStackDepth + 2));
    }
    if (run_frames < 1 || run_frames > frames_per_game) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--run_frames=%d: 1 to --frames_per_game", run_frames));
    }
    if (batch_size < 1 || batches_per_game < 1) {
      return absl::InvalidArgumentError("--batch_size and --batches_per_game: at least 1");
    }
    if (!(min_cpu_s >= 0 && min_cpu_s <= 60)) {
      return absl::InvalidArgumentError(absl::StrFormat("--min_cpu_s=%g: 0 to 60", min_cpu_s));
    }
    if (codecs.empty()) return absl::InvalidArgumentError("--codecs: name at least one");
    return absl::OkStatus();
  }
};

absl::StatusOr<GameFrames> PlayGame(const std::string& game, int frames, uint64_t seed) {
  absl::StatusOr<std::unique_ptr<rl::Environment>> env =
      rl::MakeEnvironment(game, rl::ObservationMode::kPixels84);
  if (!env.ok()) return env.status();
  GameFrames out{game, {}, {}};
  out.bytes.reserve(static_cast<size_t>(frames) * kFrameBytes);
  std::mt19937_64 policy(seed);
  const int actions = (*env)->spec().action_count;
  std::vector<float> observation = (*env)->Reset(seed);
  bool start = true;
  while (static_cast<int>(out.frames()) < frames) {
    // The newest frame is the stack's last.
    for (size_t i = observation.size() - kFrameBytes; i < observation.size(); ++i) {
      out.bytes.push_back(static_cast<uint8_t>(observation[i]));
    }
    out.episode_start.push_back(start);
    absl::StatusOr<rl::StepResult> step = (*env)->Step(static_cast<int>(policy() % actions));
    if (!step.ok()) return step.status();
    start = step->done();
    observation = start ? (*env)->Reset() : std::move(step->observation);
  }
  return out;
}

// A chunk: the frames it carries, concatenated.
using Chunk = std::vector<uint8_t>;

void AppendFrame(const GameFrames& game, size_t frame, Chunk& chunk) {
  const uint8_t* begin = game.bytes.data() + frame * kFrameBytes;
  chunk.insert(chunk.end(), begin, begin + kFrameBytes);
}

// The distinct frames of `batch_size` transitions drawn uniformly among
// those whose successor is in the same episode.
Chunk BatchChunk(const GameFrames& game, int batch_size, std::mt19937_64& random) {
  std::vector<size_t> frames;
  for (int drawn = 0; drawn < batch_size;) {
    const size_t i = random() % (game.frames() - 1);
    if (game.episode_start[i + 1]) continue;  // its successor starts another episode
    size_t first = i;  // the stack's oldest frame, not before the episode's first
    while (first > 0 && i - first < kStackDepth - 1 && !game.episode_start[first]) --first;
    for (size_t f = first; f <= i + 1; ++f) frames.push_back(f);
    ++drawn;
  }
  std::sort(frames.begin(), frames.end());
  frames.erase(std::unique(frames.begin(), frames.end()), frames.end());
  Chunk chunk;
  for (size_t f : frames) AppendFrame(game, f, chunk);
  return chunk;
}

struct Chunking {
  std::string name;
  std::vector<Chunk> chunks;
  size_t raw_bytes = 0;
};

std::vector<Chunking> MakeChunkings(const std::vector<GameFrames>& games, const Options& o) {
  std::vector<Chunking> out = {{"frame", {}, 0}, {"run", {}, 0}, {"batch", {}, 0}};
  std::mt19937_64 random(o.seed);
  for (const GameFrames& game : games) {
    for (size_t f = 0; f < game.frames(); ++f) {
      out[0].chunks.emplace_back();
      AppendFrame(game, f, out[0].chunks.back());
    }
    for (size_t f = 0; f + o.run_frames <= game.frames(); f += o.run_frames) {
      out[1].chunks.emplace_back();
      for (size_t g = f; g < f + o.run_frames; ++g) AppendFrame(game, g, out[1].chunks.back());
    }
    for (int b = 0; b < o.batches_per_game; ++b) {
      out[2].chunks.push_back(BatchChunk(game, o.batch_size, random));
    }
  }
  for (Chunking& c : out) {
    for (const Chunk& chunk : c.chunks) c.raw_bytes += chunk.size();
  }
  return out;
}

double ThreadCpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

struct Figures {
  std::string codec;
  std::string chunking;
  size_t chunks = 0;
  double raw_mb = 0;
  double compressed_mb = 0;
  double ratio = 0;
  double compress_mb_per_cpu_s = 0;
  double decompress_mb_per_cpu_s = 0;
  double bytes_per_frame = 0;
};

// Compresses every chunk, then decompresses every block and compares; then
// repeats each way until it has run --min_cpu_s, for the speeds.
absl::StatusOr<Figures> Measure(FrameCodec& codec, const Chunking& c, double min_cpu_s) {
  // The blocks are allocated (and their pages touched) before the clock
  // starts: it times the codec, not the allocator.
  std::vector<std::vector<uint8_t>> blocks(c.chunks.size());
  for (size_t i = 0; i < c.chunks.size(); ++i) {
    blocks[i].resize(codec.MaxCompressedSize(c.chunks[i].size()));
  }
  std::vector<size_t> sizes(c.chunks.size());
  int compress_passes = 0;
  const double c0 = ThreadCpuSeconds();
  do {
    for (size_t i = 0; i < c.chunks.size(); ++i) {
      absl::StatusOr<size_t> n = codec.Compress(c.chunks[i], absl::MakeSpan(blocks[i]));
      if (!n.ok()) return n.status();
      if (compress_passes == 0) sizes[i] = *n;
    }
    ++compress_passes;
  } while (ThreadCpuSeconds() - c0 < min_cpu_s);
  const double compress_s = ThreadCpuSeconds() - c0;
  size_t compressed = 0;
  for (size_t i = 0; i < c.chunks.size(); ++i) {
    blocks[i].resize(sizes[i]);
    compressed += sizes[i];
  }
  std::vector<Chunk> back(c.chunks.size());
  for (size_t i = 0; i < c.chunks.size(); ++i) back[i].assign(c.chunks[i].size(), 0);
  int decompress_passes = 0;
  const double d0 = ThreadCpuSeconds();
  do {
    for (size_t i = 0; i < c.chunks.size(); ++i) {
      absl::Status s = codec.Decompress(blocks[i], absl::MakeSpan(back[i]));
      if (!s.ok()) return s;
    }
    ++decompress_passes;
  } while (ThreadCpuSeconds() - d0 < min_cpu_s);
  const double decompress_s = ThreadCpuSeconds() - d0;
  for (size_t i = 0; i < c.chunks.size(); ++i) {
    if (back[i] != c.chunks[i]) {
      return absl::DataLossError(absl::StrFormat("%s, %s chunk %d: decompressed bytes differ",
                                                 codec.options().ToString(), c.name, i));
    }
  }
  Figures f;
  f.codec = codec.options().ToString();
  f.chunking = c.name;
  f.chunks = c.chunks.size();
  f.raw_mb = static_cast<double>(c.raw_bytes) / 1e6;
  f.compressed_mb = static_cast<double>(compressed) / 1e6;
  f.ratio = static_cast<double>(c.raw_bytes) / static_cast<double>(compressed);
  f.compress_mb_per_cpu_s = f.raw_mb * compress_passes / std::max(compress_s, 1e-9);
  f.decompress_mb_per_cpu_s = f.raw_mb * decompress_passes / std::max(decompress_s, 1e-9);
  f.bytes_per_frame = static_cast<double>(compressed) /
                      (static_cast<double>(c.raw_bytes) / static_cast<double>(kFrameBytes));
  return f;
}

void PrintJson(const Options& o, const std::vector<GameFrames>& games,
               const std::vector<Figures>& figures) {
  std::string game_list = "[";
  for (const GameFrames& g : games) {
    game_list += (game_list.size() > 1 ? "," : "") + JsonString(g.game);
  }
  std::string results = "[";
  for (const Figures& f : figures) {
    results += (results.size() > 1 ? "," : "") +
               JsonObject(6)
                   .Add("codec", f.codec)
                   .Add("chunking", f.chunking)
                   .Add("chunks", f.chunks)
                   .Add("raw_mb", f.raw_mb)
                   .Add("compressed_mb", f.compressed_mb)
                   .Add("ratio", f.ratio)
                   .Add("bytes_per_frame", f.bytes_per_frame)
                   .Add("compress_mb_per_cpu_s", f.compress_mb_per_cpu_s)
                   .Add("decompress_mb_per_cpu_s", f.decompress_mb_per_cpu_s)
                   .Done();
  }
  std::printf("%s\n", JsonObject(6)
                          .Add("frame_bytes", kFrameBytes)
                          .Add("frames_per_game", o.frames_per_game)
                          .AddRaw("games", game_list + "]")
                          .Add("run_frames", o.run_frames)
                          .Add("batch_size", o.batch_size)
                          .Add("min_cpu_s", o.min_cpu_s)
                          .Add("seed", o.seed)
                          .AddRaw("results", results + "]")
                          .Done()
                          .c_str());
}

int Run(BinaryMain& binary, const Options& o) {
  std::vector<GameFrames> games;
  for (const std::string& name : rl::MinAtar::Names()) {
    absl::StatusOr<GameFrames> game = PlayGame(name, o.frames_per_game, o.seed);
    if (!game.ok()) return binary.Failure(game.status());
    games.push_back(*std::move(game));
  }
  const std::vector<Chunking> chunkings = MakeChunkings(games, o);
  std::vector<Figures> figures;
  if (!FLAGS_json) {
    std::printf("%-9s %-6s %7s %8s %9s %11s %13s\n", "codec", "chunk", "chunks", "ratio", "B/frame",
                "comp MB/s", "decomp MB/s");
  }
  for (const CodecOptions& options : o.codecs) {
    absl::StatusOr<std::unique_ptr<FrameCodec>> codec = FrameCodec::Create(options);
    if (!codec.ok()) return binary.Failure(codec.status());
    for (const Chunking& c : chunkings) {
      absl::StatusOr<Figures> f = Measure(**codec, c, o.min_cpu_s);
      if (!f.ok()) return binary.Failure(f.status());
      if (!FLAGS_json) {
        std::printf("%-9s %-6s %7zu %8.1f %9.0f %11.0f %13.0f\n", f->codec.c_str(),
                    f->chunking.c_str(), f->chunks, f->ratio, f->bytes_per_frame,
                    f->compress_mb_per_cpu_s, f->decompress_mb_per_cpu_s);
        std::fflush(stdout);
      }
      figures.push_back(*f);
    }
  }
  if (FLAGS_json) PrintJson(o, games, figures);
  return kExitSuccess;
}

}  // namespace
}  // namespace dreplay

int main(int argc, char** argv) {
  dreplay::BinaryMain binary({"frame_codec_bench", dreplay::kUsage, "frame_codec_bench"});
  if (std::optional<int> done = binary.Init(argc, argv)) return *done;
  dreplay::Options options;
  options.frames_per_game = FLAGS_frames_per_game;
  options.run_frames = FLAGS_run_frames;
  options.batch_size = FLAGS_batch_size;
  options.batches_per_game = FLAGS_batches_per_game;
  options.min_cpu_s = FLAGS_min_cpu_s;
  options.seed = FLAGS_seed;
  for (absl::string_view text : absl::StrSplit(FLAGS_codecs, ',', absl::SkipEmpty())) {
    absl::StatusOr<dreplay::CodecOptions> codec = dreplay::ParseCodecOptions(text);
    if (!codec.ok()) return binary.BadFlag(codec.status());
    options.codecs.push_back(*codec);
  }
  if (absl::Status valid = options.Validate(); !valid.ok()) return binary.BadFlag(valid);
  return dreplay::Run(binary, options);
}
