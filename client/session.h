// Copyright dreplay authors.
//
// session.h: a client's connection to a replay server.
//
// Every client (actor, learner, monitor) starts here. A ClientSession
// asks the server for a challenge, connects a queue pair to the server with
// the hello (role, actor id, both nonces and an HMAC keyed with the role's
// token, which is never sent; protocol/handshake.h), checks the server's
// proof that it holds the token too, takes the RegionDirectory it replies with,
// waits for the keys the server then WRITEs over the queue pair (memory
// windows valid on this connection only; protocol/key_grant.h),
// READs the control block and checks its magic, layout version and config.
// From then on the clients work from `config()` (the server's published
// LayoutConfig), never from flags of their own.
//
//   ClientSessionOptions options;
//   options.host = "10.0.0.2";
//   options.port = 7471;
//   options.role = Role::kLearner;
//   options.qp.link = *verbs::ParseLinkModel("10km-25g");  // soft provider
//   ASSIGN_OR_RETURN(auto session, ClientSession::Connect(provider, options));
//   ASSIGN_OR_RETURN(auto reader, BatchReader::Create(session.get(), {}));
//   ASSIGN_OR_RETURN(auto writer, PriorityWriter::Create(session.get()));
//
// Several clients share one session (and its queue pair): a learner's batch
// reader, priority writer and parameter publisher, an actor's experience
// writer, parameter fetcher and stats publisher. Each takes a completion
// sink (AddSink) and tags its work requests with WrId(sink, id); Poll(sink)
// returns only that sink's completions.
//
// Failures and reconnection: a queue pair that fails (server crashed or
// restarted, link down, an access error) stays failed. The client that
// notices calls Reconnect(generation it used): the session connects again
// with exponential back-off (transient failures: server unreachable, a
// retryable refusal such as "another learner is connected"), receives fresh
// keys and READs the control block again. generation() counts connections;
// every client compares it with the one its outstanding requests were posted
// on and starts over (its requests are gone) when it changed. If the server
// comes back with another LayoutConfig, Reconnect fails with
// FailedPrecondition naming the first difference: the clients' buffers are
// sized for the old one.
//
// Link accounting: every operation posted through the session is counted by
// the TrafficClass its client names (link_bytes.h); the session's own READs
// (control block, ServerLine) and the handshake payloads are control, and so
// are the operations the server initiates on the queue pair (heartbeat
// WRITEs), as far as the provider sees them (verbs::QueuePairTraffic).
// Across all connections of the session:
//   link_bytes().total() == traffic().total() + handshake_bytes()
//
// Link emulation (soft provider): the connecting side's options.qp.link is
// applied to both directions of the connection, so the link is specified on
// the client: the learner's long-haul link on the learner, none (or a short
// one) on the actors.
//
// Thread safety: not thread-safe. A session and the clients that share it
// are used by one thread (or under the caller's lock). Blocking calls are
// marked; everything else returns at once.

#ifndef DREPLAY_CLIENT_SESSION_H_
#define DREPLAY_CLIENT_SESSION_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/link_bytes.h"
#include "protocol/handshake.h"
#include "protocol/layout.h"
#include "verbs/verbs.h"

namespace dreplay::client {

struct ClientSessionOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // the server's port; must be set
  protocol::Role role = protocol::Role::kActor;
  uint32_t actor_id = 0;  // actors: < the server's max_actors
  // The token of this client's role (an actor: its own credential,
  // protocol::ActorCredential): used as an HMAC key to answer the server's
  // challenge and to check the server's proof; never sent
  // (protocol/handshake.h). At least protocol::kMinAuthTokenBytes.
  std::string auth_token;
  // Connect without a token to a server that has none, taking its replies
  // unproven (anyone on the path may pose as the server). Validate() refuses
  // an empty auth_token unless this is set, and this with a token.
  bool insecure = false;
  // Queue pair options; link (soft provider) emulates the link to the server.
  verbs::QueuePairOptions qp;
  // Connect() and Reconnect() retry transient failures for this long
  // (0: one attempt), backing off from retry_initial to retry_max.
  absl::Duration connect_deadline = absl::Seconds(10);
  absl::Duration retry_initial = absl::Milliseconds(10);
  absl::Duration retry_max = absl::Milliseconds(500);
  // Blocking one-shot operations (ReadSync, ...) fail after this long.
  absl::Duration op_timeout = absl::Seconds(10);
  // Offer the server a heartbeat word (protocol/handshake.h), so that it can tell
  // when this client is gone.
  bool heartbeat = true;
  // Learners: tell the server (Hello::learner_cache) that this learner keeps
  // every transition it receives (BatchReaderOptions::learner_cache), so it
  // may stage references to transitions already sent. Set both or neither.
  bool learner_cache = false;
  // Learners: tell the server (Hello::learner_placement) that this learner
  // runs the learner placement, so that it is given READ keys to the slot
  // ring, the commit words and the forward journal (a ForwardReader needs
  // them). Without it the directory leaves those regions out.
  bool learner_placement = false;

