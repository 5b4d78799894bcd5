// Copyright dreplay authors.
//
// replay_server: the buffer node's replay service.
//
//   replay_server --listen=0.0.0.0:7471 --capacity=1048576 --slot_size=256
//       --batch_size=32 --staging_depth=8 --checkpoint_dir=/var/lib/dreplay
//       --auth_token_file=/etc/dreplay/token
//
// Tokens: --actor_token_file, --learner_token_file and --monitor_token_file
// give each role its own; --auth_token_file is the token of every role
// without one. Clients prove they hold their role's token by an HMAC over a
// server nonce (protocol/handshake.h); no token crosses the wire. The
// actors' token is a master: each actor proves its own credential, derived
// from it (`actor_credentials` writes them), so it cannot claim another
// actor's id. Without any token the server refuses to start unless
// --insecure (then it admits everyone, in any role and as any actor).
//
// Prints "listening on HOST:PORT" once clients may connect (--port_file also
// writes the port). With --metrics_listen=127.0.0.1:9464 it also serves its
// metrics to Prometheus at http://127.0.0.1:9464/metrics (printed as
// "metrics on URL" before "listening on"). SIGINT or SIGTERM stops it
// cleanly: committed experiences are ingested and, with --checkpoint_dir, a
// final checkpoint is written, which the next start restores (a new epoch).
// SIGUSR1 writes a checkpoint at once, without stopping. The newest
// --checkpoint_keep checkpoints are kept; a start falls back to an older one
// when a newer one is damaged. The soft provider's link is chosen by the
// connecting side (the learner's --link).
//
// Actors: --leases is how many are served at once; the ring is split into
// that many leases of capacity / leases slots, one per connected actor.
// --actor_ids (default --leases) is which ids they may have.

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <tuple>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/binary_main.h"
#include "common/flag_values.h"
#include "common/frame_codec.h"
#include "common/metrics_http.h"
#include "common/status_macros.h"
#include "common/stop_signals.h"
#include "gflags/gflags.h"
#include "protocol/host_port.h"
#include "replay_server/server.h"
#include "replay_server/server_run.h"
#include "verbs/provider_flag_definitions.h"
#include "verbs/provider_flags.h"
#include "verbs/verbs.h"

DEFINE_string(listen, "127.0.0.1:0",
              "HOST:PORT to listen on. Port 0: the OS picks one (printed, see --port_file). "
              "The default accepts local clients only; use 0.0.0.0:PORT for remote ones.");
DEFINE_string(port_file, "", "if set, the bound port is written to this file");
DEFINE_string(metrics_listen, "",
              "HOST:PORT to serve Prometheus metrics on, at /metrics, e.g. 127.0.0.1:9464 "
              "(empty: off). HOST is an IP address: 127.0.0.1 for a local Prometheus, 0.0.0.0 "
              "for any. Port 0: the OS picks one (printed as \"metrics on URL\").");
DEFINE_string(verification_log, "",
              "if set, append a record of every slot ingested, torn and restored, and of each "
              "checkpoint, to this file (common/verification_log.h; for tools/chaos/chaos.py)");
DEFINE_string(metrics_port_file, "", "if set, the metrics port is written to this file");

DEFINE_int64(capacity, 65536, "slots in the replay memory (a power of two)");
DEFINE_int64(slot_size, 256, "bytes per slot including its 40-byte header (multiple of 8)");
DEFINE_int64(batch_size, 32, "transitions per pre-sampled batch");
DEFINE_int64(staging_depth, 8, "batches staged ahead of the learner (and mailbox entries)");
DEFINE_int64(param_bytes, 1 << 20, "largest parameter blob the learner may publish, bytes");
DEFINE_string(transition_spec, "", "description of the payload encoding, published to clients");
DEFINE_int64(observation_size, 0, "elements per observation (published, informational)");
DEFINE_int64(num_actions, 0, "number of discrete actions (published, informational)");
DEFINE_int64(frame_stack, 0,
             "frames stored once: slots hold frame records of stacks of this many frames "
             "(actor --frame_stack; needs a u8 --transition_spec and --observation_size "
             "dividing into frames; buffer or learner placement); 0: encoded transitions");
