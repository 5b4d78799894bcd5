// Copyright dreplay authors.

#include "tools/bench/peer_bench_report.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"

namespace dreplay::tools {
namespace {

const PeerCaseResult* Find(const std::vector<PeerCaseResult>& cases, uint32_t payload_bytes,
                           PeerSystem system) {
  for (const PeerCaseResult& c : cases) {
    if (c.payload_bytes == payload_bytes && c.system == system) return &c;
  }
  return nullptr;
}

std::optional<double> Ratio(double dreplay, double other) {
  if (!(other > 0)) return std::nullopt;
  return dreplay / other;
}

std::string RatioText(std::optional<double> r) {
  return r ? absl::StrFormat("%.2fx", *r) : std::string("-");
}

// ", rounds LOW to HIGH" where a reference's rounds differ.
std::string RangeText(double low, double high) {
  return low == high ? std::string() : absl::StrFormat(", rounds %.0f to %.0f", low, high);
}

std::vector<PeerCaseResult> Flatten(const std::vector<std::vector<PeerCaseResult>>& rounds) {
  std::vector<PeerCaseResult> all;
  for (const std::vector<PeerCaseResult>& r : rounds) all.insert(all.end(), r.begin(), r.end());
  return all;
}

std::string ConfigJson(const PeerBenchOptions& o, const std::vector<int>& cpus, size_t rounds) {
  std::vector<std::string> sizes;
  for (uint32_t p : o.payload_bytes) {
    const PeerCase c = CaseFor(o, p);
    sizes.push_back(
        absl::StrFormat("{\"payload_bytes\":%d,\"insert_batch\":%d,\"capacity\":%d,\"prefill\":%d}",
                        p, c.insert_batch, c.capacity, c.prefill));
  }
  return absl::StrFormat(
      "{\"writers\":%d,\"batch_size\":%d,\"warmup_s\":%.3f,\"duration_s\":%.3f,\"rounds\":%d,"
      "\"cpus\":[%s],\"sizes\":[%s]}",
      o.writers, o.batch_size, absl::ToDoubleSeconds(o.warmup), absl::ToDoubleSeconds(o.duration),
      rounds, absl::StrJoin(cpus, ","), absl::StrJoin(sizes, ","));
}

std::string CasesJson(const std::vector<PeerCaseResult>& cases) {
  std::vector<std::string> rows;
  for (const PeerCaseResult& c : cases) {
    rows.push_back(absl::StrFormat(
        "{\"payload_bytes\":%d,\"system\":\"%s\",\"seconds\":%.3f,\"cpu_seconds\":%.3f,"
        "\"inserted_per_s\":%.1f,\"sampled_per_s\":%.1f,\"total_per_s\":%.1f,"
        "\"total_per_cpu_s\":%.1f}",
        c.payload_bytes, PeerSystemName(c.system), c.seconds, c.cpu_seconds, c.inserted_per_s,
        c.sampled_per_s, c.total_per_s(), c.total_per_cpu_s()));
  }
  return absl::StrCat("[", absl::StrJoin(rows, ","), "]");
}

std::string RatiosJson(const std::vector<PeerCaseResult>& cases) {
  // One object per payload size: each dreplay arm's ratios, named by arm.
  std::vector<uint32_t> sizes;
  std::vector<std::vector<std::string>> fields;
  for (const PeerRatios& r : PeerRatiosOf(cases)) {
    auto it = std::find(sizes.begin(), sizes.end(), r.payload_bytes);
    if (it == sizes.end()) {
      sizes.push_back(r.payload_bytes);
      fields.emplace_back();
      it = sizes.end() - 1;
    }
    std::vector<std::string>& out = fields[static_cast<size_t>(it - sizes.begin())];
    const char* arm = r.system == PeerSystem::kDreplayTcp ? "dreplay_tcp" : "dreplay";
    const std::pair<const char*, std::optional<double>> named[] = {
        {"over_redis", r.over_redis},
        {"over_grpc", r.over_grpc},
        {"over_redis_per_cpu", r.over_redis_per_cpu},
        {"over_grpc_per_cpu", r.over_grpc_per_cpu}};
    for (const auto& [name, value] : named) {
      if (value) out.push_back(absl::StrFormat("\"%s_%s\":%.4f", arm, name, *value));
    }
  }
  std::vector<std::string> ratios;
  for (size_t i = 0; i < sizes.size(); ++i) {
    ratios.push_back(absl::StrCat("\"", sizes[i], "\":{", absl::StrJoin(fields[i], ","), "}"));
  }
  return absl::StrCat("{", absl::StrJoin(ratios, ","), "}");
}

std::string CopiesJson(const std::vector<PeerCopyReference>& copies) {
  std::vector<std::string> rows;
  for (const PeerCopyReference& c : copies) {
    rows.push_back(absl::StrFormat(
        "\"%d\":{\"bytes_per_s\":%.1f,\"blocks_per_s\":%.1f,\"low\":%.1f,\"high\":%.1f}",
        c.payload_bytes, c.bytes_per_s, c.blocks_per_s, c.low, c.high));
  }
  return absl::StrCat("{", absl::StrJoin(rows, ","), "}");
}

std::string TcpsJson(const std::vector<PeerTcpReference>& tcps) {
  std::vector<std::string> rows;
  for (const PeerTcpReference& t : tcps) {
    rows.push_back(absl::StrFormat(
        "\"%d\":{\"message_bytes\":%d,\"bytes_per_s\":%.1f,\"transitions_per_s\":%.1f,"
        "\"low\":%.1f,\"high\":%.1f}",
        t.payload_bytes, t.message_bytes, t.bytes_per_s, t.transitions_per_s, t.low, t.high));
  }
  return absl::StrCat("{", absl::StrJoin(rows, ","), "}");
}

std::string Json(const PeerBenchOptions& o, const std::vector<int>& cpus,
                 const std::vector<std::vector<PeerCaseResult>>& rounds,
                 const std::vector<PeerCopyReference>& copies,
                 const std::vector<PeerTcpReference>& tcps) {
  const std::vector<PeerCaseResult> cases = PeerMedianCases(Flatten(rounds));
  std::string out =
      absl::StrCat("{\"config\":", ConfigJson(o, cpus, rounds.size()),
                   ",\"cases\":", CasesJson(cases), ",\"ratios\":", RatiosJson(cases));
  if (!copies.empty()) absl::StrAppend(&out, ",\"copy\":", CopiesJson(copies));
  if (!tcps.empty()) absl::StrAppend(&out, ",\"tcp\":", TcpsJson(tcps));
  if (rounds.size() > 1) {
    std::vector<std::string> each;
    for (const std::vector<PeerCaseResult>& r : rounds) each.push_back(CasesJson(r));
    absl::StrAppend(&out, ",\"rounds\":[", absl::StrJoin(each, ","), "]");
  }
  return absl::StrCat(out, "}\n");
}

// " <system> <share>" for each case of `payload_bytes`: its total per
// second over a reference's `per_s`; then the line's end.
std::string SharesText(const std::vector<PeerCaseResult>& cases, uint32_t payload_bytes,
                       double per_s) {
  std::string out;
  for (const PeerCaseResult& r : cases) {
    if (r.payload_bytes != payload_bytes || !(per_s > 0)) continue;
    absl::StrAppendFormat(&out, " %s %.2f", PeerSystemName(r.system), r.total_per_s() / per_s);
  }
  return out + "\n";
}

// Per copy reference: its rate, and each arm's counted transitions as a
// share of what one thread moves once.
std::string CopiesText(const std::vector<PeerCaseResult>& cases,
                       const std::vector<PeerCopyReference>& copies) {
  std::string out;
  for (const PeerCopyReference& c : copies) {
    absl::StrAppendFormat(&out,
                          "%10d  one thread copies these blocks through the ring at %.1f GB/s "
                          "(%.0f per s%s); each arm's total/s as a share of that:",
                          c.payload_bytes, c.bytes_per_s / 1e9, c.blocks_per_s,
                          RangeText(c.low, c.high));
    absl::StrAppend(&out, SharesText(cases, c.payload_bytes, c.blocks_per_s));
  }
  return out;
}

// Per socket reference: its rate, and each arm's counted transitions as a
// share of what one loopback TCP stream moves.
std::string TcpsText(const std::vector<PeerCaseResult>& cases,
                     const std::vector<PeerTcpReference>& tcps) {
  std::string out;
  for (const PeerTcpReference& t : tcps) {
    absl::StrAppendFormat(&out,
                          "%10d  one loopback TCP stream (sends of %d B) moves %.2f GB/s (%.0f "
                          "transitions per s%s); each arm's total/s as a share of that:",
                          t.payload_bytes, t.message_bytes, t.bytes_per_s / 1e9,
                          t.transitions_per_s, RangeText(t.low, t.high));
    absl::StrAppend(&out, SharesText(cases, t.payload_bytes, t.transitions_per_s));
  }
  return out;
}

std::string Text(const PeerBenchOptions& o, const std::vector<int>& cpus,
                 const std::vector<std::vector<PeerCaseResult>>& rounds,
                 const std::vector<PeerCopyReference>& copies,
                 const std::vector<PeerTcpReference>& tcps) {
  const std::vector<PeerCaseResult> cases = PeerMedianCases(Flatten(rounds));
  std::string out = absl::StrFormat(
      "peer_bench: %d writers, batches of %d, %.1f s window after %.1f s warmup, every arm on "
      "CPUs %s%s\n",
      o.writers, o.batch_size, absl::ToDoubleSeconds(o.duration), absl::ToDoubleSeconds(o.warmup),
      absl::StrJoin(cpus, ","),
      rounds.size() > 1 ? absl::StrCat("; medians of ", rounds.size(), " rounds") : "");
  absl::StrAppendFormat(&out, "%10s  %-8s  %12s  %12s  %12s  %7s  %12s\n", "payload B", "system",
                        "inserted/s", "sampled/s", "total/s", "CPU s", "total/CPU s");
  for (const PeerCaseResult& c : cases) {
    absl::StrAppendFormat(&out, "%10d  %-8s  %12.0f  %12.0f  %12.0f  %7.2f  %12.0f\n",
                          c.payload_bytes, PeerSystemName(c.system), c.inserted_per_s,
                          c.sampled_per_s, c.total_per_s(), c.cpu_seconds, c.total_per_cpu_s());
  }
  for (const PeerRatios& r : PeerRatiosOf(cases)) {
    const char* arm = PeerSystemName(r.system);
    absl::StrAppendFormat(&out, "%10d  %s / redis %s, %s / grpc %s (per CPU second: %s, %s)\n",
                          r.payload_bytes, arm, RatioText(r.over_redis), arm,
                          RatioText(r.over_grpc), RatioText(r.over_redis_per_cpu),
                          RatioText(r.over_grpc_per_cpu));
  }
  return absl::StrCat(out, CopiesText(cases, copies), TcpsText(cases, tcps));
}

}  // namespace

std::vector<PeerCaseResult> PeerMedianCases(const std::vector<PeerCaseResult>& results) {
  std::vector<PeerCaseResult> out;
  for (const PeerCaseResult& first : results) {
    if (Find(out, first.payload_bytes, first.system) != nullptr) continue;
    std::vector<PeerCaseResult> same;
    for (const PeerCaseResult& r : results) {
      if (r.payload_bytes == first.payload_bytes && r.system == first.system) same.push_back(r);
    }
    std::sort(same.begin(), same.end(), [](const PeerCaseResult& a, const PeerCaseResult& b) {
      return a.total_per_s() < b.total_per_s();
    });
    out.push_back(same[(same.size() - 1) / 2]);
  }
  return out;
}

std::vector<PeerRatios> PeerRatiosOf(const std::vector<PeerCaseResult>& cases) {
  std::vector<PeerRatios> out;
  for (const PeerCaseResult& c : cases) {
    if (c.system != PeerSystem::kDreplay && c.system != PeerSystem::kDreplayTcp) continue;
    PeerRatios r;
    r.payload_bytes = c.payload_bytes;
    r.system = c.system;
    if (const PeerCaseResult* o = Find(cases, c.payload_bytes, PeerSystem::kRedis)) {
      r.over_redis = Ratio(c.total_per_s(), o->total_per_s());
      if (c.total_per_cpu_s() > 0) {
        r.over_redis_per_cpu = Ratio(c.total_per_cpu_s(), o->total_per_cpu_s());
      }
    }
    if (const PeerCaseResult* o = Find(cases, c.payload_bytes, PeerSystem::kGrpc)) {
      r.over_grpc = Ratio(c.total_per_s(), o->total_per_s());
      if (c.total_per_cpu_s() > 0) {
        r.over_grpc_per_cpu = Ratio(c.total_per_cpu_s(), o->total_per_cpu_s());
      }
    }
    out.push_back(r);
  }
  return out;
}

std::string FormatPeerBenchReport(const PeerBenchOptions& options, const std::vector<int>& cpus,
                                  const std::vector<std::vector<PeerCaseResult>>& rounds, bool json,
                                  const std::vector<PeerCopyReference>& copies,
                                  const std::vector<PeerTcpReference>& tcps) {
  return json ? Json(options, cpus, rounds, copies, tcps)
              : Text(options, cpus, rounds, copies, tcps);
}

}  // namespace dreplay::tools
