// Copyright dreplay authors.

// XXH3_state_t is used on the stack (its definition is in the static part).
#define XXH_STATIC_LINKING_ONLY
#include "replay_server/layout.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dreplay::replay {
namespace {

bool IsPowerOfTwo(uint64_t n) { return n != 0 && (n & (n - 1)) == 0; }

}  // namespace

absl::Status LayoutConfig::Validate() const {
  if (!IsPowerOfTwo(capacity) || capacity < kMinCapacity || capacity > kMaxCapacity) {
    return absl::InvalidArgumentError(absl::StrCat(
        "capacity=", capacity, " must be a power of two in [", kMinCapacity, ", ",
        kMaxCapacity, "]"));
  }
  if (slot_size % kSlotAlignment != 0 || slot_size <= sizeof(SlotHeader) ||
      slot_size > kMaxSlotSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        "slot_size=", slot_size, " must be a multiple of ", kSlotAlignment,
        " in (", sizeof(SlotHeader), ", ", kMaxSlotSize, "]"));
  }
  if (batch_size == 0 || batch_size > kMaxBatchSize || batch_size > capacity) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch_size=", batch_size, " must be in [1, min(", kMaxBatchSize,
        ", capacity=", capacity, ")]"));
  }
  if (staging_depth == 0 || staging_depth > kMaxStagingDepth) {
    return absl::InvalidArgumentError(absl::StrCat(
        "staging_depth=", staging_depth, " must be in [1, ", kMaxStagingDepth, "]"));
  }
  if (param_bytes > kMaxParamBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "param_bytes=", param_bytes, " must be at most ", kMaxParamBytes));
  }
  if (std::find(transition_spec, transition_spec + kTransitionSpecBytes, '\0') ==
      transition_spec + kTransitionSpecBytes) {
    return absl::InvalidArgumentError("transition_spec is not NUL-terminated");
  }
  if (max_actors > kMaxActors) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_actors=", max_actors, " must be at most ", kMaxActors));
  }
  if (actor_window > capacity) {
    return absl::InvalidArgumentError(absl::StrCat(
        "actor_window=", actor_window, " must be at most capacity=", capacity));
  }
  return absl::OkStatus();
}

uint32_t LayoutConfig::max_payload() const {
  return slot_size > sizeof(SlotHeader) ? slot_size - static_cast<uint32_t>(sizeof(SlotHeader))
                                        : 0;
}

std::string LayoutConfig::spec() const {
  const char* end = std::find(transition_spec, transition_spec + kTransitionSpecBytes, '\0');
  return std::string(transition_spec, end);
}

absl::Status LayoutConfig::set_spec(const std::string& spec) {
  if (spec.size() >= kTransitionSpecBytes || spec.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transition spec \"", spec, "\" must be shorter than ", kTransitionSpecBytes,
        " bytes and contain no NUL"));
  }
  std::memset(transition_spec, 0, kTransitionSpecBytes);
  std::memcpy(transition_spec, spec.data(), spec.size());
  return absl::OkStatus();
}

bool LayoutConfig::operator==(const LayoutConfig& o) const {
  return capacity == o.capacity && param_bytes == o.param_bytes && slot_size == o.slot_size &&
         batch_size == o.batch_size && staging_depth == o.staging_depth &&
         observation_size == o.observation_size && num_actions == o.num_actions &&
         max_actors == o.max_actors && actor_window == o.actor_window &&
         std::memcmp(transition_spec, o.transition_spec, kTransitionSpecBytes) == 0;
}

std::string LayoutConfig::DebugString() const {
  return absl::StrCat("capacity=", capacity, " slot_size=", slot_size,
                      " batch_size=", batch_size, " staging_depth=", staging_depth,
                      " param_bytes=", param_bytes, " observation_size=", observation_size,
                      " num_actions=", num_actions, " max_actors=", max_actors,
                      " actor_window=", actor_window,
                      " transition_spec=\"", spec(), "\"");
}