DEFINE_string(link_codec, "raw",
              "compress each staged batch's transitions (and frame records) on the link: raw "
              "(off), lz4[:ACCELERATION], lz4hc[:LEVEL] or zstd[:LEVEL]; a batch that would not "
              "shrink goes as it is (docs/benchmarks.md#frame-compression)");
DEFINE_int64(leases, 16,
             "actors served at once: the ring is split into this many equal leases of "
             "capacity / leases slots, one per connected actor, fixed at start (an actor writes "
             "only its lease however few are connected): set it to the actors you run");
DEFINE_int64(actor_ids, 0,
             "actor ids accepted are 0 .. actor_ids-1, one stats line each (0: --leases); more "
             "ids than leases let actors come and go under other ids, each taking a free lease; "
             "it does not change the split");
DEFINE_int64(max_actors, 0, "removed: see --leases and --actor_ids");
DEFINE_int64(actor_window, 0,
             "how far (in sequences) each actor may run ahead of its lease's ingest cursor "
             "(0, or more than a lease: the whole lease, capacity / leases); e.g. a quarter of "
             "the lease keeps most of it sampleable when its actor outpaces ingest");

DEFINE_string(sampler, "prioritized", "prioritized or uniform");
DEFINE_string(forward, "off",
              "off: stage sampled batches for a learner that trains on them (the buffer "
              "placement). priority, uniform or fifo: stage each transition once, for a learner "
              "that keeps its own replay (the hybrid placement): drawn by priority (--alpha), "
              "uniformly, or oldest first from a drop-oldest queue of --forward_queue; the "
              "learner then enforces the rate limit (--samples_per_insert must stay 0) and "
              "--min_size_to_sample does not apply");
DEFINE_int64(forward_queue, 4096,
             "--forward=fifo: the queue keeps the newest this many transitions ingested and "
             "drops older ones unforwarded (at most --capacity; the default is cut to it)");
DEFINE_double(alpha, 0.6, "prioritization exponent, in [0, 1]");
DEFINE_double(priority_epsilon, 1e-6, "added to raw priorities, > 0");
DEFINE_double(beta, 0.4, "importance-sampling exponent at the start of the annealing");
DEFINE_double(beta_final, 1.0, "importance-sampling exponent at the end of the annealing");
DEFINE_int64(beta_steps, 100000, "batches over which beta is annealed linearly");
DEFINE_int64(min_size_to_sample, 1, "no batch is staged before memory holds this many transitions");
DEFINE_double(samples_per_insert, 0, "transitions staged per transition inserted (0: no limit)");
DEFINE_double(spi_error_buffer, -1,
              "slack of --samples_per_insert, in sampled transitions; -1: max(1, 2 * "
              "samples_per_insert) * batch_size (a batch, and two batches' worth of inserts)");
DEFINE_bool(spi_block_actors, false,
            "pause ingest, and so the actors, while inserts run more than --spi_error_buffer "
            "ahead of sampling (off: actors never wait for the learner)");
DEFINE_double(update_timeout_s, 0,
              "release a staged batch without its priority update after this long "
              "(0: wait for the learner)");
DEFINE_double(max_priority, 1e6,
              "initial priorities from actors above this are clamped to it; NaN, infinite or "
              "negative ones count as no estimate (both counted)");
DEFINE_int64(max_per_lease, 256,
             "ingest: most sequences of one lease handled per step before the next lease's turn "
             "(fairness between busy leases against per-visit overhead)");
DEFINE_int64(seed, 1, "seed of the sampler's random generator");

DEFINE_string(auth_token, "",
              "token of every role without its own (prefer --auth_token_file); clients prove "
              "they hold it by challenge-response, it never crosses the wire");
DEFINE_string(auth_token_file, "", "file holding the token of every role without its own");
DEFINE_string(actor_token_file, "", "file holding the actors' token (else --auth_token_file's)");
DEFINE_string(learner_token_file, "",
              "file holding the learner's token (else --auth_token_file's)");
DEFINE_string(monitor_token_file, "",
              "file holding the monitors' token (else --auth_token_file's)");
DEFINE_bool(insecure, false,
            "start without any token: every client that reaches the server is admitted, in any "
            "role and as any actor id (for a private network or a test only)");