  // OK, or InvalidArgument naming the bad field and value.
  absl::Status Validate() const;
};

// True when an operation's status means the connection failed (a failed or
// flushed completion, a queue pair in error, no completion in time), so that
// Reconnect() may help; false for local misuse (InvalidArgument, OutOfRange,
// FailedPrecondition) and a full send queue (ResourceExhausted).
bool IsConnectionFailure(const absl::Status& status);

// Page-aligned, zero-filled local memory registered with a provider: the
// buffers clients READ into and WRITE from.
class RegisteredBuffer {
 public:
  // InvalidArgument for 0 bytes; ResourceExhausted when the memory cannot be
  // allocated; the provider's registration errors.
  static absl::StatusOr<std::unique_ptr<RegisteredBuffer>> Create(
      verbs::Provider* provider, size_t bytes, uint32_t access = verbs::kLocalWrite);
  ~RegisteredBuffer();
  RegisteredBuffer(const RegisteredBuffer&) = delete;
  RegisteredBuffer& operator=(const RegisteredBuffer&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return bytes_; }
  const verbs::MemoryRegion* mr() const { return mr_.get(); }

 private:
  RegisteredBuffer() = default;
  uint8_t* data_ = nullptr;
  size_t bytes_ = 0;
  std::unique_ptr<verbs::MemoryRegion> mr_;
};

class ClientSession {
 public:
  // A sink's tag is kept in the top bits of a work request id.
  static constexpr int kSinkBits = 8;
  static constexpr int kMaxSinks = (1 << kSinkBits) - 1;  // sink 0 is the session's own
  static constexpr uint64_t kMaxWrIdPayload = (uint64_t{1} << (64 - kSinkBits)) - 1;

  // Connects (blocking, retrying as options say). `provider` is not owned and
  // must outlive the session. Errors: InvalidArgument (options),
  // PermissionDenied (refused: bad token, role limits; the server's reason in
  // the message), FailedPrecondition (layout version or a malformed control
  // block), Unavailable / DeadlineExceeded (no server within the deadline).
  static absl::StatusOr<std::unique_ptr<ClientSession>> Connect(
      verbs::Provider* provider, const ClientSessionOptions& options);
  ~ClientSession();
  ClientSession(const ClientSession&) = delete;
  ClientSession& operator=(const ClientSession&) = delete;

  const ClientSessionOptions& options() const { return options_; }
  verbs::Provider* provider() const { return provider_; }
  // The server's published configuration; the same for the session's life.
  const protocol::LayoutConfig& config() const { return config_; }
  const protocol::RegionDirectory& directory() const { return directory_; }
  // The remote region of `kind`; FailedPrecondition when this role was not
  // given it (the server never sends a key a role must not use).
  absl::StatusOr<verbs::RemoteRegion> Region(protocol::RegionKind kind) const;
  // The server's replay policy, as READ at the last connection (written
  // once by a server process, so a server restarted with other flags shows
  // its own after the reconnection).
  const protocol::PolicyLine& policy() const { return policy_; }
  // The ServerLine as last READ (at connect, or by ReadServerLine).
  const protocol::ServerLine& server_line() const { return server_line_; }
  uint64_t epoch() const { return server_line_.epoch; }
  // 1 for the first connection, +1 for every reconnection.
  uint64_t generation() const { return generation_; }
  // The current queue pair (changes on Reconnect). Prefer Post/Poll.
  verbs::QueuePair* qp() const { return qp_.get(); }
  // The value of the server's last heartbeat WRITE (its epoch; 0: none yet).
  uint64_t last_heartbeat() const;

  // Completion routing. AddSink returns a new sink (1..kMaxSinks);
  // ResourceExhausted when none is left.
  absl::StatusOr<int> AddSink();
  static uint64_t WrId(int sink, uint64_t payload) {
    return (static_cast<uint64_t>(sink) << (64 - kSinkBits)) | (payload & kMaxWrIdPayload);
  }
  static uint64_t WrIdPayload(uint64_t wr_id) { return wr_id & kMaxWrIdPayload; }
  // Posts on the current queue pair (verbs::QueuePair::PostSend), counting
  // the requests' data bytes as `traffic` in link_bytes() when accepted.
  // The default is for clients whose traffic is all control.
  absl::Status Post(absl::Span<const verbs::WorkRequest> wrs,
                    TrafficClass traffic = TrafficClass::kControl);
  // The same with one class per request. REQUIRES: classes.size() ==
  // wrs.size().
  absl::Status Post(absl::Span<const verbs::WorkRequest> wrs,
                    absl::Span<const TrafficClass> classes);
  // Moves up to out.size() completions of `sink` into `out`; returns how
  // many. Non-blocking.
  int Poll(int sink, absl::Span<verbs::Completion> out);
  // Waits (blocking, up to `timeout`) for the completion of `wr_id` on
  // `sink`; returns its status. An error completion of any other request of
  // the sink also ends the wait with that error. Other successful
  // completions of the sink are dropped: use it only on a sink whose
  // requests are all waited for this way.
  absl::Status Wait(int sink, uint64_t wr_id, absl::Duration timeout);
  // Waits (up to op_timeout) until every signaled request that `sink` posted
  // on the current queue pair has completed, then drops the sink's
  // completions. A client calls it before it frees the memory its requests
  // use: deregistering memory under an outstanding request fails the queue
  // pair. Returns at once when the queue pair has already failed.
  void Settle(int sink);

