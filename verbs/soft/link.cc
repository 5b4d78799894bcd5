// Copyright dreplay authors.

#include "verbs/soft/link.h"

#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/checksum.h"

namespace dreplay::verbs::soft {
namespace {

// Reads a small /proc file whole; false when it cannot be read.
bool ReadSmallFile(const char* path, std::string* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::ostringstream text;
  text << in.rdbuf();
  *out = text.str();
  return true;
}

}  // namespace

int64_t MonotonicNowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

uint64_t ClockId() {
  // The boot id names the kernel's boot; a time namespace may shift
  // CLOCK_MONOTONIC by its offsets, which are part of the id.
  std::string boot;
  if (!ReadSmallFile("/proc/sys/kernel/random/boot_id", &boot) || boot.empty()) return 0;
  std::string offsets;
  ReadSmallFile("/proc/self/timens_offsets", &offsets);  // absent: no time namespaces
  const std::string both = boot + offsets;
  const uint64_t id = Xxh3(both.data(), both.size(), /*seed=*/0);
  return id == 0 ? 1 : id;
}

void UsePreciseTimers() {
  // 1 ns is the smallest slack the kernel accepts; failure only costs
  // precision, so it is not an error.
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
}

absl::Status CheckLinkModel(const LinkModel& model) {
  absl::Status valid = model.Validate();
  if (!valid.ok()) return valid;
  if (model.bandwidth_gbps > 0 && model.bandwidth_gbps < kMinLinkBandwidthGbps) {
    return absl::InvalidArgumentError(
        absl::StrCat("LinkModel.bandwidth_gbps = ", model.bandwidth_gbps, " is below the minimum ",
                     kMinLinkBandwidthGbps, " (or 0: unlimited)"));
  }
  return absl::OkStatus();
}

LinkEmulator::LinkEmulator(const LinkModel& model, uint64_t seed, int64_t host_path_ns)
    : enabled_(model.enabled()),
      host_path_ns_(
          std::clamp<int64_t>(host_path_ns, 0, absl::ToInt64Nanoseconds(model.one_way_delay))),
      delay_ns_(absl::ToInt64Nanoseconds(model.one_way_delay) - host_path_ns_),
      jitter_ns_(absl::ToInt64Nanoseconds(model.jitter)),
      ns_per_byte_(model.bandwidth_gbps > 0 ? 8.0 / model.bandwidth_gbps : 0.0),
      rng_(seed) {}

LinkEmulator::Slot LinkEmulator::Schedule(int64_t now_ns, size_t bytes) {
  const auto serialise = static_cast<int64_t>(std::llround(ns_per_byte_ * bytes));
  const int64_t jitter =
      jitter_ns_ > 0 ? std::uniform_int_distribution<int64_t>(0, jitter_ns_)(rng_) : 0;
  const int64_t start = std::max(now_ns, link_free_ns_);
  link_free_ns_ = start + serialise;
  last_arrival_ns_ = std::max(link_free_ns_ + delay_ns_ + jitter, last_arrival_ns_);
  const int64_t idle_arrival = now_ns + serialise + delay_ns_ + jitter;
  return Slot{last_arrival_ns_, std::min(idle_arrival, last_arrival_ns_)};
}

LinkEmulator::Slot LinkEmulator::Preview(int64_t at_ns, size_t bytes) const {
  const auto serialise = static_cast<int64_t>(std::llround(ns_per_byte_ * bytes));
  const int64_t arrival = at_ns + serialise + delay_ns_;
  return Slot{arrival, arrival};
}

}  // namespace dreplay::verbs::soft
