// Copyright dreplay authors.

#include "client/session.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/shared_words.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "protocol/key_grant.h"

namespace dreplay::client {
namespace {

constexpr size_t kScratchBytes = 4096;
static_assert(sizeof(protocol::ControlBlock) <= kScratchBytes,
              "the control block fits the scratch");
// A waiting call spins this long before it sleeps between polls.
constexpr absl::Duration kSpinBeforeSleep = absl::Microseconds(200);
constexpr absl::Duration kPollSleep = absl::Microseconds(20);
constexpr int kPollBatch = 32;

bool IsTransient(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kAborted:
      return true;
    case absl::StatusCode::kPermissionDenied:
      return protocol::IsRetryableRejection(status);
    default:
      return false;
  }
}

}  // namespace

absl::Status ClientSessionOptions::Validate() const {
  if (host.empty()) return absl::InvalidArgumentError("ClientSessionOptions.host is empty");
  if (port == 0)
    return absl::InvalidArgumentError("ClientSessionOptions.port=0: give the server's port");
  if (role != protocol::Role::kActor && role != protocol::Role::kLearner &&
      role != protocol::Role::kMonitor) {
    return absl::InvalidArgumentError(
        absl::StrCat("ClientSessionOptions.role=", static_cast<uint32_t>(role), " is not a role"));
  }
  if (role != protocol::Role::kActor && actor_id != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ClientSessionOptions.actor_id=", actor_id, " is for actors only"));
  }
  if ((learner_cache || learner_placement) && role != protocol::Role::kLearner) {
    return absl::InvalidArgumentError(
        absl::StrCat("ClientSessionOptions.", learner_cache ? "learner_cache" : "learner_placement",
                     "=true is for learners only"));
  }
  if (learner_cache && learner_placement) {
    return absl::InvalidArgumentError(
        "ClientSessionOptions.learner_cache=true is for the buffer and hybrid placements, but "
        "learner_placement=true");
  }
  if (auth_token.size() > protocol::kMaxAuthTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat("ClientSessionOptions.auth_token is ",
                                                   auth_token.size(), " bytes, more than ",
                                                   protocol::kMaxAuthTokenBytes));
  }
  if (auth_token.empty() && !insecure) {
    return absl::InvalidArgumentError(
        "no token: give --auth_token_file, or --insecure to connect to a server without tokens "
        "(its replies then go unproven)");
  }
  if (!auth_token.empty() && insecure) {
    return absl::InvalidArgumentError("--insecure with a token: give one or the other");
  }
  if (!auth_token.empty() && auth_token.size() < protocol::kMinAuthTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat("ClientSessionOptions.auth_token is ",
                                                   auth_token.size(), " bytes, fewer than ",
                                                   protocol::kMinAuthTokenBytes));
  }
  if (connect_deadline < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ClientSessionOptions.connect_deadline=", absl::FormatDuration(connect_deadline),
        " must be >= 0"));
  }
  if (retry_initial <= absl::ZeroDuration() || retry_max < retry_initial) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ClientSessionOptions.retry_initial=", absl::FormatDuration(retry_initial),
        " retry_max=", absl::FormatDuration(retry_max), ": need 0 < retry_initial <= retry_max"));
  }
  if (op_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ClientSessionOptions.op_timeout=", absl::FormatDuration(op_timeout), " must be > 0"));
  }
  return qp.Validate();
}

bool IsConnectionFailure(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:       // peer gone, not connected
    case absl::StatusCode::kAborted:           // flushed after an earlier failure
    case absl::StatusCode::kDeadlineExceeded:  // no completion in time
    case absl::StatusCode::kInternal:          // remote operation error
    case absl::StatusCode::kPermissionDenied:  // keys revoked (server stopping)
      return true;
    default:
      return false;
  }
}

