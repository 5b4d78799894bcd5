// Copyright dreplay authors.
//
// replay_bench_report.h: what tools/bench/replay_bench prints after its rounds, as
// text or as one JSON object (config.json).
//
// Headline figures come from the median round (the lower middle) of
// inserted/s (sampled/s when no actor runs); each ratio divides the
// medians of its two figures over rounds.
//
// JSON keys: config {provider, actors, shared_actor_provider, payload_bytes,
// payload_pad_bytes, samples_per_insert, learner_cache, slot_size, max_batch, capacity,
// actor_window, batch_size, staging_depth, learner, link, prefill, duration_s, rounds,
// hardware_threads}, result (a run: seconds, inserted_per_s, committed_per_s, bytes_in_per_s,
// insert_gbps, sampled_per_s, batches_per_s, bytes_out_per_s,
// insert_latency / batch_wait / batch_read {count, p50_us, p99_us, mean_us,
// max_us}, server {inserted, torn_slots, overrun_slots,
// sample_copy_rejects, staging_stalls, mailbox_rejects}, writer_reconnects,
// reader_torn, reader_not_staged, samples_per_insert (achieved: sampled /
// inserted), link_bytes {experience, metadata, polling, priorities, params,
// control, total} (the learner's session, client/link_bytes.h),
// transitions_fetched, distinct_transitions_fetched); with the baselines nolink (a run) and
// sampled_ratio_vs_nolink, tcp {message_bytes, messages_per_s, gbps} and
// insert_ratio_vs_tcp; per_round [{inserted_per_s, sampled_per_s,
// insert_gbps, nolink_sampled_per_s, tcp_gbps}].
//
// Pure; thread-safe.

#ifndef DREPLAY_TOOLS_BENCH_REPLAY_BENCH_REPORT_H_
#define DREPLAY_TOOLS_BENCH_REPLAY_BENCH_REPORT_H_

#include <string>
#include <vector>

#include "tools/bench/replay_bench_config.h"
#include "tools/bench/replay_bench_run.h"

namespace dreplay::tools {

// The report of `rounds` (at least one) in config.json's form,
// newline-terminated.
std::string FormatReplayBenchReport(const ReplayBenchConfig& config,
                                    const std::vector<ReplayBenchRound>& rounds);

}  // namespace dreplay::tools

#endif  // DREPLAY_TOOLS_BENCH_REPLAY_BENCH_REPORT_H_
