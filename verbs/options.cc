// Copyright dreplay authors.
//
// options.cc: validation and parsing of the verbs layer's options.

#include "verbs/options.h"

#include <cmath>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"

namespace dreplay::verbs {
namespace {

// Sanity bounds: generous enough for any real link or device, tight enough to
// catch a value given in the wrong unit.
constexpr absl::Duration kMaxLinkDelay = absl::Seconds(10);
constexpr double kMaxBandwidthGbps = 1000.0;
constexpr int kMaxIbPort = 255;
constexpr int kMaxGidIndex = 255;
constexpr int kMaxTrafficClass = 255;  // an 8-bit field
constexpr int kMaxQueueDepth = 1 << 16;
// ibv_qp_attr::max_rd_atomic is a uint8_t.
constexpr int kMaxRdAtomic = 255;
constexpr uint32_t kMaxInlineData = 4096;
constexpr int kMaxAckTimeout = 31;  // 5-bit field
constexpr int kMaxRetryCount = 7;   // 3-bit fields
constexpr int kMaxMinRnrTimer = 31;

absl::Status CheckRange(const char* name, int value, int lo, int hi) {
  if (value < lo || value > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " = ", value, " is out of range [", lo, ", ", hi, "]"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ProviderKind> ParseProviderKind(const std::string& name) {
  if (name == "auto") return ProviderKind::kAuto;
  if (name == "ibverbs") return ProviderKind::kIbverbs;
  if (name == "soft") return ProviderKind::kSoft;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown provider \"", name, "\" (expected auto, ibverbs or soft)"));
}

const char* ProviderKindName(ProviderKind kind) {
  switch (kind) {
    case ProviderKind::kAuto:
      return "auto";
    case ProviderKind::kIbverbs:
      return "ibverbs";
    case ProviderKind::kSoft:
      return "soft";
  }
  return "unknown";
}

absl::StatusOr<SoftTransport> ParseSoftTransport(const std::string& name) {
  if (name == "auto") return SoftTransport::kAuto;
  if (name == "tcp") return SoftTransport::kTcp;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown soft transport \"", name, "\" (expected auto or tcp)"));
}

const char* SoftTransportName(SoftTransport transport) {
  return transport == SoftTransport::kTcp ? "tcp" : "auto";
}

absl::StatusOr<SoftLinkRelease> ParseSoftLinkRelease(const std::string& name) {
  if (name == "auto") return SoftLinkRelease::kAuto;
  if (name == "receiver") return SoftLinkRelease::kReceiver;
  if (name == "sender") return SoftLinkRelease::kSender;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown soft link release \"", name, "\" (expected auto, receiver or sender)"));
}

absl::Status ProviderOptions::Validate() const {
  if (soft_transport != SoftTransport::kAuto && soft_transport != SoftTransport::kTcp) {
    return absl::InvalidArgumentError(
        absl::StrCat("ProviderOptions.soft_transport = ", static_cast<int>(soft_transport),
                     " is not a transport"));
  }
  if (soft_link_release != SoftLinkRelease::kAuto &&
      soft_link_release != SoftLinkRelease::kReceiver &&
      soft_link_release != SoftLinkRelease::kSender) {
    return absl::InvalidArgumentError(
        absl::StrCat("ProviderOptions.soft_link_release = ", static_cast<int>(soft_link_release),
                     " is not a release mode"));
  }
  if (kind != ProviderKind::kAuto && kind != ProviderKind::kIbverbs &&
      kind != ProviderKind::kSoft) {
    return absl::InvalidArgumentError(
        absl::StrCat("ProviderOptions.kind = ", static_cast<int>(kind), " is not a provider"));
  }
  if (ib_port < 1 || ib_port > kMaxIbPort) {
    return absl::InvalidArgumentError(absl::StrCat("ProviderOptions.ib_port = ", ib_port,
                                                   " is out of range [1, ", kMaxIbPort, "]"));
  }
  if (gid_index < -1 || gid_index > kMaxGidIndex) {
    return absl::InvalidArgumentError(absl::StrCat("ProviderOptions.gid_index = ", gid_index,
                                                   " is out of range [-1 (automatic), ",
                                                   kMaxGidIndex, "]"));
  }
  if (traffic_class < 0 || traffic_class > kMaxTrafficClass) {
    return absl::InvalidArgumentError(
        absl::StrCat("ProviderOptions.traffic_class = ", traffic_class, " is out of range [0, ",
                     kMaxTrafficClass, "]"));
  }
  return absl::OkStatus();
}