absl::StatusOr<std::unique_ptr<RegisteredBuffer>> RegisteredBuffer::Create(
    verbs::Provider* provider, size_t bytes, uint32_t access) {
  if (bytes == 0) return absl::InvalidArgumentError("RegisteredBuffer of 0 bytes");
  std::unique_ptr<RegisteredBuffer> buffer(new RegisteredBuffer());
  const size_t rounded = protocol::RoundUp(bytes, protocol::kRegionAlignment);
  buffer->data_ = static_cast<uint8_t*>(std::aligned_alloc(protocol::kRegionAlignment, rounded));
  if (buffer->data_ == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", rounded, " bytes"));
  }
  std::memset(buffer->data_, 0, rounded);
  buffer->bytes_ = bytes;
  ASSIGN_OR_RETURN(buffer->mr_, provider->RegisterMemory(buffer->data_, bytes, access));
  return buffer;
}

RegisteredBuffer::~RegisteredBuffer() {
  mr_.reset();  // deregister before the memory goes
  std::free(data_);
}

ClientSession::ClientSession(verbs::Provider* provider, const ClientSessionOptions& options)
    : provider_(provider), options_(options), sinks_(1), outstanding_(1, 0) {}

ClientSession::~ClientSession() {
  // The queue pair goes first: nothing may land in the buffers afterwards.
  qp_.reset();
}

absl::StatusOr<std::unique_ptr<ClientSession>> ClientSession::Connect(
    verbs::Provider* provider, const ClientSessionOptions& options) {
  if (provider == nullptr) return absl::InvalidArgumentError("ClientSession needs a provider");
  RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<ClientSession> session(new ClientSession(provider, options));
  ASSIGN_OR_RETURN(session->scratch_, RegisteredBuffer::Create(provider, kScratchBytes));
  if (options.heartbeat) {
    ASSIGN_OR_RETURN(session->heartbeat_,
                     RegisteredBuffer::Create(provider, protocol::kCacheLine,
                                              verbs::kLocalWrite | verbs::kRemoteWrite));
  }
  ASSIGN_OR_RETURN(session->grant_,
                   RegisteredBuffer::Create(provider, protocol::kGrantRegionBytes,
                                            verbs::kLocalWrite | verbs::kRemoteWrite));
  RETURN_IF_ERROR(session->ConnectWithRetry(/*first=*/true));
  return session;
}

uint64_t ClientSession::last_heartbeat() const {
  return heartbeat_ == nullptr ? 0
                               : LoadAcquire(reinterpret_cast<const uint64_t*>(heartbeat_->data()));
}

absl::StatusOr<verbs::RemoteRegion> ClientSession::Region(protocol::RegionKind kind) const {
  if (!directory_.Has(kind)) {
    return absl::FailedPreconditionError(absl::StrCat("a ", protocol::RoleName(options_.role),
                                                      " has no access to region ",
                                                      protocol::RegionKindName(kind)));
  }
  const protocol::WireRegion& w = directory_.Get(kind);
  verbs::RemoteRegion r;
  r.addr = w.addr;
  r.length = w.length;
  r.rkey = w.rkey;
  return r;
}

absl::StatusOr<protocol::Nonce> ClientSession::RequestChallenge() {
  const std::string request = protocol::EncodeChallengeRequest(options_.role);
  absl::StatusOr<verbs::Connection> answer =
      provider_->Connect(options_.host, options_.port, request, options_.qp);
  if (answer.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the server at ", options_.host, ":", options_.port,
                     " accepted a challenge request: not a dreplay replay server of layout "
                     "version ",
                     protocol::kLayoutVersion));
  }
  absl::StatusOr<protocol::Nonce> nonce = protocol::ParseChallenge(answer.status());
  if (!nonce.ok()) return answer.status();  // the server's own refusal (version, ...)
  handshake_bytes_ += request.size() + protocol::ChallengeReason(*nonce).size();
  return nonce;
}

