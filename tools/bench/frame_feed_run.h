// Copyright dreplay authors.
//
// frame_feed_run.h: one arm of tools/bench/frame_feed_bench: an in-process
// server over the soft provider, one actor thread replaying a recorded
// pixels84 trace (frame_feed_trace.h) at consume_rate / samples_per_insert
// new transitions a second, and a learner emulator across the emulated
// link that consumes up to consume_rate transitions a second: it READs
// staged batches, assembles every transition's two u8 stacks into a
// rl::TransitionBatch (as the C++ learner does before training) and writes
// priorities back. The server's samples-per-insert limiter holds the
// ratio. In the hybrid and learner placements the emulator keeps its own
// replay (the C++ learner's LocalReplaySource, fed by what the server
// forwards), samples it at the same rate and ratio, and assembles the
// stacks from there.
//
//   ASSIGN_OR_RETURN(FrameFeedResult r, RunFrameFeedArm(config, arm, trace));
//
// Blocking; the run owns its server and threads and joins them.

#ifndef DREPLAY_TOOLS_BENCH_FRAME_FEED_RUN_H_
#define DREPLAY_TOOLS_BENCH_FRAME_FEED_RUN_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/link_bytes.h"
#include "common/frame_codec.h"
#include "protocol/config.h"
#include "tools/bench/frame_feed_trace.h"
#include "verbs/options.h"

namespace dreplay::tools {

struct FrameFeedConfig {
  double consume_rate = 6800;     // C: transitions a second the learner consumes at most
  double samples_per_insert = 8;  // the server's limiter
  uint32_t batch_size = 256;
  uint64_t capacity = 4096;  // slots, in both kinds of arm
  int environments = 4;      // the actor's
  int nstep = 3;
  bool learner_cache = true;
  // Buffer placement: the learner decodes and assembles batches on a thread
  // of its own, reading the next while it consumes one
  // (LearnerServiceIoOptions::assemble_ahead).
  bool assemble_ahead = true;
  std::string link_spec = "50:1";  // the learner's link
  verbs::LinkModel link;
  absl::Duration warmup = absl::Seconds(2);
  absl::Duration window = absl::Seconds(8);
  uint64_t seed = 1;

  absl::Status Validate() const;
};

// Where the learner's replay is (learner_client's ReplayPlacement).
enum class FeedPlacement { kBuffer, kHybrid, kLearner };

// One arm: where the replay is, how the actor writes, and how the server
// stages.
struct FrameFeedArm {
  std::string name;  // "stacks", "frames", "frames+zstd:3", "hybrid/frames+zstd:3"
  FeedPlacement placement = FeedPlacement::kBuffer;
  // kHybrid: the server's forwarder (priority, uniform or fifo).
  protocol::ForwardMode forward = protocol::ForwardMode::kForwardPriority;
  TraceFeeder::Kind kind = TraceFeeder::kFrames;
  std::optional<CodecOptions> link_codec;  // not with kLearner (it READs slots)
};

// What an arm measured over its window.
struct FrameFeedResult {
  FrameFeedArm arm;
  double seconds = 0;
  uint64_t inserted = 0;          // new transitions the server took in
  uint64_t consumed = 0;          // transitions the learner assembled
  uint64_t left_out = 0;          // transitions the learner could not assemble
  uint64_t distinct_fetched = 0;  // distinct transitions that crossed the link
  // The mean percentile, within the server's priority distribution, of
  // the transitions copied into staged batches (sampled or forwarded) in
  // the window; negative when none was measured (the learner placement
  // stages nothing).
  double crossing_percentile = -1;
  uint64_t records_inserted = 0;           // frame records the server took in (frames arms)
  client::LinkBytes link;                  // the learner's session, by class
  uint64_t packed_in = 0, packed_out = 0;  // the server's link compression
  uint64_t unpacked = 0;                   // bytes the learner decompressed
  double server_pack_cpu_s = 0;            // the core thread, compressing
  double learner_unpack_cpu_s = 0;         // the learner thread, decompressing
  double learner_cpu_s = 0;                // the learner thread, all of it
  // Decoding and stack assembly (buffer placement), on whichever thread
  // did it: the assembly thread with assemble_ahead, else within
  // learner_cpu_s.
  double assembly_cpu_s = 0;
  double actor_cpu_s = 0;  // the actor thread, all of it

  double consumed_per_s() const { return seconds > 0 ? consumed / seconds : 0; }
  // Bytes both ways on the learner's link (every class).
  uint64_t link_total() const { return link.total(); }
  // Server to learner: READ responses (experience, metadata, polling).
  uint64_t link_down() const { return link.experience + link.metadata + link.polling; }
};

// Unavailable when nothing was inserted or consumed in the window (a stall);
// the server's or a client's failure otherwise.
absl::StatusOr<FrameFeedResult> RunFrameFeedArm(const FrameFeedConfig& config,
                                                const FrameFeedArm& arm, const Trace& trace);

}  // namespace dreplay::tools

#endif  // DREPLAY_TOOLS_BENCH_FRAME_FEED_RUN_H_