DEFINE_string(checkpoint_dir, "", "directory for checkpoints; restored at start when present");
DEFINE_double(checkpoint_interval_s,
              absl::ToDoubleSeconds(dreplay::server::kDefaultCheckpointInterval),
              "with --checkpoint_dir, the periodic checkpoint interval: a crash loses at most "
              "about this much ingest (0: only at shutdown and on SIGUSR1, so a crash loses "
              "everything since the start)");
DEFINE_int64(checkpoint_keep, 1,
             "checkpoints kept, newest first (replay.ckpt, replay.ckpt.1, ...); a start falls "
             "back to an older one when a newer one is damaged");
DEFINE_double(stats_interval_s, 10, "one-line stats log interval (0: off)");
DEFINE_double(heartbeat_interval_s, 1, "how often clients are probed, to drop dead ones");
DEFINE_int64(max_clients, 1024,
             "connections held at most; at least --leases + 1 learner + --max_monitors, so that "
             "every actor lease and the learner always find room");
DEFINE_int64(max_monitors, 16, "monitor connections (replay_top, exporters) held at most");

namespace dreplay::server {
namespace {

// What --help prints above the flags.
constexpr char kUsage[] =
    "the replay service of a buffer node: a prioritized replay memory exposed as RDMA "
    "regions.\n"
    "Actors insert with RDMA WRITEs, the learner READs pre-sampled batches and WRITEs "
    "priorities and parameters.\n"
    "Prints \"listening on HOST:PORT\" when ready; SIGINT/SIGTERM stop it (final checkpoint "
    "with --checkpoint_dir); SIGUSR1 writes a checkpoint.\n"
    "Exit status: 0 clean stop, 1 failure, 2 bad flag.\n"
    "Usage: replay_server [--listen=HOST:PORT] [--capacity=N] [--slot_size=B] ...";

// --forward and --forward_queue (after --sampler).
absl::Status ForwardFromFlags(const protocol::LayoutConfig& l, ReplayCoreOptions* c) {
  using protocol::ForwardMode;
  if (FLAGS_forward == "off") {
    c->sampler.forward = ForwardMode::kForwardOff;
  } else if (FLAGS_forward == "priority") {
    c->sampler.forward = ForwardMode::kForwardPriority;
    if (c->memory.mode != replay::SamplingMode::kPrioritized) {
      return FlagError("forward", FLAGS_forward, "draws by priority: leave --sampler=prioritized");
    }
  } else if (FLAGS_forward == "uniform") {
    c->sampler.forward = ForwardMode::kForwardUniform;
    if (!gflags::GetCommandLineFlagInfoOrDie("sampler").is_default &&
        c->memory.mode != replay::SamplingMode::kUniform) {
      return FlagError("forward", FLAGS_forward, "draws uniformly: drop --sampler=prioritized");
    }
    c->memory.mode = replay::SamplingMode::kUniform;
  } else if (FLAGS_forward == "fifo") {
    c->sampler.forward = ForwardMode::kForwardFifo;
  } else {
    return FlagError("forward", FLAGS_forward, "must be off, priority, uniform or fifo");
  }
  if (c->sampler.forward == ForwardMode::kForwardFifo) {
    if (gflags::GetCommandLineFlagInfoOrDie("forward_queue").is_default) {
      c->sampler.forward_queue = std::min<uint64_t>(FLAGS_forward_queue, l.capacity);
    } else {
      RETURN_IF_ERROR(CheckRange("forward_queue", FLAGS_forward_queue, 1, l.capacity));
      c->sampler.forward_queue = static_cast<uint64_t>(FLAGS_forward_queue);
    }
  } else if (!gflags::GetCommandLineFlagInfoOrDie("forward_queue").is_default) {
    return FlagError("forward_queue", absl::StrCat(FLAGS_forward_queue), "needs --forward=fifo");
  }
  if (FLAGS_forward != "off" && (FLAGS_samples_per_insert != 0 || FLAGS_spi_block_actors)) {
    return FlagError("forward", FLAGS_forward,
                     "stages each transition once: the learner enforces the rate limit, so "
                     "leave --samples_per_insert and --spi_block_actors unset");
  }
  return absl::OkStatus();
}

// Turns the flags into server options; every error names the flag.
// The replay core's options: sampling, the rate limiter, timeouts.
absl::Status CoreOptionsFromFlags(const protocol::LayoutConfig& l, ReplayCoreOptions* core) {
  ReplayCoreOptions& c = *core;
  if (FLAGS_sampler == "prioritized") {
    c.memory.mode = replay::SamplingMode::kPrioritized;
  } else if (FLAGS_sampler == "uniform") {
    c.memory.mode = replay::SamplingMode::kUniform;
  } else {
    return FlagError("sampler", FLAGS_sampler, "must be prioritized or uniform");
  }
  RETURN_IF_ERROR(ForwardFromFlags(l, &c));
  {
    absl::StatusOr<CodecOptions> codec = ParseCodecOptions(FLAGS_link_codec);
    if (!codec.ok()) return FlagError("link_codec", FLAGS_link_codec, codec.status().message());
    if (codec->kind != CodecKind::kRaw) c.sampler.link_codec = *codec;
  }
  c.memory.capacity = l.capacity;
  c.memory.alpha = FLAGS_alpha;
  c.memory.priority_epsilon = FLAGS_priority_epsilon;
  c.memory.seed = static_cast<uint64_t>(FLAGS_seed);
  c.sampler.beta.initial = FLAGS_beta;
  c.sampler.beta.final = FLAGS_beta_final;
  c.sampler.beta.steps = static_cast<uint64_t>(FLAGS_beta_steps);
  replay::RateLimiterOptions& r = c.sampler.rate_limiter;
  r.min_size_to_sample = static_cast<uint64_t>(FLAGS_min_size_to_sample);
  r.samples_per_insert = FLAGS_samples_per_insert;
  r.error_buffer = FLAGS_spi_error_buffer != -1
                       ? FLAGS_spi_error_buffer
                       : std::max(1.0, 2 * FLAGS_samples_per_insert) * l.batch_size;
  r.block_inserts = FLAGS_spi_block_actors;
  if (r.block_inserts && r.samples_per_insert == 0) {
    return FlagError("spi_block_actors", "true", "needs --samples_per_insert > 0");
  }
  if (absl::Status s = r.Validate(l.batch_size); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--", s.message()));
  }
  ASSIGN_OR_RETURN(c.update_timeout, Seconds("update_timeout_s", FLAGS_update_timeout_s, true));
  if (!(FLAGS_max_priority > 0) || FLAGS_max_priority > 3e38) {
    return FlagError("max_priority", absl::StrCat(FLAGS_max_priority),
                     "must be > 0 and a finite float");
  }
  c.ingest.max_priority = static_cast<float>(FLAGS_max_priority);
  RETURN_IF_ERROR(CheckRange("max_per_lease", FLAGS_max_per_lease, 1, c.ingest.max_per_step));
  c.ingest.max_per_lease = static_cast<uint32_t>(FLAGS_max_per_lease);
  {
    const absl::Status s = c.Validate();
    if (!s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bad replay flag (--alpha, --priority_epsilon, --beta, --beta_final, --beta_steps): ",
          s.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ReplayServerOptions> OptionsFromFlags() {
  ReplayServerOptions o;
  if (FLAGS_max_actors != 0) {
    return FlagError("max_actors", absl::StrCat(FLAGS_max_actors),
                     "was removed: --leases sets how many actors are served at once (it splits "
                     "the ring), --actor_ids which ids they may have (default --leases)");
  }
  {
    const absl::Status s = protocol::ParseHostPort(FLAGS_listen, &o.host, &o.port);
    if (!s.ok()) return FlagError("listen", FLAGS_listen, s.message());
  }
  RETURN_IF_ERROR(
      CheckRange("capacity", FLAGS_capacity, protocol::kMinCapacity, protocol::kMaxCapacity));
  RETURN_IF_ERROR(CheckRange("slot_size", FLAGS_slot_size, 1, protocol::kMaxSlotSize));
  RETURN_IF_ERROR(CheckRange("batch_size", FLAGS_batch_size, 1, protocol::kMaxBatchSize));
  RETURN_IF_ERROR(CheckRange("staging_depth", FLAGS_staging_depth, 1, protocol::kMaxStagingDepth));
  RETURN_IF_ERROR(CheckRange("param_bytes", FLAGS_param_bytes, 0, protocol::kMaxParamBytes));
  RETURN_IF_ERROR(CheckRange("observation_size", FLAGS_observation_size, 0, UINT32_MAX));
  RETURN_IF_ERROR(CheckRange("num_actions", FLAGS_num_actions, 0, UINT32_MAX));
  RETURN_IF_ERROR(CheckRange("leases", FLAGS_leases, 1, protocol::kMaxLeases));
  RETURN_IF_ERROR(CheckRange("actor_ids", FLAGS_actor_ids, 0, protocol::kMaxActors));
  RETURN_IF_ERROR(CheckRange("actor_window", FLAGS_actor_window, 0, FLAGS_capacity));
  RETURN_IF_ERROR(CheckRange("beta_steps", FLAGS_beta_steps, 0, INT64_MAX));
  RETURN_IF_ERROR(CheckRange("min_size_to_sample", FLAGS_min_size_to_sample, 1, FLAGS_capacity));
  RETURN_IF_ERROR(CheckRange("seed", FLAGS_seed, 0, INT64_MAX));
  protocol::LayoutConfig& l = o.layout;
  l.capacity = static_cast<uint64_t>(FLAGS_capacity);
  l.slot_size = static_cast<uint32_t>(FLAGS_slot_size);
  l.batch_size = static_cast<uint32_t>(FLAGS_batch_size);
  l.staging_depth = static_cast<uint32_t>(FLAGS_staging_depth);
  l.param_bytes = static_cast<uint64_t>(FLAGS_param_bytes);
  l.observation_size = static_cast<uint32_t>(FLAGS_observation_size);
  l.num_actions = static_cast<uint32_t>(FLAGS_num_actions);
  l.leases = static_cast<uint32_t>(FLAGS_leases);
  l.max_actors = static_cast<uint32_t>(FLAGS_actor_ids > 0 ? FLAGS_actor_ids : FLAGS_leases);
  l.actor_window = static_cast<uint64_t>(FLAGS_actor_window);
  RETURN_IF_ERROR(CheckRange("frame_stack", FLAGS_frame_stack, 0, protocol::kMaxFrameStack));
  l.frame_stack = static_cast<uint32_t>(FLAGS_frame_stack);
  {
    const absl::Status s = l.set_spec(FLAGS_transition_spec);
    if (!s.ok()) return FlagError("transition_spec", FLAGS_transition_spec, s.message());
  }
  {
    const absl::Status s = l.Validate();  // its messages name the field: the flag
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("--", s.message()));
  }

  RETURN_IF_ERROR(CoreOptionsFromFlags(l, &o.core));

  ASSIGN_OR_RETURN(o.auth_token, ReadAuthToken(FLAGS_auth_token, FLAGS_auth_token_file,
                                               EmptyTokenFile::kRefused));
  for (const auto& [flag, file, token] :
       {std::tuple<const char*, const std::string*, std::string*>{
            "auth_token_file", &FLAGS_auth_token_file, &o.auth_token},
        {"actor_token_file", &FLAGS_actor_token_file, &o.actor_token},
        {"learner_token_file", &FLAGS_learner_token_file, &o.learner_token},
        {"monitor_token_file", &FLAGS_monitor_token_file, &o.monitor_token}}) {
    if (token != &o.auth_token) {
      ASSIGN_OR_RETURN(*token, ReadAuthToken("", *file, EmptyTokenFile::kRefused, flag));
    }
    if (token->size() > protocol::kMaxAuthTokenBytes) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, ": the token is ", token->size(),
                                                     " bytes, more than ",
                                                     protocol::kMaxAuthTokenBytes));
    }
    if (!token->empty() && token->size() < protocol::kMinAuthTokenBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": the token is ", token->size(), " bytes, fewer than ",
                       protocol::kMinAuthTokenBytes, " (make one with: openssl rand -hex 32)"));
    }
  }
  if (!o.authenticated() && !FLAGS_insecure) {
    return absl::InvalidArgumentError(
        "no token: give --auth_token_file (or per-role token files), or --insecure to admit "
        "every client that reaches the server");
  }
  if (o.authenticated() && FLAGS_insecure) {
    return absl::InvalidArgumentError("--insecure with a token: give one or the other");
  }
  RETURN_IF_ERROR(CheckRange("max_monitors", FLAGS_max_monitors, 0, UINT32_MAX));
  o.max_monitors = static_cast<uint32_t>(FLAGS_max_monitors);
  RETURN_IF_ERROR(CheckRange("max_clients", FLAGS_max_clients, 1, UINT32_MAX));
  o.max_clients = static_cast<uint32_t>(FLAGS_max_clients);
  o.checkpoint_dir = FLAGS_checkpoint_dir;
  RETURN_IF_ERROR(CheckRange("checkpoint_keep", FLAGS_checkpoint_keep, 1, kMaxCheckpointKeep));
  o.checkpoint_keep = static_cast<uint32_t>(FLAGS_checkpoint_keep);
  ASSIGN_OR_RETURN(o.checkpoint_interval,
                   Seconds("checkpoint_interval_s", FLAGS_checkpoint_interval_s, true));
  // The default interval applies only with a directory; an explicit one
  // without a directory is a mistake.
  if (o.checkpoint_dir.empty() &&
      !gflags::GetCommandLineFlagInfoOrDie("checkpoint_interval_s").is_default) {
    return FlagError("checkpoint_interval_s", std::to_string(FLAGS_checkpoint_interval_s),
                     "needs --checkpoint_dir");
  }
  ASSIGN_OR_RETURN(o.stats_interval, Seconds("stats_interval_s", FLAGS_stats_interval_s, true));
  ASSIGN_OR_RETURN(o.heartbeat_interval,
                   Seconds("heartbeat_interval_s", FLAGS_heartbeat_interval_s, false));
  RETURN_IF_ERROR(o.Validate());
  return o;
}