absl::Status ClientSession::ConnectOnce(bool first) {
  protocol::Hello hello;
  hello.role = options_.role;
  hello.actor_id = options_.actor_id;
  hello.learner_cache = options_.learner_cache;
  hello.learner_placement = options_.learner_placement;
  if (heartbeat_ != nullptr) {
    const verbs::RemoteRegion r = heartbeat_->mr()->remote();
    hello.heartbeat = protocol::WireRegion{r.addr, r.length, r.rkey, 0};
  }
  {
    const verbs::RemoteRegion r = grant_->mr()->remote();
    hello.grant = protocol::WireRegion{r.addr, r.length, r.rkey, 0};
    std::memset(grant_->data(), 0, grant_->size());  // no queue pair can write it now
  }
  ASSIGN_OR_RETURN(hello.server_nonce, RequestChallenge());
  ASSIGN_OR_RETURN(hello.client_nonce, protocol::RandomNonce());
  ASSIGN_OR_RETURN(const std::string payload, protocol::EncodeHello(hello, options_.auth_token));
  ASSIGN_OR_RETURN(verbs::Connection connection,
                   provider_->Connect(options_.host, options_.port, payload, options_.qp));
  ASSIGN_OR_RETURN(hello, protocol::DecodeHello(payload));  // with its MAC, for the proof
  absl::StatusOr<protocol::AcceptReply> reply = protocol::DecodeAccept(connection.reply);
  if (!reply.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the server at ", options_.host, ":", options_.port,
                     " replied with a bad region directory: ", reply.status().message()));
  }
  const absl::Status proof = protocol::CheckAcceptProof(*reply, hello, options_.auth_token);
  if (!proof.ok()) {
    return absl::PermissionDeniedError(
        absl::StrCat("the server at ", options_.host, ":", options_.port, ": ", proof.message()));
  }
  const protocol::RegionDirectory* directory = &reply->directory;
  if (!directory->Has(protocol::RegionKind::kControl)) {
    return absl::FailedPreconditionError("the server's region directory has no control block");
  }
  qp_ = std::move(connection.qp);
  handshake_bytes_ += payload.size() + connection.reply.size();
  ASSIGN_OR_RETURN(directory_, AwaitKeyGrant(hello, *directory));
  ResetSinks();
  ++generation_;  // the session's own READ below already uses this connection

  RETURN_IF_ERROR(ReadSync(protocol::RegionKind::kControl, 0, sizeof(protocol::ControlBlock),
                           scratch_->mr(), scratch_->data()));
  protocol::ControlBlock block;
  std::memcpy(&block, scratch_->data(), sizeof(block));
  RETURN_IF_ERROR(protocol::CheckControlHeader(block.header));
  if (first) {
    config_ = block.header.config;
  } else if (block.header.config != config_) {
    return absl::FailedPreconditionError(
        absl::StrCat("the server came back with another configuration (",
                     config_.FirstDifference(block.header.config), "); restart this client"));
  }
  RETURN_IF_ERROR(protocol::CheckDirectoryForRole(directory_, options_.role, block.header.config,
                                                  options_.learner_placement));
  server_line_ = block.server;
  policy_ = block.policy;
  return absl::OkStatus();
}

absl::StatusOr<protocol::RegionDirectory> ClientSession::AwaitKeyGrant(
    const protocol::Hello& hello, const protocol::RegionDirectory& accepted) {
  const uint64_t expected = protocol::GrantCommitValue(hello);
  const auto* commit =
      reinterpret_cast<const uint64_t*>(grant_->data() + protocol::kGrantCommitOffset);
  const absl::Time deadline = absl::Now() + options_.op_timeout;
  absl::Duration pause = absl::Microseconds(20);
  while (LoadAcquire(commit) != expected) {
    if (qp_->state() == verbs::QpState::kError) {
      const absl::Status error = qp_->error();
      return absl::UnavailableError(
          absl::StrCat("the connection failed before its keys arrived: ", error.message()));
    }
    if (absl::Now() > deadline) {
      return absl::UnavailableError(absl::StrCat("the server sent no keys within ",
                                                 absl::FormatDuration(options_.op_timeout)));
    }
    absl::SleepFor(pause);
    pause = std::min(pause * 2, absl::Milliseconds(5));
  }
  protocol::KeyGrantMessage grant;
  CopyFromShared(&grant, grant_->data(), sizeof(grant));
  return protocol::CheckKeyGrant(grant, accepted, hello, options_.auth_token);
}

