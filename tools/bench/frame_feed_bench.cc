// Copyright dreplay authors.
//
// frame_feed_bench: can a GPU learner be fed pixels84 stacks across a long
// link? A learner emulator (frame_feed_run.h) consumes up to
// --consume_rate transitions a second at --samples_per_insert, fed by one
// actor replaying a recorded MinAtar trace (frame_feed_trace.h), across
// the emulated --link; each arm in turn, in one run:
//   stacks          encoded transitions of stacked s and s' (u8), sent raw
//   frames          frames stored once, batches carry each record once
//   frames+CODEC    the same, compressed on the link (--link_codec)
// each in the buffer placement (sampled batches), or with a prefix in
// another: hybrid/ (the server forwards by priority into the learner's own
// replay; hybrid-uniform/, hybrid-fifo/ forward at random or oldest
// first), learner/ (the learner READs every record; no codec).
//
// Per arm: transitions consumed a second and the fraction of the rate
// reached, link bytes by class and direction per new and per sampled
// transition, compression ratio and CPU on each side; then the issue's
// targets, computed from the measured bytes side by side.
//
//   bazel run -c opt //tools/bench:frame_feed_bench -- --json

#include <cinttypes>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/binary_main.h"
#include "common/frame_codec.h"
#include "common/json_writer.h"
#include "gflags/gflags.h"
#include "tools/bench/frame_feed_run.h"
#include "tools/bench/frame_feed_trace.h"

DEFINE_string(game, "MinAtar/Breakout", "the MinAtar game the trace is recorded from");
DEFINE_int32(trace_steps, 4096, "steps in the recorded trace (the actor replays it in a loop)");
DEFINE_string(arms, "stacks,frames,frames+lz4,frames+zstd:3",
              "the arms, in order: [PLACEMENT/]stacks, frames or frames+CODEC (CODEC as "
              "--link_codec names it: lz4[:N], lz4hc[:N], zstd[:N]); PLACEMENT buffer (the "
              "default), hybrid, hybrid-uniform, hybrid-fifo or learner (no CODEC)");
DEFINE_double(consume_rate, 6800,
              "C: transitions a second the learner emulator consumes at most (default: 170 k/s, "
              "an H200's double DQN at batch 512, scaled by the 1/25 of a 1 Gb/s link to 25 GbE)");
DEFINE_double(samples_per_insert, 8, "the server's samples-per-insert limiter");
DEFINE_uint32(batch_size, 256, "transitions per staged batch");
DEFINE_uint64(capacity, 4096, "slots in the server's ring (a power of two)");
DEFINE_int32(environments, 4, "environments the actor replays the trace as");
DEFINE_int32(nstep, 3, "n of the n-step transitions");
DEFINE_bool(learner_cache, true, "transfer-once: the learner keeps what it received");
DEFINE_bool(assemble_ahead, true,
            "buffer placement: the learner decodes and assembles each batch on a thread of its "
            "own while it consumes the one before (false: on the learner's thread)");
DEFINE_string(link, "50:1",
              "the learner's emulated link: DELAY_US:GBPS, or 10km-25g, 100km-10g, 1000km-1g, "
              "none");
DEFINE_double(warmup_s, 2, "seconds after the first batch before the window opens");
DEFINE_double(window_s, 8, "seconds measured per arm");
DEFINE_double(target_rate, 170000,
              "transitions a second of the full-size learner the link budget is computed for");
DEFINE_uint64(seed, 1, "seed of the trace, the memory and the emulator's priorities");
DEFINE_bool(json, false, "print one JSON object on stdout");

