// Copyright dreplay authors.

#include "tools/bench/verbs_bench_report.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "absl/time/time.h"

namespace dreplay::tools {
namespace {

double Micros(absl::Duration d) { return absl::ToDoubleMicroseconds(d); }

// The host's busy CPU nanoseconds per byte moved; -1 when not measured.
double CpuNsPerByte(double host_cpu_s, double bytes) {
  if (host_cpu_s < 0 || bytes <= 0) return -1;
  return host_cpu_s * 1e9 / bytes;
}

// RDMA over TCP bandwidth, and over the fair reference on an emulated link
// (0 when there is none).
struct Ratios {
  double vs_tcp = 0;
  double reference_gbps = 0;
  double vs_reference = 0;
};

Ratios RatiosOf(const VerbsBenchConfig& config, const VerbsBenchReport& report) {
  Ratios r;
  if (!report.tcp.has_value()) return r;
  r.vs_tcp = report.rdma.gbps / report.tcp->gbps;
  const double link_gbps = config.link.bandwidth_gbps;
  if (link_gbps > 0) {
    r.reference_gbps = std::min(link_gbps, report.tcp->gbps);
    r.vs_reference = report.rdma.gbps / r.reference_gbps;
  }
  return r;
}

std::string Json(const VerbsBenchConfig& config, const VerbsBenchReport& report) {
  const RdmaResult& rdma = report.rdma;
  std::string json = absl::StrFormat(
      "{\"provider\":\"%s\",\"mode\":\"%s\",\"op\":\"%s\",\"size\":%d,"
      "\"depth\":%d,\"batch\":%d,\"link\":\"%s\",\"duration_s\":%.3f,"
      "\"max_rd_atomic\":%d,\"max_inline_data\":%d,\"ops\":%d,"
      "\"ops_per_s\":%.1f,\"gbps\":%.4f,\"lat_p50_us\":%.2f,"
      "\"lat_p99_us\":%.2f,\"lat_mean_us\":%.2f",
      report.provider, report.mode, verbs::OpcodeName(config.op), config.size, config.depth,
      config.batch, config.link_spec, rdma.seconds, report.max_rd_atomic, report.max_inline_data,
      rdma.ops, rdma.ops_per_s, rdma.gbps, Micros(rdma.latency.Percentile(0.50)),
      Micros(rdma.latency.Percentile(0.99)), Micros(rdma.latency.mean()));
  absl::StrAppendFormat(&json, ",\"host_cpu_s\":%.2f,\"cpu_ns_per_byte\":%.4f", rdma.host_cpu_s,
                        CpuNsPerByte(rdma.host_cpu_s, double(rdma.ops) * config.size));
  if (report.tcp.has_value()) {
    const Ratios ratios = RatiosOf(config, report);
    const TcpStreamResult& tcp = *report.tcp;
    absl::StrAppendFormat(&json,
                          ",\"tcp\":{\"ops_per_s\":%.1f,\"gbps\":%.4f,\"host_cpu_s\":%.2f,"
                          "\"cpu_ns_per_byte\":%.4f},\"ratio_vs_tcp\":%.4f",
                          tcp.messages_per_s, tcp.gbps, tcp.host_cpu_s,
                          CpuNsPerByte(tcp.host_cpu_s, double(tcp.bytes)), ratios.vs_tcp);
    if (ratios.reference_gbps > 0) {
      absl::StrAppendFormat(&json, ",\"ratio_vs_min_link_tcp\":%.4f", ratios.vs_reference);
    }
  }
  return json + "}\n";
}

std::string Text(const VerbsBenchConfig& config, const VerbsBenchReport& report) {
  const RdmaResult& rdma = report.rdma;
  std::string text = absl::StrFormat(
      "verbs_bench: %s %s, %d B x depth %d, batch %d, link %s, %.1f s\n"
      "  max_rd_atomic %d, max_inline_data %d\n"
      "  %.0f ops/s  %.3f Gb/s  latency p50 %.1f us  p99 %.1f us  mean %.1f us\n",
      report.provider, verbs::OpcodeName(config.op), config.size, config.depth, config.batch,
      config.link_spec, rdma.seconds, report.max_rd_atomic, report.max_inline_data, rdma.ops_per_s,
      rdma.gbps, Micros(rdma.latency.Percentile(0.50)), Micros(rdma.latency.Percentile(0.99)),
      Micros(rdma.latency.mean()));
  if (rdma.host_cpu_s >= 0) {
    absl::StrAppendFormat(&text, "  host CPU busy %.2f s: %.3f ns per byte\n", rdma.host_cpu_s,
                          CpuNsPerByte(rdma.host_cpu_s, double(rdma.ops) * config.size));
  }
  if (report.tcp.has_value()) {
    const Ratios ratios = RatiosOf(config, report);
    const TcpStreamResult& tcp = *report.tcp;
    absl::StrAppendFormat(
        &text,
        "  tcp stream: %.0f msgs/s  %.3f Gb/s  host CPU %.2f s: %.3f ns per byte\n"
        "  ratio rdma/tcp: %.3f\n",
        tcp.messages_per_s, tcp.gbps, tcp.host_cpu_s,
        CpuNsPerByte(tcp.host_cpu_s, double(tcp.bytes)), ratios.vs_tcp);
    if (ratios.reference_gbps > 0) {
      absl::StrAppendFormat(&text, "  ratio rdma/min(link %.1f Gb/s, tcp): %.3f\n",
                            config.link.bandwidth_gbps, ratios.vs_reference);
    }
  }
  return text;
}

}  // namespace

std::string FormatVerbsBenchReport(const VerbsBenchConfig& config, const VerbsBenchReport& report) {
  return config.json ? Json(config, report) : Text(config, report);
}

}  // namespace dreplay::tools