std::string LayoutConfig::FirstDifference(const LayoutConfig& o) const {
  auto diff = [](const char* name, auto a, auto b) {
    return absl::StrCat(name, ": ", a, " vs ", b);
  };
  if (capacity != o.capacity) return diff("capacity", capacity, o.capacity);
  if (slot_size != o.slot_size) return diff("slot_size", slot_size, o.slot_size);
  if (batch_size != o.batch_size) return diff("batch_size", batch_size, o.batch_size);
  if (staging_depth != o.staging_depth) {
    return diff("staging_depth", staging_depth, o.staging_depth);
  }
  if (param_bytes != o.param_bytes) return diff("param_bytes", param_bytes, o.param_bytes);
  if (observation_size != o.observation_size) {
    return diff("observation_size", observation_size, o.observation_size);
  }
  if (num_actions != o.num_actions) return diff("num_actions", num_actions, o.num_actions);
  if (std::memcmp(transition_spec, o.transition_spec, kTransitionSpecBytes) != 0) {
    return absl::StrCat("transition_spec: \"", spec(), "\" vs \"", o.spec(), "\"");
  }
  if (max_actors != o.max_actors) return diff("max_actors", max_actors, o.max_actors);
  if (actor_window != o.actor_window) {
    return diff("actor_window", actor_window, o.actor_window);
  }
  return "";
}

absl::Status CheckControlHeader(const ControlHeader& header) {
  if (header.magic != kMagic) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "control block magic 0x%016x is not dreplay's 0x%016x", header.magic, kMagic));
  }
  if (header.layout_version != kLayoutVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "server layout version ", header.layout_version, " but this build speaks ",
        kLayoutVersion));
  }
  if (header.control_block_size != sizeof(ControlBlock)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "control block size ", header.control_block_size, " but expected ",
        sizeof(ControlBlock)));
  }
  return header.config.Validate();
}

const char* SlotCheckName(SlotCheck check) {
  switch (check) {
    case SlotCheck::kOk:
      return "ok";
    case SlotCheck::kBadLength:
      return "bad payload length";
    case SlotCheck::kWrongSequence:
      return "wrong sequence";
    case SlotCheck::kBadChecksum:
      return "bad checksum";
  }
  return "unknown";
}

SlotCheck VerifySlot(const void* slot, uint32_t slot_size, uint64_t expected_sequence) {
  SlotHeader header;
  std::memcpy(&header, slot, sizeof(header));
  if (slot_size < sizeof(SlotHeader) ||
      header.payload_length > slot_size - sizeof(SlotHeader)) {
    return SlotCheck::kBadLength;
  }
  if (header.sequence != expected_sequence) return SlotCheck::kWrongSequence;
  if (SlotChecksum(slot, header.payload_length) != header.checksum) {
    return SlotCheck::kBadChecksum;
  }
  return SlotCheck::kOk;
}

absl::Status SealSlot(void* slot, uint32_t slot_size, uint64_t sequence, uint32_t actor_id,
                      float initial_priority, const void* payload, uint32_t payload_length) {
  if (slot_size < sizeof(SlotHeader) || payload_length > slot_size - sizeof(SlotHeader)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "payload of ", payload_length, " bytes does not fit a slot of ", slot_size,
        " bytes (header ", sizeof(SlotHeader), ")"));
  }
  SlotHeader header{};
  header.sequence = sequence;
  header.actor_id = actor_id;
  header.payload_length = payload_length;
  header.initial_priority = initial_priority;
  auto* p = static_cast<uint8_t*>(slot);
  std::memcpy(p, &header, sizeof(header));
  if (payload_length > 0) std::memcpy(p + sizeof(SlotHeader), payload, payload_length);
  header.checksum = SlotChecksum(p, payload_length);
  std::memcpy(p, &header.checksum, sizeof(header.checksum));
  return absl::OkStatus();
}

