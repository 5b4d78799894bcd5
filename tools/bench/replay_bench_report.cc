// Copyright dreplay authors.

#include "tools/bench/replay_bench_report.h"

#include <algorithm>
#include <functional>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"

namespace dreplay::tools {
namespace {

double Micros(absl::Duration d) { return absl::ToDoubleMicroseconds(d); }

// The index of the round whose `metric` is the median (the lower middle).
size_t MedianRound(const std::vector<ReplayBenchRound>& rounds,
                   const std::function<double(const ReplayBenchRound&)>& metric) {
  std::vector<size_t> order(rounds.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return metric(rounds[a]) < metric(rounds[b]); });
  return order[(order.size() - 1) / 2];
}

// The headline figures over rounds.
struct Medians {
  const ReplayRunResult* main = nullptr;
  const ReplayRunResult* nolink = nullptr;  // with the nolink baseline
  double link_ratio = 0;
  const TcpStreamResult* tcp = nullptr;  // with the tcp baseline
  double tcp_ratio = 0;
};

Medians MediansOf(const ReplayBenchConfig& c, const std::vector<ReplayBenchRound>& rounds) {
  using Round = ReplayBenchRound;
  Medians m;
  const bool inserting = c.actors > 0;
  m.main = &rounds[MedianRound(rounds, [&](const Round& r) {
              return inserting ? r.main.inserted_per_s : r.main.sampled_per_s;
            })].main;
  const double sampled =
      rounds[MedianRound(rounds, [](const Round& r) { return r.main.sampled_per_s; })]
          .main.sampled_per_s;
  const double insert_gbps =
      rounds[MedianRound(rounds, [](const Round& r) { return r.main.insert_gbps; })]
          .main.insert_gbps;
  if (c.nolink_baseline) {
    m.nolink = &*rounds[MedianRound(rounds, [](const Round& r) { return r.nolink->sampled_per_s; })]
                     .nolink;
    if (m.nolink->sampled_per_s > 0) m.link_ratio = sampled / m.nolink->sampled_per_s;
  }
  if (c.tcp_baseline) {
    m.tcp = &*rounds[MedianRound(rounds, [](const Round& r) { return r.tcp->gbps; })].tcp;
    if (m.tcp->gbps > 0) m.tcp_ratio = insert_gbps / m.tcp->gbps;
  }
  return m;
}

std::string LatencyJson(const LatencyHistogram& h) {
  return absl::StrFormat(
      "{\"count\":%d,\"p50_us\":%.2f,\"p99_us\":%.2f,\"mean_us\":%.2f,\"max_us\":%.2f}", h.count(),
      Micros(h.Percentile(0.5)), Micros(h.Percentile(0.99)), Micros(h.mean()), Micros(h.max()));
}

std::string ResultJson(const ReplayRunResult& r) {
  const protocol::StatsBlock& s = r.server;
  return absl::StrFormat(
      "{\"connect_s\":%.3f,\"seconds\":%.3f,\"inserted_per_s\":%.1f,\"committed_per_s\":%.1f,"
      "\"bytes_in_per_s\":%.1f,\"insert_gbps\":%.4f,\"sampled_per_s\":%.1f,"
      "\"batches_per_s\":%.1f,\"bytes_out_per_s\":%.1f,\"insert_latency\":%s,"
      "\"batch_wait\":%s,\"batch_read\":%s,\"server\":{\"inserted\":%d,\"torn_slots\":%d,"
      "\"overrun_slots\":%d,\"sample_copy_rejects\":%d,"
      "\"staging_stalls\":%d,\"mailbox_rejects\":%d},\"writer_reconnects\":%d,"
      "\"reader_torn\":%d,\"reader_not_staged\":%d,\"samples_per_insert\":%.4f,"
      "\"link_bytes\":{\"experience\":%d,\"metadata\":%d,\"polling\":%d,\"priorities\":%d,"
      "\"params\":%d,\"control\":%d,\"total\":%d},\"transitions_fetched\":%d,"
      "\"distinct_transitions_fetched\":%d}",
      r.connect_seconds, r.seconds, r.inserted_per_s, r.committed_per_s, r.bytes_in_per_s,
      r.insert_gbps, r.sampled_per_s, r.batches_per_s, r.bytes_out_per_s,
      LatencyJson(r.insert_latency), LatencyJson(r.batch_wait), LatencyJson(r.batch_read),
      s.inserted, s.torn_slots, s.overrun_slots, s.sample_copy_rejects, s.staging_stalls,
      s.mailbox_rejects, r.writer_reconnects, r.reader_torn, r.reader_not_staged,
      r.samples_per_insert, r.link_bytes.experience, r.link_bytes.metadata, r.link_bytes.polling,
      r.link_bytes.priorities, r.link_bytes.params, r.link_bytes.control, r.link_bytes.total(),
      r.transitions_fetched, r.distinct_transitions_fetched);
}

// "in process", or the --connect address.
std::string ServerWhere(const ReplayBenchConfig& c) {
  return c.remote_host.empty() ? std::string("in process")
                               : absl::StrCat(c.remote_host, ":", c.remote_port);
}

std::string ConfigJson(const ReplayBenchConfig& c) {
  return absl::StrFormat(
      "{\"provider\":\"%s\",\"actors\":%d,\"shared_actor_provider\":%s,"
      "\"payload_bytes\":%d,\"payload_pad_bytes\":%d,\"samples_per_insert\":%.3f,"
      "\"learner_cache\":%s,\"slot_size\":%d,\"max_batch\":%d,\"capacity\":%d,"
      "\"actor_window\":%d,\"batch_size\":%d,\"staging_depth\":%d,\"learner\":%s,"
      "\"link\":\"%s\",\"prefill\":%d,\"duration_s\":%.3f,\"rounds\":%d,"
      "\"hardware_threads\":%d,\"stalled_actors\":%d,\"actor_threads\":%d,\"leases\":%d,"
      "\"server\":\"%s\"}",
      verbs::ProviderKindName(c.provider.kind), c.actors,
      c.shared_actor_provider ? "true" : "false", c.payload_bytes, c.payload_pad_bytes,
      c.samples_per_insert, c.learner_cache ? "true" : "false", c.layout.slot_size, c.max_batch,
      c.layout.capacity, protocol::ActorWindow(c.layout), c.layout.batch_size,
      c.layout.staging_depth, c.learner ? "true" : "false", c.link_spec, c.prefill,
      absl::ToDoubleSeconds(c.duration), c.rounds, std::thread::hardware_concurrency(),
      c.stalled_actors, c.actor_threads, c.layout.leases, ServerWhere(c));
}

std::string Json(const ReplayBenchConfig& c, const std::vector<ReplayBenchRound>& rounds) {
  const Medians m = MediansOf(c, rounds);
  std::string json =
      absl::StrFormat("{\"config\":%s,\"result\":%s", ConfigJson(c), ResultJson(*m.main));
  if (m.nolink != nullptr) {
    absl::StrAppendFormat(&json, ",\"nolink\":%s,\"sampled_ratio_vs_nolink\":%.4f",
                          ResultJson(*m.nolink), m.link_ratio);
  }
  if (m.tcp != nullptr) {
    absl::StrAppendFormat(&json,
                          ",\"tcp\":{\"message_bytes\":%d,\"messages_per_s\":%.1f,"
                          "\"gbps\":%.4f},\"insert_ratio_vs_tcp\":%.4f",
                          m.tcp->message_bytes, m.tcp->messages_per_s, m.tcp->gbps, m.tcp_ratio);
  }
  json += ",\"per_round\":[";
  for (size_t i = 0; i < rounds.size(); ++i) {
    const ReplayBenchRound& r = rounds[i];
    absl::StrAppendFormat(&json,
                          "%s{\"inserted_per_s\":%.1f,\"sampled_per_s\":%.1f,"
                          "\"insert_gbps\":%.4f",
                          i == 0 ? "" : ",", r.main.inserted_per_s, r.main.sampled_per_s,
                          r.main.insert_gbps);
    if (r.nolink)
      absl::StrAppendFormat(&json, ",\"nolink_sampled_per_s\":%.1f", r.nolink->sampled_per_s);
    if (r.tcp) absl::StrAppendFormat(&json, ",\"tcp_gbps\":%.4f", r.tcp->gbps);
    json += "}";
  }
  return json + "]}\n";
}

std::string Rate(double per_s) {
  if (per_s >= 1e6) return absl::StrFormat("%.3f M", per_s / 1e6);
  if (per_s >= 1e3) return absl::StrFormat("%.1f k", per_s / 1e3);
  return absl::StrFormat("%.1f", per_s);
}

std::string LatencyText(const LatencyHistogram& h) {
  if (h.count() == 0) return "-";
  return absl::StrFormat("p50 %.1f us  p99 %.1f us  (mean %.1f, max %.1f, n=%d)",
                         Micros(h.Percentile(0.5)), Micros(h.Percentile(0.99)), Micros(h.mean()),
                         Micros(h.max()), h.count());
}

std::string ResultText(const ReplayBenchConfig& c, const ReplayRunResult& r) {
  std::string out;
  const protocol::StatsBlock& s = r.server;
  absl::StrAppendFormat(&out,
                        "  inserted      %s transitions/s (actors committed %s/s)  %.1f MB/s in  "
                        "(%.3f Gb/s of slots)\n",
                        Rate(r.inserted_per_s), Rate(r.committed_per_s), r.bytes_in_per_s / 1e6,
                        r.insert_gbps);
  absl::StrAppendFormat(&out,
                        "  sampled       %s transitions/s to the learner (%.0f batches/s)  "
                        "%.1f MB/s out\n",
                        Rate(r.sampled_per_s), r.batches_per_s, r.bytes_out_per_s / 1e6);
  const std::string at_once =
      c.actor_threads > 0 ? absl::StrCat(std::max(1, c.connect_in_flight / c.actor_threads),
                                         " at once per actor thread")
                          : absl::StrCat("actors ", std::max(1, c.connect_in_flight), " at once");
  absl::StrAppendFormat(
      &out, "  connect       %.2f s  [%d clients: handshakes, keys, writers; %s]\n",
      r.connect_seconds, c.actors + c.stalled_actors + (c.learner ? 1 : 0), at_once);
  absl::StrAppendFormat(&out, "  insert        %s  [reserve -> commit of %d transitions]\n",
                        LatencyText(r.insert_latency), c.max_batch);
  absl::StrAppendFormat(&out, "  batch wait    %s  [learner's Next(), READs pipelined]\n",
                        LatencyText(r.batch_wait));
  absl::StrAppendFormat(&out, "  batch READ    %s  [one %d-byte staging slot, alone]\n",
                        LatencyText(r.batch_read), protocol::StagingSlotStride(c.layout));
  absl::StrAppendFormat(&out,
                        "  server        torn %d  overrun %d  copy_rejects %d  "
                        "staging_stalls %d  (reader: %d torn READs, %d early READs; writers: %d "
                        "reconnects)\n",
                        s.torn_slots, s.overrun_slots, s.sample_copy_rejects, s.staging_stalls,
                        r.reader_torn, r.reader_not_staged, r.writer_reconnects);
  return out;
}

std::string ConfigText(const ReplayBenchConfig& c) {
  return absl::StrFormat(
      "replay_bench: provider %s, %d actors x %d-transition inserts%s (%d stalled, %d actor "
      "threads), payload %d B (slot %d B), capacity %d in %d leases (actor window %d), batch %d x "
      "depth %d, learner %s (link %s), server %s, %.1f s x %d rounds on %d hardware threads\n",
      verbs::ProviderKindName(c.provider.kind), c.actors, c.max_batch,
      c.shared_actor_provider ? " (one shared provider)" : "", c.stalled_actors, c.actor_threads,
      c.payload_bytes, c.layout.slot_size, c.layout.capacity, c.layout.leases,
      protocol::ActorWindow(c.layout), c.layout.batch_size, c.layout.staging_depth,
      c.learner ? "on" : "off", c.link_spec, ServerWhere(c), absl::ToDoubleSeconds(c.duration),
      c.rounds, std::thread::hardware_concurrency());
}

std::string RoundsText(const std::vector<ReplayBenchRound>& rounds) {
  std::string text;
  for (size_t i = 0; i < rounds.size(); ++i) {
    const ReplayBenchRound& r = rounds[i];
    absl::StrAppendFormat(&text, "round %d: inserted %s/s  sampled %s/s  insert %.3f Gb/s", i + 1,
                          Rate(r.main.inserted_per_s), Rate(r.main.sampled_per_s),
                          r.main.insert_gbps);
    if (r.nolink)
      absl::StrAppend(&text, "  sampled without link ", Rate(r.nolink->sampled_per_s), "/s");
    if (r.tcp) absl::StrAppendFormat(&text, "  tcp %.3f Gb/s", r.tcp->gbps);
    text += "\n";
  }
  return text;
}

std::string Text(const ReplayBenchConfig& c, const std::vector<ReplayBenchRound>& rounds) {
  const Medians m = MediansOf(c, rounds);
  std::string text = ConfigText(c);
  if (c.rounds > 1) text += "median round:\n";
  text += ResultText(c, *m.main);
  if (m.nolink != nullptr) {
    absl::StrAppend(&text, "without the link (median round):\n", ResultText(c, *m.nolink));
    absl::StrAppendFormat(&text, "  ratio sampled/s with link %s / without: %.3f\n", c.link_spec,
                          m.link_ratio);
  }
  if (m.tcp != nullptr) {
    absl::StrAppendFormat(&text,
                          "tcp loopback stream of %d-byte messages: %s msgs/s  %.3f Gb/s\n"
                          "  ratio insert bandwidth / tcp: %.3f\n",
                          m.tcp->message_bytes, Rate(m.tcp->messages_per_s), m.tcp->gbps,
                          m.tcp_ratio);
  }
  if (c.rounds > 1) text += RoundsText(rounds);
  return text;
}

}  // namespace

std::string FormatReplayBenchReport(const ReplayBenchConfig& config,
                                    const std::vector<ReplayBenchRound>& rounds) {
  return config.json ? Json(config, rounds) : Text(config, rounds);
}

}  // namespace dreplay::tools