namespace dreplay::tools {
namespace {

constexpr char kUsage[] =
    "frame_feed_bench: a learner emulator consumes pixels84 stacks across an emulated\n"
    "link, fed by an actor replaying a recorded MinAtar trace; stacks sent raw against\n"
    "frames stored once, with and without compression, side by side.\n"
    "Exit status: 0 done, 1 a run failed, 2 a bad flag.\n"
    "  frame_feed_bench [--arms=stacks,frames,frames+zstd:3] [--consume_rate=6800] [--json]";

// Bytes of stacked s and s' (two stacks of four 84x84 frames), raw.
constexpr double kRawStackedBytes = 2.0 * 4 * 84 * 84;

absl::StatusOr<FrameFeedArm> ParseArm(absl::string_view text) {
  FrameFeedArm arm;
  arm.name = std::string(text);
  if (const size_t slash = text.find('/'); slash != absl::string_view::npos) {
    const absl::string_view placement = text.substr(0, slash);
    text = text.substr(slash + 1);
    if (placement == "hybrid" || placement == "hybrid-uniform" || placement == "hybrid-fifo") {
      arm.placement = FeedPlacement::kHybrid;
      arm.forward = placement == "hybrid"           ? protocol::ForwardMode::kForwardPriority
                    : placement == "hybrid-uniform" ? protocol::ForwardMode::kForwardUniform
                                                    : protocol::ForwardMode::kForwardFifo;
    } else if (placement == "learner") {
      arm.placement = FeedPlacement::kLearner;
    } else if (placement != "buffer") {
      return absl::InvalidArgumentError(
          absl::StrCat("--arms: \"", arm.name, "\": placement \"", placement,
                       "\" is not buffer, hybrid, hybrid-uniform, hybrid-fifo or learner"));
    }
  }
  if (text == "stacks") {
    arm.kind = TraceFeeder::kStacks;
    return arm;
  }
  arm.kind = TraceFeeder::kFrames;
  if (text == "frames") return arm;
  if (absl::StartsWith(text, "frames+")) {
    absl::StatusOr<CodecOptions> codec = ParseCodecOptions(text.substr(7));
    if (!codec.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--arms: \"", text, "\": ", codec.status().message()));
    }
    if (codec->kind != CodecKind::kRaw) arm.link_codec = *codec;
    if (arm.link_codec.has_value() && arm.placement == FeedPlacement::kLearner) {
      return absl::InvalidArgumentError(
          absl::StrCat("--arms: \"", arm.name,
                       "\": the learner placement READs slots as written, uncompressed"));
    }
    return arm;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--arms: \"", text, "\" is not stacks, frames or frames+CODEC"));
}

// Derived figures of one arm.
struct Figures {
  double per_new = 0;      // link bytes (both ways) per new transition
  double per_sampled = 0;  // ... per sampled transition
  double experience_per_new = 0;
  double fraction = 0;  // of --consume_rate reached
  double gbps_at_target = 0;
  double ratio = 0;  // compression: raw / packed
  double compress_mb_per_cpu_s = 0;
  double decompress_mb_per_cpu_s = 0;
};

Figures Derive(const FrameFeedResult& r, const FrameFeedConfig& c) {
  Figures f;
  f.per_new = static_cast<double>(r.link_total()) / r.inserted;
  f.per_sampled = static_cast<double>(r.link_total()) / r.consumed;
  f.experience_per_new = static_cast<double>(r.link.experience) / r.inserted;
  f.fraction = r.consumed_per_s() / c.consume_rate;
  f.gbps_at_target = f.per_sampled * FLAGS_target_rate * 8 / 1e9;
  if (r.arm.link_codec.has_value() && r.packed_out > 0)
    f.ratio = static_cast<double>(r.packed_in) / r.packed_out;
  if (r.server_pack_cpu_s > 0) f.compress_mb_per_cpu_s = r.packed_in / 1e6 / r.server_pack_cpu_s;
  if (r.learner_unpack_cpu_s > 0) {
    f.decompress_mb_per_cpu_s = r.unpacked / 1e6 / r.learner_unpack_cpu_s;
  }
  return f;
}

std::string ArmJson(const FrameFeedResult& r, const Figures& f) {
  return JsonObject(6)
      .Add("arm", r.arm.name)
      .Add("seconds", r.seconds)
      .Add("consumed", r.consumed)
      .Add("consumed_per_s", r.consumed_per_s())
      .Add("fraction_of_rate", f.fraction)
      .Add("left_out", r.left_out)
      .Add("distinct_fetched_per_s", r.distinct_fetched / r.seconds)
      .Add("crossing_percentile", r.crossing_percentile)
      .Add("inserted", r.inserted)
      .Add("records_inserted", r.records_inserted)
      .Add("samples_per_insert", static_cast<double>(r.consumed) / r.inserted)
      .Add("link_bytes_experience", r.link.experience)
      .Add("link_bytes_metadata", r.link.metadata)
      .Add("link_bytes_polling", r.link.polling)
      .Add("link_bytes_priorities", r.link.priorities)
      .Add("link_bytes_params", r.link.params)
      .Add("link_bytes_control", r.link.control)
      .Add("link_bytes_down", r.link_down())
      .Add("link_bytes_up", r.link.priorities + r.link.params)
      .Add("link_bytes_per_new_transition", f.per_new)
      .Add("link_bytes_per_sampled_transition", f.per_sampled)
      .Add("experience_bytes_per_new_transition", f.experience_per_new)
      .Add("gbps_at_target_rate", f.gbps_at_target)
      .Add("packed_in_bytes", r.packed_in)
      .Add("packed_out_bytes", r.packed_out)
      .Add("compression_ratio", f.ratio)
      .Add("server_compress_cpu_s", r.server_pack_cpu_s)
      .Add("compress_mb_per_cpu_s", f.compress_mb_per_cpu_s)
      .Add("learner_decompress_cpu_s", r.learner_unpack_cpu_s)
      .Add("decompress_mb_per_cpu_s", f.decompress_mb_per_cpu_s)
      .Add("learner_cpu_s", r.learner_cpu_s)
      .Add("assembly_cpu_s", r.assembly_cpu_s)
      .Add("actor_cpu_s", r.actor_cpu_s)
      .Done();
}