uint64_t BatchChecksum(const LayoutConfig& c, const void* staging_slot, uint32_t count) {
  count = std::min(count, c.batch_size);
  const auto* p = static_cast<const uint8_t*>(staging_slot);
  XXH3_state_t state;
  // A state on the stack must be initialized before a seeded reset (the
  // reset skips deriving the secret when the stale seed field matches).
  XXH3_INITSTATE(&state);
  XXH3_64bits_reset_withSeed(&state, kChecksumSeed);
  XXH3_64bits_update(&state, p + sizeof(uint64_t), sizeof(BatchHeader) - sizeof(uint64_t));
  XXH3_64bits_update(&state, p + StagingEntriesOffset(c), uint64_t{count} * sizeof(BatchEntry));
  XXH3_64bits_update(&state, p + StagingPayloadsOffset(c), uint64_t{count} * c.slot_size);
  return XXH3_64bits_digest(&state);
}

uint64_t MailboxChecksum(const LayoutConfig& c, const void* entry, uint32_t count) {
  count = std::min(count, c.batch_size);
  const auto* p = static_cast<const uint8_t*>(entry);
  return XXH3_64bits_withSeed(
      p + sizeof(uint64_t),
      MailboxRecordsOffset(c) - sizeof(uint64_t) + uint64_t{count} * sizeof(PriorityRecord),
      kChecksumSeed);
}

uint64_t ParamsChecksum(const LayoutConfig& c, const void* half, uint64_t size) {
  size = std::min(size, c.param_bytes);
  const auto* p = static_cast<const uint8_t*>(half);
  return XXH3_64bits_withSeed(p + sizeof(uint64_t),
                              sizeof(ParamsHalfHeader) - sizeof(uint64_t) + size, kChecksumSeed);
}

const char* RegionKindName(RegionKind kind) {
  switch (kind) {
    case RegionKind::kControl:
      return "control";
    case RegionKind::kTail:
      return "tail";
    case RegionKind::kSlots:
      return "slots";
    case RegionKind::kCommits:
      return "commits";
    case RegionKind::kStaging:
      return "staging";
    case RegionKind::kMailbox:
      return "mailbox";
    case RegionKind::kParams:
      return "params";
    case RegionKind::kStats:
      return "stats";
    case RegionKind::kActors:
      return "actors";
  }
  return "unknown";
}

void SealActorLine(ActorLine* line) {
  line->checksum = XXH3_64bits_withSeed(reinterpret_cast<const uint8_t*>(line) + sizeof(uint64_t),
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
    return absl::DataLossError(absl::StrCat("actor line ", actor_id, " fails its checksum (actor id ",
                                            line.actor_id, ", torn read)"));
  }
  return absl::OkStatus();
}

void RegionDirectory::Set(RegionKind kind, const WireRegion& region) {
  const auto k = static_cast<uint32_t>(kind);
  if (k >= kNumRegionKinds) return;
  regions[k] = region;
  present_mask |= 1u << k;
}

bool RegionDirectory::Has(RegionKind kind) const {
  const auto k = static_cast<uint32_t>(kind);
  return k < kNumRegionKinds && (present_mask & (1u << k)) != 0;
}

const WireRegion& RegionDirectory::Get(RegionKind kind) const {
  static const WireRegion kAbsent{};
  return Has(kind) ? regions[static_cast<uint32_t>(kind)] : kAbsent;
}

absl::Status RegionDirectory::Validate() const {
  if (magic != kMagic) {
    return absl::FailedPreconditionError(
        absl::StrFormat("region directory magic 0x%016x is not dreplay's", magic));
  }
  if (layout_version != kLayoutVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "region directory layout version ", layout_version, " but this build speaks ",
        kLayoutVersion));
  }
  if ((present_mask >> kNumRegionKinds) != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("region directory present_mask 0x%x names unknown regions", present_mask));
  }
  for (uint32_t k = 0; k < kNumRegionKinds; ++k) {
    if ((present_mask & (1u << k)) != 0 && regions[k].length == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "region directory entry ", RegionKindName(static_cast<RegionKind>(k)),
          " is present but empty"));
    }
  }
  return absl::OkStatus();
}

