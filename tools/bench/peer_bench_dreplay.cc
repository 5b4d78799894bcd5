// Copyright dreplay authors.

#include "tools/bench/peer_bench_dreplay.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "protocol/layout.h"
#include "tools/bench/replay_bench_run.h"

namespace dreplay::tools {
namespace {

constexpr uint32_t kStagingDepth = 8;
constexpr uint64_t kParamBytes = 4096;

}  // namespace

absl::StatusOr<ReplayBenchConfig> DreplayConfigFor(const PeerCase& c,
                                                   verbs::SoftTransport transport) {
  ReplayBenchConfig r;
  r.provider.kind = verbs::ProviderKind::kSoft;
  r.provider.soft_transport = transport;
  r.actors = c.writers;
  r.payload_bytes = c.payload_bytes;
  r.max_batch = c.insert_batch;
  protocol::LayoutConfig& l = r.layout;
  l.slot_size = SlotSizeFor(c.payload_bytes);
  l.capacity = c.capacity;
  l.actor_window = std::max<uint64_t>(c.capacity / 4, 1);
  l.batch_size = c.batch_size;
  l.staging_depth = kStagingDepth;
  l.param_bytes = kParamBytes;
  l.max_actors = static_cast<uint32_t>(c.writers);
  l.leases = l.max_actors;  // one lease per writer
  RETURN_IF_ERROR(l.set_spec(absl::StrCat("peer_bench ", c.payload_bytes, "B")));
  if (const absl::Status s = l.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("dreplay geometry: ", s.message()));
  }
  if (c.insert_batch > protocol::ActorWindow(l)) {
    return absl::InvalidArgumentError(absl::StrCat("insert_batch=", c.insert_batch,
                                                   " exceeds the actor window of ",
                                                   protocol::ActorWindow(l)));
  }
  r.learner = true;
  // replay_bench's defaults for the polling back-offs.
  r.reader_retry = absl::Microseconds(20);
  r.reader_retry_max = absl::Microseconds(2000);
  r.core_max_sleep = absl::Microseconds(1000);
  r.core_spin_steps = 64;
  r.link_spec = "none";
  r.prefill = c.prefill;
  r.duration = c.duration;
  r.warmup = c.warmup;
  r.read_probes = 0;
  r.alpha = c.alpha;
  r.seed = c.seed;
  return r;
}

absl::StatusOr<PeerCaseResult> RunDreplayArm(const PeerCase& c, verbs::SoftTransport transport) {
  ASSIGN_OR_RETURN(ReplayBenchConfig config, DreplayConfigFor(c, transport));
  ASSIGN_OR_RETURN(ReplayRunResult run, RunReplayBenchOnce(config));
  PeerCaseResult r;
  r.payload_bytes = c.payload_bytes;
  r.system =
      transport == verbs::SoftTransport::kTcp ? PeerSystem::kDreplayTcp : PeerSystem::kDreplay;
  r.seconds = run.seconds;
  r.cpu_seconds = run.cpu_seconds;
  r.inserted_per_s = run.inserted_per_s;
  r.sampled_per_s = run.sampled_per_s;
  return r;
}

}  // namespace dreplay::tools