absl::Status ClientSession::ConnectWithRetry(bool first) {
  const absl::Time deadline = absl::Now() + options_.connect_deadline;
  absl::Duration backoff = options_.retry_initial;
  int attempts = 0;
  while (true) {
    ++attempts;
    absl::Status status = ConnectOnce(first);
    if (status.ok()) {
      if (attempts > 1 || !first) {
        LOG(INFO) << protocol::RoleName(options_.role) << " connected to " << options_.host << ":"
                  << options_.port << " (connection " << generation_ << ", epoch "
                  << server_line_.epoch << ", " << attempts << " attempts)";
      }
      return absl::OkStatus();
    }
    DropQueuePair();
    if (!IsTransient(status) || absl::Now() + backoff > deadline) {
      return absl::Status(
          status.code(),
          absl::StrCat("connecting to the replay server at ", options_.host, ":", options_.port,
                       " as ", protocol::RoleName(options_.role), ": ", status.message()));
    }
    VLOG(1) << "connect attempt " << attempts << " failed (" << status << "), retrying in "
            << absl::FormatDuration(backoff);
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, options_.retry_max);
  }
}

absl::Status ClientSession::Reconnect(uint64_t seen_generation, const absl::Status& why) {
  if (seen_generation != generation_ && qp_ != nullptr) return absl::OkStatus();
  LOG(WARNING) << protocol::RoleName(options_.role) << " connection " << generation_ << " to "
               << options_.host << ":" << options_.port << " failed (" << why << "); reconnecting";
  DropQueuePair();
  ResetSinks();
  return ConnectWithRetry(/*first=*/false);
}

absl::StatusOr<int> ClientSession::AddSink() {
  if (num_sinks_ > kMaxSinks) {
    return absl::ResourceExhaustedError(
        absl::StrCat("a session has at most ", kMaxSinks, " completion sinks"));
  }
  sinks_.emplace_back();
  outstanding_.push_back(0);
  return num_sinks_++;
}

void ClientSession::ResetSinks() {
  for (auto& sink : sinks_) sink.clear();
  std::fill(outstanding_.begin(), outstanding_.end(), 0);
}

void ClientSession::CountPosted(absl::Span<const verbs::WorkRequest> wrs) {
  for (const verbs::WorkRequest& wr : wrs) {
    const auto sink = static_cast<size_t>(wr.wr_id >> (64 - kSinkBits));
    if (wr.signaled && sink < outstanding_.size()) ++outstanding_[sink];
  }
}

void ClientSession::Settle(int sink) {
  CHECK(sink >= 0 && static_cast<size_t>(sink) < sinks_.size()) << "bad sink " << sink;
  const absl::Time deadline = absl::Now() + options_.op_timeout;
  while (qp_ != nullptr && qp_->state() != verbs::QpState::kError) {
    Drain();
    if (outstanding_[sink] == 0) break;
    if (absl::Now() >= deadline) {
      LOG(WARNING) << outstanding_[sink] << " requests of completion sink " << sink
                   << " still outstanding after " << absl::FormatDuration(options_.op_timeout);
      break;
    }
    absl::SleepFor(kPollSleep);
  }
  sinks_[sink].clear();
}

absl::Status ClientSession::Post(absl::Span<const verbs::WorkRequest> wrs, TrafficClass traffic) {
  if (qp_ == nullptr) return absl::UnavailableError("not connected");
  RETURN_IF_ERROR(qp_->PostSend(wrs));
  CountPosted(wrs);
  verbs::QueuePairTraffic t;
  verbs::CountInitiated(wrs, &t);
  posted_.Add(traffic, t.initiated());
  return absl::OkStatus();
}

absl::Status ClientSession::Post(absl::Span<const verbs::WorkRequest> wrs,
                                 absl::Span<const TrafficClass> classes) {
  CHECK_EQ(wrs.size(), classes.size()) << "one traffic class per work request";
  if (qp_ == nullptr) return absl::UnavailableError("not connected");
  RETURN_IF_ERROR(qp_->PostSend(wrs));
  CountPosted(wrs);
  for (size_t i = 0; i < wrs.size(); ++i) {
    verbs::QueuePairTraffic t;
    verbs::CountInitiated(wrs.subspan(i, 1), &t);
    posted_.Add(classes[i], t.initiated());
  }
  return absl::OkStatus();
}

void ClientSession::DropQueuePair() {
  if (qp_ != nullptr) retired_ += qp_->traffic();
  qp_.reset();
}

