// Copyright dreplay authors.

#include "actor_client/param_fetcher.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "client/retry.h"
#include "common/status_macros.h"

namespace dreplay::actor {

using client::ClientSession;
using protocol::ParamsHalfHeader;
using protocol::ParamsHeader;
using protocol::RegionKind;

absl::Status ParamFetcherOptions::Validate() const {
  if (max_attempts < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("ParamFetcherOptions.max_attempts=", max_attempts, " must be >= 1"));
  }
  if (retry_backoff < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ParamFetcherOptions.retry_backoff=", absl::FormatDuration(retry_backoff),
                     " must be >= 0"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ParamFetcher>> ParamFetcher::Create(
    ClientSession* session, const ParamFetcherOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  RETURN_IF_ERROR(session->Region(RegionKind::kParams).status());
  ASSIGN_OR_RETURN(const int sink, session->AddSink());
  std::unique_ptr<ParamFetcher> f(new ParamFetcher(session, options, sink));
  const uint64_t bytes = sizeof(ParamsHeader) + protocol::ParamsHalfStride(session->config());
  ASSIGN_OR_RETURN(f->buffer_, client::RegisteredBuffer::Create(session->provider(), bytes));
  f->size_hint_ = session->config().param_bytes;
  return f;
}

ParamFetcher::ParamFetcher(ClientSession* session, const ParamFetcherOptions& options, int sink)
    : session_(session), options_(options), sink_(sink) {}

// Its memory is freed only once no request of its own still uses it.
ParamFetcher::~ParamFetcher() { session_->Settle(sink_); }

absl::Status ParamFetcher::Read(uint64_t offset, uint64_t length, uint8_t* local) {
  ASSIGN_OR_RETURN(const verbs::RemoteRegion params, session_->Region(RegionKind::kParams));
  verbs::WorkRequest wr;
  wr.wr_id = ClientSession::WrId(sink_, next_wr_id_++);
  wr.opcode = verbs::Opcode::kRead;
  wr.local = buffer_->mr();
  wr.local_addr = local;
  wr.length = static_cast<uint32_t>(length);
  wr.remote_addr = params.addr + offset;
  wr.rkey = params.rkey;
  RETURN_IF_ERROR(session_->Post(absl::MakeConstSpan(&wr, 1)));
  RETURN_IF_ERROR(session_->Wait(sink_, wr.wr_id, session_->options().op_timeout));
  stats_.bytes_read += length;
  return absl::OkStatus();
}

absl::StatusOr<bool> ParamFetcher::TryFetch(std::vector<uint8_t>* out) {
  const protocol::LayoutConfig& config = session_->config();
  uint8_t* header_image = buffer_->data();
  uint8_t* half_image = buffer_->data() + sizeof(ParamsHeader);
  for (int attempt = 0; attempt < options_.max_attempts; ++attempt) {
    if (attempt > 0) {
      ++stats_.retries;
      absl::SleepFor(options_.retry_backoff);
    }
    RETURN_IF_ERROR(Read(0, sizeof(ParamsHeader), header_image));
    ++stats_.checks;
    ParamsHeader header;
    std::memcpy(&header, header_image, sizeof(header));
    // Any other version is new: versions only ever go back when they wrap
    // past 2^64-1 or a server starts without its parameters, and an actor
    // that waited for one above its own would then never fetch again.
    if (header.version == version_ || header.version == 0) return false;
    const uint32_t half = protocol::ParamsHalfOf(header.version);
    RETURN_IF_ERROR(Read(protocol::ParamsHalfOffset(config, half),
                         sizeof(ParamsHalfHeader) + size_hint_, half_image));
    ParamsHalfHeader half_header;
    std::memcpy(&half_header, half_image, sizeof(half_header));
    if (half_header.version == header.version && half_header.size > size_hint_ &&
        half_header.size <= config.param_bytes) {
      // Grown since the last fetch: READ the rest.
      size_hint_ = half_header.size;
      RETURN_IF_ERROR(Read(protocol::ParamsHalfOffset(config, half),
                           sizeof(ParamsHalfHeader) + size_hint_, half_image));
      std::memcpy(&half_header, half_image, sizeof(half_header));
    }
    if (half_header.size > size_hint_ ||
        !protocol::CheckParamsHalf(config, half_image, header.version).ok()) {
      continue;  // torn, or overwritten by a later version: start over
    }
    size_hint_ = half_header.size;
    out->assign(half_image + sizeof(ParamsHalfHeader),
                half_image + sizeof(ParamsHalfHeader) + half_header.size);
    version_ = header.version;
    ++stats_.fetches;
    return true;
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("no whole copy of the parameters in ", options_.max_attempts,
                   " attempts (they change faster than they are READ)"));
}

absl::StatusOr<bool> ParamFetcher::FetchIfNewer(std::vector<uint8_t>* out) {
  // The session is this thread's: a new generation is this call's reconnect.
  const uint64_t generation = session_->generation();
  absl::StatusOr<bool> result = client::WithReconnect(session_, [&] { return TryFetch(out); });
  if (session_->generation() != generation) ++stats_.reconnects;
  return result;
}

}  // namespace dreplay::actor