absl::Status LinkModel::Validate() const {
  if (one_way_delay < absl::ZeroDuration() || one_way_delay > kMaxLinkDelay) {
    return absl::InvalidArgumentError(
        absl::StrCat("LinkModel.one_way_delay = ", absl::FormatDuration(one_way_delay),
                     " is out of range [0, ", absl::FormatDuration(kMaxLinkDelay), "]"));
  }
  if (!std::isfinite(bandwidth_gbps) || bandwidth_gbps < 0 || bandwidth_gbps > kMaxBandwidthGbps) {
    return absl::InvalidArgumentError(absl::StrCat("LinkModel.bandwidth_gbps = ", bandwidth_gbps,
                                                   " is out of range [0 (unlimited), ",
                                                   kMaxBandwidthGbps, "]"));
  }
  if (jitter < absl::ZeroDuration() || jitter > kMaxLinkDelay) {
    return absl::InvalidArgumentError(
        absl::StrCat("LinkModel.jitter = ", absl::FormatDuration(jitter), " is out of range [0, ",
                     absl::FormatDuration(kMaxLinkDelay), "]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<LinkModel> ParseLinkModel(const std::string& spec) {
  LinkModel model;
  if (spec == "none" || spec.empty()) return model;
  if (spec == "10km-25g") {
    model.one_way_delay = absl::Microseconds(50);
    model.bandwidth_gbps = 25;
    return model;
  }
  if (spec == "100km-10g") {
    model.one_way_delay = absl::Microseconds(500);
    model.bandwidth_gbps = 10;
    return model;
  }
  if (spec == "1000km-1g") {
    model.one_way_delay = absl::Milliseconds(5);
    model.bandwidth_gbps = 1;
    return model;
  }
  const std::vector<absl::string_view> parts = absl::StrSplit(spec, ':');
  double delay_us = 0;
  double gbps = 0;
  if (parts.size() != 2 || !absl::SimpleAtod(parts[0], &delay_us) ||
      !absl::SimpleAtod(parts[1], &gbps)) {
    return absl::InvalidArgumentError(
        absl::StrCat("link model \"", spec,
                     "\" is neither a preset (none, 10km-25g, 100km-10g, 1000km-1g) nor "
                     "DELAY_US:GBPS such as 50:25"));
  }
  if (!std::isfinite(delay_us) || delay_us < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("link model \"", spec, "\": delay ", delay_us, " us must be >= 0"));
  }
  model.one_way_delay = absl::Nanoseconds(std::llround(delay_us * 1000.0));
  model.bandwidth_gbps = gbps;
  absl::Status status = model.Validate();
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("link model \"", spec, "\": ", status.message()));
  }
  return model;
}

absl::Status FaultOptions::Validate() const {
  if (stall_for < absl::ZeroDuration() || stall_for > kMaxLinkDelay) {
    return absl::InvalidArgumentError(
        absl::StrCat("FaultOptions.stall_for = ", absl::FormatDuration(stall_for),
                     " is out of range [0, ", absl::FormatDuration(kMaxLinkDelay), "]"));
  }
  if (stall_after_ops != 0 && stall_for == absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("FaultOptions.stall_after_ops = ", stall_after_ops, " needs a stall_for > 0"));
  }
  if (tear != TearMode::kNone && tear != TearMode::kPrefix && tear != TearMode::kOutOfOrder) {
    return absl::InvalidArgumentError(
        absl::StrCat("FaultOptions.tear = ", static_cast<int>(tear), " is not a TearMode"));
  }
  return absl::OkStatus();
}

absl::Status QueuePairOptions::Validate() const {
  RETURN_IF_ERROR(CheckRange("QueuePairOptions.max_send_wr", max_send_wr, 1, kMaxQueueDepth));
  RETURN_IF_ERROR(CheckRange("QueuePairOptions.max_recv_wr", max_recv_wr, 0, kMaxQueueDepth));
  RETURN_IF_ERROR(CheckRange("QueuePairOptions.max_rd_atomic", max_rd_atomic, 1, kMaxRdAtomic));
  if (max_inline_data > kMaxInlineData) {
    return absl::InvalidArgumentError(
        absl::StrCat("QueuePairOptions.max_inline_data = ", max_inline_data,
                     " is out of range [0, ", kMaxInlineData, "]"));
  }
  if (connect_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("QueuePairOptions.connect_timeout = ", absl::FormatDuration(connect_timeout),
                     " must be > 0"));
  }
  RETURN_IF_ERROR(CheckRange("QueuePairOptions.ack_timeout", ack_timeout, 0, kMaxAckTimeout));
  RETURN_IF_ERROR(CheckRange("QueuePairOptions.retry_cnt", retry_cnt, 0, kMaxRetryCount));
  RETURN_IF_ERROR(CheckRange("QueuePairOptions.rnr_retry", rnr_retry, 0, kMaxRetryCount));
  RETURN_IF_ERROR(CheckRange("QueuePairOptions.min_rnr_timer", min_rnr_timer, 0, kMaxMinRnrTimer));
  RETURN_IF_ERROR(link.Validate());
  return faults.Validate();
}

}  // namespace dreplay::verbs