absl::Status EncodePriorityUpdate(const LayoutConfig& config, uint64_t batch_number,
                                  uint64_t epoch, absl::Span<const PriorityRecord> records,
                                  absl::Span<uint8_t> entry) {
  if (records.size() > config.batch_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "priority update has ", records.size(), " records, more than batch_size=",
        config.batch_size));
  }
  if (entry.size() < MailboxEntryStride(config)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mailbox entry buffer of ", entry.size(), " bytes, need ", MailboxEntryStride(config)));
  }
  std::memset(entry.data(), 0, MailboxEntryStride(config));
  MailboxHeader header{};
  header.batch_number = batch_number;
  header.epoch = epoch;
  header.count = static_cast<uint32_t>(records.size());
  std::memcpy(entry.data(), &header, sizeof(header));
  if (!records.empty()) {
    std::memcpy(entry.data() + MailboxRecordsOffset(config), records.data(),
                records.size() * sizeof(PriorityRecord));
  }
  header.checksum = MailboxChecksum(config, entry.data(), header.count);
  std::memcpy(entry.data(), &header.checksum, sizeof(header.checksum));
  const uint64_t commit = BatchCommitValue(batch_number);
  std::memcpy(entry.data() + MailboxCommitOffset(config), &commit, sizeof(commit));
  return absl::OkStatus();
}

absl::Status CheckStagedBatch(const LayoutConfig& config, const void* image,
                              uint64_t batch_number, uint64_t epoch) {
  const auto* p = static_cast<const uint8_t*>(image);
  uint64_t commit;
  std::memcpy(&commit, p + StagingCommitOffset(config), sizeof(commit));
  BatchHeader header;
  std::memcpy(&header, p, sizeof(header));
  if (commit != BatchCommitValue(batch_number) || header.batch_number != batch_number) {
    return absl::UnavailableError(absl::StrCat(
        "batch ", batch_number, " is not staged yet (commit ", commit, ", header batch ",
        header.batch_number, ")"));
  }
  // Only a whole image is judged: a READ that overlapped the server's write
  // can pair a new commit word with an old header.
  if (header.count > config.batch_size || header.slot_size != config.slot_size) {
    return absl::DataLossError(absl::StrCat(
        "staged batch ", batch_number, " header has count ", header.count, " slot_size ",
        header.slot_size, " (torn read)"));
  }
  if (BatchChecksum(config, p, header.count) != header.checksum) {
    return absl::DataLossError(
        absl::StrCat("staged batch ", batch_number, " fails its checksum (torn read)"));
  }
  if (header.epoch != epoch) {
    return absl::FailedPreconditionError(absl::StrCat(
        "staged batch ", batch_number, " has epoch ", header.epoch, ", expected ", epoch));
  }
  return absl::OkStatus();
}

absl::Status EncodeParamsHalf(const LayoutConfig& config, uint64_t version,
                              absl::Span<const uint8_t> data, absl::Span<uint8_t> half) {
  if (data.size() > config.param_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "parameters of ", data.size(), " bytes exceed param_bytes=", config.param_bytes));
  }
  if (half.size() < sizeof(ParamsHalfHeader) + data.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "params half buffer of ", half.size(), " bytes, need ",
        sizeof(ParamsHalfHeader) + data.size()));
  }
  ParamsHalfHeader header{};
  header.version = version;
  header.size = data.size();
  std::memcpy(half.data(), &header, sizeof(header));
  if (!data.empty()) std::memcpy(half.data() + sizeof(header), data.data(), data.size());
  header.checksum = ParamsChecksum(config, half.data(), header.size);
  std::memcpy(half.data(), &header.checksum, sizeof(header.checksum));
  return absl::OkStatus();
}

absl::Status CheckParamsHalf(const LayoutConfig& config, const void* half,
                             uint64_t expected_version) {
  ParamsHalfHeader header;
  std::memcpy(&header, half, sizeof(header));
  if (header.version != expected_version) {
    return absl::UnavailableError(absl::StrCat(
        "params half holds version ", header.version, ", expected ", expected_version));
  }
  if (header.size > config.param_bytes) {
    return absl::DataLossError(absl::StrCat("params half size ", header.size,
                                            " exceeds param_bytes=", config.param_bytes));
  }
  if (ParamsChecksum(config, half, header.size) != header.checksum) {
    return absl::DataLossError(absl::StrCat("params version ", expected_version,
                                            " fails its checksum (torn read)"));
  }
  return absl::OkStatus();
}

}  // namespace dreplay::replay
