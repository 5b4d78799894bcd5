// Copyright dreplay authors.

#include "protocol/stats.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/checksum.h"

namespace dreplay::protocol {

std::optional<double> CrossingPercentileMean(const StatsBlock& stats) {
  if (stats.crossing_percentile_count == 0) return std::nullopt;
  return stats.crossing_percentile_sum / static_cast<double>(stats.crossing_percentile_count);
}

void SealActorLine(ActorLine* line) {
  line->checksum = Xxh3(reinterpret_cast<const uint8_t*>(line) + sizeof(uint64_t),
                        sizeof(ActorLine) - sizeof(uint64_t), kChecksumSeed);
}

absl::Status CheckActorLine(const ActorLine& line, uint32_t actor_id) {
  static const ActorLine kZero{};
  if (std::memcmp(&line, &kZero, sizeof(line)) == 0) {
    return absl::NotFoundError(absl::StrCat("actor ", actor_id, " has not published stats"));
  }
  ActorLine copy = line;
  SealActorLine(&copy);
  if (copy.checksum != line.checksum || line.actor_id != actor_id) {
    return absl::DataLossError(absl::StrCat(
        "actor line ", actor_id, " fails its checksum (actor id ", line.actor_id, ", torn read)"));
  }
  return absl::OkStatus();
}

}  // namespace dreplay::protocol
