// Copyright dreplay authors.

#include "tools/peer_bench_report.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"

namespace dreplay::tools {
namespace {

// The total of `system` at `payload_bytes`, or nothing.
std::optional<double> TotalOf(const std::vector<PeerCaseResult>& cases, uint32_t payload_bytes,
                              PeerSystem system) {
  for (const PeerCaseResult& c : cases) {
    if (c.payload_bytes == payload_bytes && c.system == system) return c.total_per_s();
  }
  return std::nullopt;
}

std::optional<double> Ratio(std::optional<double> dreplay, std::optional<double> other) {
  if (!dreplay || !other || !(*other > 0)) return std::nullopt;
  return *dreplay / *other;
}

std::string RatioText(std::optional<double> r) {
  return r ? absl::StrFormat("%.2fx", *r) : std::string("-");
}

std::string ConfigJson(const PeerBenchOptions& o, const std::vector<int>& cpus) {
  std::vector<std::string> sizes;
  for (uint32_t p : o.payload_bytes) {
    const PeerCase c = CaseFor(o, p);
    sizes.push_back(
        absl::StrFormat("{\"payload_bytes\":%d,\"insert_batch\":%d,\"capacity\":%d,\"prefill\":%d}",
                        p, c.insert_batch, c.capacity, c.prefill));
  }
  return absl::StrFormat(
      "{\"writers\":%d,\"batch_size\":%d,\"warmup_s\":%.3f,\"duration_s\":%.3f,\"cpus\":[%s],"
      "\"sizes\":[%s]}",
      o.writers, o.batch_size, absl::ToDoubleSeconds(o.warmup), absl::ToDoubleSeconds(o.duration),
      absl::StrJoin(cpus, ","), absl::StrJoin(sizes, ","));
}

std::string Json(const PeerBenchOptions& o, const std::vector<int>& cpus,
                 const std::vector<PeerCaseResult>& cases) {
  std::vector<std::string> rows;
  for (const PeerCaseResult& c : cases) {
    rows.push_back(absl::StrFormat(
        "{\"payload_bytes\":%d,\"system\":\"%s\",\"seconds\":%.3f,\"inserted_per_s\":%.1f,"
        "\"sampled_per_s\":%.1f,\"total_per_s\":%.1f}",
        c.payload_bytes, PeerSystemName(c.system), c.seconds, c.inserted_per_s, c.sampled_per_s,
        c.total_per_s()));
  }
  std::vector<std::string> ratios;
  for (const PeerRatios& r : PeerRatiosOf(cases)) {
    std::vector<std::string> fields;
    if (r.over_redis)
      fields.push_back(absl::StrFormat("\"dreplay_over_redis\":%.4f", *r.over_redis));
    if (r.over_grpc) fields.push_back(absl::StrFormat("\"dreplay_over_grpc\":%.4f", *r.over_grpc));
    ratios.push_back(absl::StrCat("\"", r.payload_bytes, "\":{", absl::StrJoin(fields, ","), "}"));
  }
  return absl::StrCat("{\"config\":", ConfigJson(o, cpus), ",\"cases\":[", absl::StrJoin(rows, ","),
                      "],\"ratios\":{", absl::StrJoin(ratios, ","), "}}\n");
}

std::string Text(const PeerBenchOptions& o, const std::vector<int>& cpus,
                 const std::vector<PeerCaseResult>& cases) {
  std::string out = absl::StrFormat(
      "peer_bench: %d writers, batches of %d, %.1f s window after %.1f s warmup, every arm on "
      "CPUs %s\n",
      o.writers, o.batch_size, absl::ToDoubleSeconds(o.duration), absl::ToDoubleSeconds(o.warmup),
      absl::StrJoin(cpus, ","));
  absl::StrAppendFormat(&out, "%10s  %-8s  %14s  %14s  %14s\n", "payload B", "system", "inserted/s",
                        "sampled/s", "total/s");
  for (const PeerCaseResult& c : cases) {
    absl::StrAppendFormat(&out, "%10d  %-8s  %14.0f  %14.0f  %14.0f\n", c.payload_bytes,
                          PeerSystemName(c.system), c.inserted_per_s, c.sampled_per_s,
                          c.total_per_s());
  }
  for (const PeerRatios& r : PeerRatiosOf(cases)) {
    absl::StrAppendFormat(&out, "%10d  dreplay / redis %s, dreplay / grpc %s\n", r.payload_bytes,
                          RatioText(r.over_redis), RatioText(r.over_grpc));
  }
  return out;
}

}  // namespace

std::vector<PeerRatios> PeerRatiosOf(const std::vector<PeerCaseResult>& cases) {
  std::vector<PeerRatios> out;
  for (const PeerCaseResult& c : cases) {
    if (c.system != PeerSystem::kDreplay) continue;
    PeerRatios r;
    r.payload_bytes = c.payload_bytes;
    r.over_redis = Ratio(c.total_per_s(), TotalOf(cases, c.payload_bytes, PeerSystem::kRedis));
    r.over_grpc = Ratio(c.total_per_s(), TotalOf(cases, c.payload_bytes, PeerSystem::kGrpc));
    out.push_back(r);
  }
  return out;
}

std::string FormatPeerBenchReport(const PeerBenchOptions& options, const std::vector<int>& cpus,
                                  const std::vector<PeerCaseResult>& cases, bool json) {
  return json ? Json(options, cpus, cases) : Text(options, cpus, cases);
}

}  // namespace dreplay::tools
