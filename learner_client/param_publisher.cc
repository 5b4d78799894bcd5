// Copyright dreplay authors.

#include "learner_client/param_publisher.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace dreplay::learner {

using client::ClientSession;
using protocol::ParamsHalfHeader;
using protocol::ParamsHeader;
using protocol::RegionKind;

absl::StatusOr<std::unique_ptr<ParamPublisher>> ParamPublisher::Create(ClientSession* session) {
  if (session->options().role != protocol::Role::kLearner) {
    return absl::InvalidArgumentError("ParamPublisher needs a learner session");
  }
  ASSIGN_OR_RETURN(const int sink, session->AddSink());
  std::unique_ptr<ParamPublisher> p(new ParamPublisher(session, sink));
  const uint64_t bytes = sizeof(ParamsHeader) + protocol::ParamsHalfStride(session->config());
  ASSIGN_OR_RETURN(p->buffer_, client::RegisteredBuffer::Create(session->provider(), bytes));
  RETURN_IF_ERROR(p->SyncVersion());
  return p;
}

ParamPublisher::ParamPublisher(ClientSession* session, int sink) : session_(session), sink_(sink) {}

// Its memory is freed only once no request of its own still uses it.
ParamPublisher::~ParamPublisher() { session_->Settle(sink_); }

absl::Status ParamPublisher::SyncVersion() {
  RETURN_IF_ERROR(session_->ReadSync(RegionKind::kParams, 0, sizeof(ParamsHeader), buffer_->mr(),
                                     buffer_->data(), client::TrafficClass::kParams));
  ParamsHeader header;
  std::memcpy(&header, buffer_->data(), sizeof(header));
  version_ = std::max(version_, header.version);
  synced_generation_ = session_->generation();
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> ParamPublisher::Post(uint64_t version, absl::Span<const uint8_t> data) {
  const protocol::LayoutConfig& config = session_->config();
  uint8_t* header_image = buffer_->data();
  uint8_t* half_image = buffer_->data() + sizeof(ParamsHeader);
  RETURN_IF_ERROR(protocol::EncodeParamsHalf(
      config, version, data, absl::MakeSpan(half_image, buffer_->size() - sizeof(ParamsHeader))));
  ParamsHeader header{};
  header.version = version;
  header.active_half = protocol::ParamsHalfOf(version);
  std::memcpy(header_image, &header, sizeof(header));

  ASSIGN_OR_RETURN(const verbs::RemoteRegion params, session_->Region(RegionKind::kParams));
  verbs::WorkRequest wrs[2];
  wrs[0].wr_id = ClientSession::WrId(sink_, next_wr_id_++);
  wrs[0].opcode = verbs::Opcode::kWrite;
  wrs[0].signaled = false;
  wrs[0].local = buffer_->mr();
  wrs[0].local_addr = half_image;
  wrs[0].length = static_cast<uint32_t>(sizeof(ParamsHalfHeader) + data.size());
  wrs[0].remote_addr = params.addr + protocol::ParamsHalfOffset(config, header.active_half);
  wrs[0].rkey = params.rkey;
  wrs[1] = wrs[0];
  wrs[1].wr_id = ClientSession::WrId(sink_, next_wr_id_++);
  wrs[1].signaled = true;
  wrs[1].local_addr = header_image;
  wrs[1].length = sizeof(ParamsHeader);
  wrs[1].remote_addr = params.addr;
  RETURN_IF_ERROR(session_->Post(absl::MakeConstSpan(wrs, 2), client::TrafficClass::kParams));
  pending_bytes_ = wrs[0].length + wrs[1].length;
  return wrs[1].wr_id;
}

absl::Status ParamPublisher::TryPublish(uint64_t version, absl::Span<const uint8_t> data) {
  ASSIGN_OR_RETURN(const uint64_t wr_id, Post(version, data));
  RETURN_IF_ERROR(session_->Wait(sink_, wr_id, session_->options().op_timeout));
  bytes_written_ += pending_bytes_;
  return absl::OkStatus();
}

absl::StatusOr<bool> ParamPublisher::PollPending() {
  if (pending_wr_id_ == 0) return true;
  verbs::Completion completions[4];
  const int n = session_->Poll(sink_, absl::MakeSpan(completions));
  for (int i = 0; i < n; ++i) {
    if (!completions[i].ok()) {
      pending_wr_id_ = 0;
      return completions[i].ToStatus();
    }
    if (completions[i].wr_id == pending_wr_id_) {
      pending_wr_id_ = 0;
      version_ = pending_version_;  // posted after version_ (NextVersion)
      bytes_written_ += pending_bytes_;
    }
  }
  return pending_wr_id_ == 0;
}

absl::Status ParamPublisher::CheckSize(absl::Span<const uint8_t> data) const {
  if (data.size() <= session_->config().param_bytes) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("parameters of ", data.size(),
                   " bytes exceed the server's param_bytes=", session_->config().param_bytes));
}

absl::StatusOr<bool> ParamPublisher::PublishIfIdle(absl::Span<const uint8_t> data) {
  RETURN_IF_ERROR(CheckSize(data));
  for (int attempt = 0;; ++attempt) {
    const uint64_t generation = session_->generation();
    // A new connection lost whatever was in flight on the old one.
    if (generation != synced_generation_) pending_wr_id_ = 0;
    absl::Status status = generation == synced_generation_ ? absl::OkStatus() : SyncVersion();
    absl::StatusOr<bool> idle = status.ok() ? PollPending() : status;
    if (idle.ok() && !*idle) return false;
    // Above a version lost with its connection too: none is written twice.
    const uint64_t next = NextVersion(std::max(version_, pending_version_));
    absl::StatusOr<uint64_t> wr_id = idle.ok() ? Post(next, data) : idle.status();
    if (wr_id.ok()) {
      pending_version_ = next;
      pending_wr_id_ = *wr_id;
      return true;
    }
    status = wr_id.status();
    if (!client::IsConnectionFailure(status) || attempt > 0) return status;
    RETURN_IF_ERROR(session_->Reconnect(generation, status));
  }
}

absl::StatusOr<uint64_t> ParamPublisher::Publish(absl::Span<const uint8_t> data) {
  RETURN_IF_ERROR(CheckSize(data));
  if (pending_wr_id_ != 0 && session_->generation() == synced_generation_) {
    const absl::Status waited =
        session_->Wait(sink_, pending_wr_id_, session_->options().op_timeout);
    if (waited.ok()) {
      version_ = pending_version_;  // posted after version_ (NextVersion)
      bytes_written_ += pending_bytes_;
    }
  }
  pending_wr_id_ = 0;
  for (int attempt = 0;; ++attempt) {
    const uint64_t generation = session_->generation();
    absl::Status status = generation == synced_generation_ ? absl::OkStatus() : SyncVersion();
    if (status.ok()) status = TryPublish(NextVersion(version_), data);
    if (status.ok()) {
      version_ = NextVersion(version_);
      return version_;
    }
    if (!client::IsConnectionFailure(status) || attempt > 0) return status;
    RETURN_IF_ERROR(session_->Reconnect(generation, status));
  }
}

}  // namespace dreplay::learner