  // Reconnects (blocking; see the file comment) if generation() is still
  // `seen_generation`; returns OK at once if someone already did. `why` is
  // logged. Errors as Connect, plus FailedPrecondition for a changed config.
  absl::Status Reconnect(uint64_t seen_generation, const absl::Status& why);

  // Blocking one-shot READ of [offset, offset + length) of region `kind`
  // into `local` (inside the registered `mr`). Errors: FailedPrecondition
  // (no such region for this role), OutOfRange (outside the region), the
  // completion's error, DeadlineExceeded after op_timeout.
  // The READ is counted as `traffic`.
  absl::Status ReadSync(protocol::RegionKind kind, uint64_t offset, uint32_t length,
                        const verbs::MemoryRegion* mr, void* local,
                        TrafficClass traffic = TrafficClass::kControl);
  // Blocking READ of the control block's ServerLine; updates server_line().
  // Counted as `traffic` (a client that asks whether there is something new
  // says kPolling).
  absl::StatusOr<protocol::ServerLine> ReadServerLine(
      TrafficClass traffic = TrafficClass::kControl);

  // The bytes this session moved across its link, by class, over all its
  // connections (see the file comment). The reference stays valid for the
  // session's life; its values are those of the latest call.
  const LinkBytes& link_bytes() const;
  // The queue pairs' own counts, over all connections of the session.
  verbs::QueuePairTraffic traffic() const;
  // Challenge, hello and accept payload bytes of the handshakes (control).
  uint64_t handshake_bytes() const { return handshake_bytes_; }

 private:
  ClientSession(verbs::Provider* provider, const ClientSessionOptions& options);
  // One connection attempt: connect, handshake, READ and check the control
  // block. `first` sets config_, else it must equal config_.
  absl::Status ConnectOnce(bool first);
  // The handshake's first exchange: the server's nonce (from its refusal);
  // the server's own refusal when it sent no challenge.
  absl::StatusOr<protocol::Nonce> RequestChallenge();
  // Retries ConnectOnce while the failure is transient.
  absl::Status ConnectWithRetry(bool first);
  // Waits (up to op_timeout) for the key grant of the connection just made
  // and returns its directory (protocol/key_grant.h, CheckKeyGrant).
  absl::StatusOr<protocol::RegionDirectory> AwaitKeyGrant(
      const protocol::Hello& hello, const protocol::RegionDirectory& accepted);
  // Moves everything the queue pair completed into the sinks.
  void Drain();
  // Destroys the queue pair, keeping its traffic counts.
  void DropQueuePair();
  // Empties every sink: a new connection starts with nothing outstanding.
  void ResetSinks();
  // Counts the signaled requests just posted against their sinks.
  void CountPosted(absl::Span<const verbs::WorkRequest> wrs);

  verbs::Provider* const provider_;
  const ClientSessionOptions options_;

  // Scratch for the session's own READs (control block, ServerLine).
  std::unique_ptr<RegisteredBuffer> scratch_;
  // Heartbeat word the server WRITEs (registered remote-writable).
  std::unique_ptr<RegisteredBuffer> heartbeat_;
  // Where the server WRITEs each connection's keys (protocol/key_grant.h).
  std::unique_ptr<RegisteredBuffer> grant_;

  std::unique_ptr<verbs::QueuePair> qp_;
  protocol::RegionDirectory directory_;
  protocol::LayoutConfig config_;
  protocol::ServerLine server_line_{};
  protocol::PolicyLine policy_{};
  uint64_t generation_ = 0;
  uint64_t next_sync_id_ = 1;
  int num_sinks_ = 1;
  std::vector<std::deque<verbs::Completion>> sinks_;
  // Per sink: signaled requests posted on the current queue pair and not
  // yet completed.
  std::vector<uint64_t> outstanding_;

  // Link accounting.
  LinkBytes posted_;                 // by the class their client named
  verbs::QueuePairTraffic retired_;  // of the queue pairs already gone
  uint64_t handshake_bytes_ = 0;
  mutable LinkBytes link_bytes_;  // returned by link_bytes()
};

}  // namespace dreplay::client

#endif  // DREPLAY_CLIENT_SESSION_H_
