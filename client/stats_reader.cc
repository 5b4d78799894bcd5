// Copyright dreplay authors.

#include "client/stats_reader.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "client/retry.h"
#include "common/status_macros.h"

namespace dreplay::client {

using client::ClientSession;
using protocol::ActorLine;
using protocol::RegionKind;
using protocol::StatsBlock;

namespace {
constexpr absl::Duration kRetryBackoff = absl::Microseconds(50);
}  // namespace

absl::StatusOr<std::unique_ptr<StatsReader>> StatsReader::Create(ClientSession* session) {
  ASSIGN_OR_RETURN(const int sink, session->AddSink());
  std::unique_ptr<StatsReader> r(new StatsReader(session, sink));
  const uint64_t bytes =
      std::max<uint64_t>(2 * sizeof(StatsBlock), protocol::ActorsRegionBytes(session->config()));
  ASSIGN_OR_RETURN(r->buffer_, client::RegisteredBuffer::Create(session->provider(), bytes));
  return r;
}

StatsReader::StatsReader(ClientSession* session, int sink) : session_(session), sink_(sink) {}

StatsReader::~StatsReader() = default;

absl::Status StatsReader::ReadInOrder(RegionKind kind, uint64_t offset, uint32_t length,
                                      std::initializer_list<uint8_t*> locals) {
  ASSIGN_OR_RETURN(const verbs::RemoteRegion region, session_->Region(kind));
  std::vector<verbs::WorkRequest> wrs;
  for (uint8_t* local : locals) {
    verbs::WorkRequest wr;
    wr.wr_id = ClientSession::WrId(sink_, next_wr_id_++);
    wr.opcode = verbs::Opcode::kRead;
    wr.signaled = false;
    wr.local = buffer_->mr();
    wr.local_addr = local;
    wr.length = length;
    wr.remote_addr = region.addr + offset;
    wr.rkey = region.rkey;
    wrs.push_back(wr);
  }
  wrs.back().signaled = true;
  RETURN_IF_ERROR(session_->Post(wrs));
  return session_->Wait(sink_, wrs.back().wr_id, session_->options().op_timeout);
}

absl::StatusOr<StatsBlock> StatsReader::ReadStats() {
  RETURN_IF_ERROR(session_->Region(RegionKind::kStats).status());
  return WithReconnect(session_, [this]() -> absl::StatusOr<StatsBlock> {
    uint8_t* first = buffer_->data();
    uint8_t* second = buffer_->data() + sizeof(StatsBlock);
    for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
      if (attempt > 0) absl::SleepFor(kRetryBackoff);
      RETURN_IF_ERROR(ReadInOrder(RegionKind::kStats, 0, sizeof(StatsBlock), {first, second}));
      StatsBlock a, b;
      std::memcpy(&a, first, sizeof(a));
      std::memcpy(&b, second, sizeof(b));
      if (a.generation_begin == a.generation_end && a.generation_end == b.generation_begin) {
        return a;
      }
    }
    return absl::UnavailableError("no consistent stats snapshot: the server updates too often");
  });
}

absl::StatusOr<std::vector<ActorLine>> StatsReader::ReadActors() {
  RETURN_IF_ERROR(session_->Region(RegionKind::kActors).status());
  return WithReconnect(session_, [this]() -> absl::StatusOr<std::vector<ActorLine>> {
    const uint32_t max_actors = session_->config().max_actors;
    std::vector<ActorLine> lines;
    std::vector<uint32_t> torn;
    RETURN_IF_ERROR(ReadInOrder(
        RegionKind::kActors, 0,
        static_cast<uint32_t>(protocol::ActorsRegionBytes(session_->config())), {buffer_->data()}));
    auto line_at = [this](uint32_t id) {
      ActorLine line;
      std::memcpy(&line, buffer_->data() + protocol::ActorLineOffset(id), sizeof(line));
      return line;
    };
    for (uint32_t id = 0; id < max_actors; ++id) {
      const ActorLine line = line_at(id);
      const absl::Status s = protocol::CheckActorLine(line, id);
      if (s.ok()) lines.push_back(line);
      if (absl::IsDataLoss(s)) torn.push_back(id);
    }
    for (uint32_t id : torn) {  // READ each torn line again on its own
      for (int attempt = 0;; ++attempt) {
        if (attempt >= kMaxAttempts) {
          return absl::UnavailableError(absl::StrCat("actor line ", id, " stays torn"));
        }
        RETURN_IF_ERROR(ReadInOrder(RegionKind::kActors, protocol::ActorLineOffset(id),
                                    sizeof(ActorLine),
                                    {buffer_->data() + protocol::ActorLineOffset(id)}));
        const ActorLine line = line_at(id);
        if (protocol::CheckActorLine(line, id).ok()) {
          lines.push_back(line);
          break;
        }
        absl::SleepFor(kRetryBackoff);
      }
    }
    std::sort(lines.begin(), lines.end(),
              [](const ActorLine& a, const ActorLine& b) { return a.actor_id < b.actor_id; });
    return lines;
  });
}

}  // namespace dreplay::client