// The metrics endpoint's options, or nothing without --metrics_listen.
absl::StatusOr<std::optional<MetricsHttpOptions>> MetricsOptionsFromFlags() {
  if (FLAGS_metrics_listen.empty()) return std::optional<MetricsHttpOptions>();
  MetricsHttpOptions o;
  absl::Status s = protocol::ParseHostPort(FLAGS_metrics_listen, &o.host, &o.port);
  if (s.ok()) s = o.Validate();
  if (!s.ok()) return FlagError("metrics_listen", FLAGS_metrics_listen, s.message());
  return std::optional<MetricsHttpOptions>(std::move(o));
}

int Run(const BinaryMain& binary) {
  ServerRunOptions run;
  absl::StatusOr<ReplayServerOptions> options = OptionsFromFlags();
  absl::StatusOr<verbs::ProviderOptions> provider_options =
      options.ok() ? verbs::ProviderOptionsFromFlags(verbs::ProviderFlagsFromCommandLine())
                   : options.status();
  if (!provider_options.ok()) return binary.BadFlag(provider_options.status());
  absl::StatusOr<std::optional<MetricsHttpOptions>> metrics_options = MetricsOptionsFromFlags();
  if (!metrics_options.ok()) return binary.BadFlag(metrics_options.status());
  if (!FLAGS_metrics_port_file.empty() && FLAGS_metrics_listen.empty()) {
    return binary.BadFlag(
        FlagError("metrics_port_file", FLAGS_metrics_port_file, "needs --metrics_listen"));
  }
  run.server = *std::move(options);
  run.server.qp.rnr_retry = FLAGS_rnr_retry;  // checked by ProviderOptionsFromFlags
  run.provider = *std::move(provider_options);
  run.metrics = *std::move(metrics_options);
  run.port_file = FLAGS_port_file;
  run.metrics_port_file = FLAGS_metrics_port_file;
  run.verification_log = FLAGS_verification_log;
  // Before any thread starts: they all inherit the blocked signals.
  StopSignals signals(StopSignals::Mode::kBlockAndWait);
  const absl::Status status = RunServer(run, signals);
  if (!status.ok()) return binary.Failure(status);
  return kExitSuccess;
}

}  // namespace
}  // namespace dreplay::server

int main(int argc, char** argv) {
  dreplay::BinaryMain binary({"replay_server", dreplay::server::kUsage, "replay_server"});
  if (std::optional<int> done = binary.Init(argc, argv)) return *done;
  return dreplay::server::Run(binary);
}