void PrintArm(const FrameFeedResult& r, const Figures& f) {
  std::printf(
      "%-14s consumed %7.0f/s (%.2f of C)  inserted %6.0f/s  link %8.0f B/new %7.0f B/sampled "
      "(experience %.0f B/new; down %.1f MB, up %.2f MB)  %.3f Gb/s at %.0f/s  distinct "
      "%.0f/s crossed, %" PRIu64 " left out",
      r.arm.name.c_str(), r.consumed_per_s(), f.fraction, r.inserted / r.seconds, f.per_new,
      f.per_sampled, f.experience_per_new, r.link_down() / 1e6,
      (r.link.priorities + r.link.params) / 1e6, f.gbps_at_target, FLAGS_target_rate,
      r.distinct_fetched / r.seconds, r.left_out);
  if (r.arm.link_codec.has_value()) {
    std::printf("  codec %.1fx, compress %.3f cores (%.0f MB/s a core), decompress %.3f cores",
                f.ratio, r.server_pack_cpu_s / r.seconds, f.compress_mb_per_cpu_s,
                r.learner_unpack_cpu_s / r.seconds);
  }
  std::printf("  learner %.2f cores (assembly %.2f), actor %.2f\n", r.learner_cpu_s / r.seconds,
              r.assembly_cpu_s / r.seconds, r.actor_cpu_s / r.seconds);
  std::fflush(stdout);
}

// The targets, from the measured buffer-placement arms: the first frames
// arm without a codec against raw stacked s and s', the best compressed arm
// against it.
std::string Targets(const std::vector<FrameFeedResult>& results,
                    const std::vector<Figures>& figures) {
  const Figures* frames = nullptr;
  const Figures* best = nullptr;
  std::string best_name;
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].arm.kind != TraceFeeder::kFrames ||
        results[i].arm.placement != FeedPlacement::kBuffer) {
      continue;
    }
    if (!results[i].arm.link_codec.has_value()) {
      if (frames == nullptr) frames = &figures[i];
    } else if (best == nullptr || figures[i].per_new < best->per_new) {
      best = &figures[i];
      best_name = results[i].arm.name;
    }
  }
  JsonObject t(6);
  t.Add("raw_stacked_bytes", kRawStackedBytes);
  if (frames != nullptr) {
    t.Add("frames_per_new_over_raw_stacked", frames->per_new / kRawStackedBytes);
    t.Add("dedup_target_met", frames->per_new <= kRawStackedBytes / 8);
    if (best != nullptr) {
      t.Add("best_codec_arm", best_name);
      t.Add("compressed_reduction", frames->per_new / best->per_new);
      t.Add("compression_target_met", frames->per_new >= 4 * best->per_new);
      t.Add("gbps_at_target_rate", best->gbps_at_target);
      t.Add("gbps_target_met", best->gbps_at_target <= 2.0);
      t.Add("fraction_of_rate", best->fraction);
      t.Add("rate_target_met", best->fraction >= 0.9);
    }
  }
  return t.Done();
}

