// Copyright dreplay authors.
//
// peer_bench_dreplay.h: the dreplay arm of tools/bench/peer_bench. It is one
// tools/bench/replay_bench run (replay_bench_run.h): a ReplayServer in this
// process on the soft provider over loopback; c.writers actor threads, each
// with its own provider (its own NIC thread) and queue pair, inserting with
// an ExperienceWriter into its own lease (c.insert_batch transitions per
// Flush: slot and commit WRITEs, no atomics); one learner thread with a
// BatchReader (pipelined READs of the batches the server staged by
// priority, 8 staging slots) and a PriorityWriter (a new random priority per
// transition, written to the server's mailbox).
//
// The transport is the soft provider's same-host shared mapping
// (SoftTransport::kAuto; PeerSystem::kDreplay) or loopback TCP
// (SoftTransport::kTcp; PeerSystem::kDreplayTcp).
//
// "Inserted" is the server's ingest (transitions put into its memory),
// "sampled" the transitions in the batches the learner received. The
// prefill goes through a writer before the clock starts.
//
// Blocking; owns the server and the threads and joins them before it
// returns.

#ifndef DREPLAY_TOOLS_BENCH_PEER_BENCH_DREPLAY_H_
#define DREPLAY_TOOLS_BENCH_PEER_BENCH_DREPLAY_H_

#include "absl/status/statusor.h"
#include "tools/bench/peer_bench_config.h"
#include "tools/bench/replay_bench_config.h"
#include "verbs/options.h"

namespace dreplay::tools {

// The replay_bench configuration of case `c`. InvalidArgument when the
// geometry does not fit the wire layout.
absl::StatusOr<ReplayBenchConfig> DreplayConfigFor(const PeerCase& c,
                                                   verbs::SoftTransport transport);

// One run of the dreplay arm. The first failure of the server or of a
// client (named).
absl::StatusOr<PeerCaseResult> RunDreplayArm(const PeerCase& c, verbs::SoftTransport transport);

}  // namespace dreplay::tools

#endif  // DREPLAY_TOOLS_BENCH_PEER_BENCH_DREPLAY_H_