verbs::QueuePairTraffic ClientSession::traffic() const {
  verbs::QueuePairTraffic t = retired_;
  if (qp_ != nullptr) t += qp_->traffic();
  return t;
}

const LinkBytes& ClientSession::link_bytes() const {
  link_bytes_ = posted_;
  link_bytes_.control += traffic().peer() + handshake_bytes_;
  return link_bytes_;
}

void ClientSession::Drain() {
  if (qp_ == nullptr) return;
  verbs::Completion batch[kPollBatch];
  while (true) {
    const int n = qp_->Poll(absl::MakeSpan(batch));
    for (int i = 0; i < n; ++i) {
      const auto sink = static_cast<size_t>(batch[i].wr_id >> (64 - kSinkBits));
      if (sink < sinks_.size()) {
        // Error completions may include unsignaled requests: never below 0.
        if (outstanding_[sink] > 0) --outstanding_[sink];
        sinks_[sink].push_back(std::move(batch[i]));
      } else {
        LOG(ERROR) << "completion for unknown sink " << sink << ": " << batch[i].ToStatus();
      }
    }
    if (n < kPollBatch) return;
  }
}

int ClientSession::Poll(int sink, absl::Span<verbs::Completion> out) {
  CHECK(sink >= 0 && static_cast<size_t>(sink) < sinks_.size()) << "bad sink " << sink;
  Drain();
  std::deque<verbs::Completion>& queue = sinks_[sink];
  int n = 0;
  while (n < static_cast<int>(out.size()) && !queue.empty()) {
    out[n++] = std::move(queue.front());
    queue.pop_front();
  }
  return n;
}

absl::Status ClientSession::Wait(int sink, uint64_t wr_id, absl::Duration timeout) {
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + timeout;
  verbs::Completion completions[kPollBatch];
  while (true) {
    const int n = Poll(sink, absl::MakeSpan(completions));
    for (int i = 0; i < n; ++i) {
      if (!completions[i].ok()) return completions[i].ToStatus();
      if (completions[i].wr_id == wr_id) return absl::OkStatus();
    }
    if (n > 0) continue;
    if (qp_ == nullptr) return absl::UnavailableError("not connected");
    if (qp_->state() == verbs::QpState::kError) {
      // The flush completions may not have been polled yet; prefer them.
      Drain();
      if (!sinks_[sink].empty()) continue;
      const absl::Status error = qp_->error();
      return error.ok() ? absl::UnavailableError("queue pair failed") : error;
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no completion within ", absl::FormatDuration(timeout), " (wr_id ", wr_id, ")"));
    }
    if (now - start > kSpinBeforeSleep) absl::SleepFor(kPollSleep);
  }
}

absl::Status ClientSession::ReadSync(protocol::RegionKind kind, uint64_t offset, uint32_t length,
                                     const verbs::MemoryRegion* mr, void* local,
                                     TrafficClass traffic) {
  ASSIGN_OR_RETURN(const verbs::RemoteRegion region, Region(kind));
  if (offset > region.length || length > region.length - offset) {
    return absl::OutOfRangeError(
        absl::StrCat("READ of [", offset, ", +", length, ") is outside region ",
                     protocol::RegionKindName(kind), " of ", region.length, " bytes"));
  }
  verbs::WorkRequest wr;
  wr.wr_id = WrId(0, next_sync_id_++);
  wr.opcode = verbs::Opcode::kRead;
  wr.signaled = true;
  wr.local = mr;
  wr.local_addr = local;
  wr.length = length;
  wr.remote_addr = region.addr + offset;
  wr.rkey = region.rkey;
  RETURN_IF_ERROR(Post(absl::MakeConstSpan(&wr, 1), traffic));
  return Wait(0, wr.wr_id, options_.op_timeout);
}

absl::StatusOr<protocol::ServerLine> ClientSession::ReadServerLine(TrafficClass traffic) {
  RETURN_IF_ERROR(ReadSync(protocol::RegionKind::kControl, offsetof(protocol::ControlBlock, server),
                           sizeof(protocol::ServerLine), scratch_->mr(), scratch_->data(),
                           traffic));
  std::memcpy(&server_line_, scratch_->data(), sizeof(server_line_));
  return server_line_;
}

}  // namespace dreplay::client