int Run(BinaryMain& binary, const FrameFeedConfig& c, const std::vector<FrameFeedArm>& arms) {
  absl::StatusOr<Trace> trace = RecordTrace(FLAGS_game, FLAGS_trace_steps, c.seed);
  if (!trace.ok()) return binary.Failure(trace.status());
  if (!FLAGS_json) {
    std::printf(
        "trace: %s, %zu steps, %zu episodes; C %.0f/s at %g samples per insert, batch %u, "
        "capacity %lu, link %s, cache %s, window %.1f s\n",
        trace->game.c_str(), trace->events.size() - trace->episode_starts.size(),
        trace->episode_starts.size(), c.consume_rate, c.samples_per_insert, c.batch_size,
        static_cast<unsigned long>(c.capacity), c.link_spec.c_str(), c.learner_cache ? "on" : "off",
        absl::ToDoubleSeconds(c.window));
  }
  std::vector<FrameFeedResult> results;
  std::vector<Figures> figures;
  std::vector<std::string> stalled;  // JSON of the arms the link stalled
  for (const FrameFeedArm& arm : arms) {
    absl::StatusOr<FrameFeedResult> r = RunFrameFeedArm(c, arm, *trace);
    if (absl::IsUnavailable(r.status()) || absl::IsDeadlineExceeded(r.status())) {
      // A link too slow for the arm: nothing moved. Said, and the run goes on.
      if (!FLAGS_json)
        std::printf("%-14s stalled: %s\n", arm.name.c_str(), r.status().ToString().c_str());
      stalled.push_back(JsonObject(6)
                            .Add("arm", arm.name)
                            .Add("stalled", true)
                            .Add("why", r.status().ToString())
                            .Done());
      continue;
    }
    if (!r.ok()) return binary.Failure(r.status());
    figures.push_back(Derive(*r, c));
    if (!FLAGS_json) PrintArm(*r, figures.back());
    results.push_back(*std::move(r));
  }
  const std::string targets = Targets(results, figures);
  if (!FLAGS_json) {
    std::printf("targets: %s\n", targets.c_str());
    return kExitSuccess;
  }
  std::string list = "[";
  for (size_t i = 0; i < results.size(); ++i) {
    list += (i > 0 ? "," : "") + ArmJson(results[i], figures[i]);
  }
  for (size_t i = 0; i < stalled.size(); ++i) {
    list += (list.size() > 1 ? "," : "") + stalled[i];
  }
  std::printf("%s\n", JsonObject(6)
                          .Add("game", trace->game)
                          .Add("trace_steps", FLAGS_trace_steps)
                          .Add("consume_rate", c.consume_rate)
                          .Add("samples_per_insert", c.samples_per_insert)
                          .Add("batch_size", c.batch_size)
                          .Add("capacity", c.capacity)
                          .Add("environments", c.environments)
                          .Add("learner_cache", c.learner_cache)
                          .Add("assemble_ahead", c.assemble_ahead)
                          .Add("link", c.link_spec)
                          .Add("window_s", absl::ToDoubleSeconds(c.window))
                          .Add("target_rate", FLAGS_target_rate)
                          .Add("seed", c.seed)
                          .AddRaw("arms", list + "]")
                          .AddRaw("targets", targets)
                          .Done()
                          .c_str());
  return kExitSuccess;
}

}  // namespace
}  // namespace dreplay::tools

int main(int argc, char** argv) {
  dreplay::BinaryMain binary({"frame_feed_bench", dreplay::tools::kUsage, "frame_feed_bench"});
  if (std::optional<int> done = binary.Init(argc, argv)) return *done;
  dreplay::tools::FrameFeedConfig c;
  c.consume_rate = FLAGS_consume_rate;
  c.samples_per_insert = FLAGS_samples_per_insert;
  c.batch_size = FLAGS_batch_size;
  c.capacity = FLAGS_capacity;
  c.environments = FLAGS_environments;
  c.nstep = FLAGS_nstep;
  c.learner_cache = FLAGS_learner_cache;
  c.assemble_ahead = FLAGS_assemble_ahead;
  c.link_spec = FLAGS_link;
  absl::StatusOr<dreplay::verbs::LinkModel> link = dreplay::verbs::ParseLinkModel(FLAGS_link);
  if (!link.ok()) {
    return binary.BadFlag(absl::InvalidArgumentError(
        absl::StrCat("--link=", FLAGS_link, ": ", link.status().message())));
  }
  c.link = *link;
  c.warmup = absl::Seconds(FLAGS_warmup_s);
  c.window = absl::Seconds(FLAGS_window_s);
  c.seed = FLAGS_seed;
  if (absl::Status s = c.Validate(); !s.ok()) return binary.BadFlag(s);
  if (FLAGS_trace_steps < 64) {
    return binary.BadFlag(absl::InvalidArgumentError("--trace_steps: at least 64"));
  }
  std::vector<dreplay::tools::FrameFeedArm> arms;
  for (absl::string_view text : absl::StrSplit(FLAGS_arms, ',', absl::SkipEmpty())) {
    absl::StatusOr<dreplay::tools::FrameFeedArm> arm = dreplay::tools::ParseArm(text);
    if (!arm.ok()) return binary.BadFlag(arm.status());
    arms.push_back(*std::move(arm));
  }
  if (arms.empty()) return binary.BadFlag(absl::InvalidArgumentError("--arms: name at least one"));
  return dreplay::tools::Run(binary, c, arms);
}
