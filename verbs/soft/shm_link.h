// Copyright dreplay authors.
//
// shm_link.h: the Unix socket that links the two ends of a soft queue pair
// on the same host, for the same-host transport (provider.h): memfd
// segments are passed over it (SCM_RIGHTS), and a shared page counts the
// bytes each side moves on the other's memory without it and says when a
// side's queue pair is gone.
//
// Setup, inside the soft setup (wire.h):
//  1. The connector binds a SOCK_SEQPACKET socket at a random abstract name
//     (ShmOffer) and puts the name and a random nonce in its hello (sent
//     over TCP, so only the TCP peer knows the nonce).
//  2. The listener connects to that name (AnswerShmOffer). Abstract names
//     belong to a network namespace, so a peer on another host or in
//     another namespace is simply not found: TCP. It checks the socket's
//     owner (SO_PEERCRED: our uid or root, else TCP), sends the nonce and
//     the usage page's fd, and answers shm = 1 in its reply.
//  3. The connector accepts, checks the nonce and the listener's uid the
//     same way (ShmOffer::Complete), closing any other local process that
//     connected to the name first. No proof by the setup deadline fails the
//     connection: a bug, or somebody else answering in the listener's name.
//
// Thread safety: ShmOffer is used by one thread. ShmLink's methods may be
// called from any thread, but SendFds and ReceiveFds each by one at a time
// (the channel calls them under its lock).

#ifndef DREPLAY_VERBS_SOFT_SHM_LINK_H_
#define DREPLAY_VERBS_SOFT_SHM_LINK_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "verbs/soft/socket.h"
#include "verbs/soft/wire.h"
#include "verbs/verbs.h"

namespace dreplay::verbs::soft {

// The most fds one grant passes (SCM_MAX_FD is 253).
inline constexpr size_t kMaxSharedSegments = 250;

class ShmLink {
 public:
  // `socket`: the connected Unix socket; `page`: the mapped usage page of
  // kPageBytes (unmapped on destruction); `connector`: which half of it is
  // this side's.
  ShmLink(Fd socket, void* page, bool connector);
  ~ShmLink();
  ShmLink(const ShmLink&) = delete;
  ShmLink& operator=(const ShmLink&) = delete;

  static constexpr size_t kPageBytes = 4096;

  // Passes `fds` tagged with `tag`. Never blocks: kUnavailable when the
  // socket would block or is gone (the caller then keeps TCP).
  absl::Status SendFds(uint32_t tag, absl::Span<const int> fds);
  // Receives the next message: exactly `count` fds tagged `tag`, waiting at
  // most until `deadline` (the sender passed them before the frame that
  // announced them, so they are normally there). kDataLoss for another
  // tag or count (the fds received are closed); kUnavailable /
  // kDeadlineExceeded otherwise.
  absl::StatusOr<std::vector<Fd>> ReceiveFds(uint32_t tag, size_t count, absl::Time deadline);

  // Counts bytes this side moved on the peer's memory without the peer:
  // `out` written there, `in` read from there.
  void CountShared(uint64_t out, uint64_t in);
  // What the peer moved on this side's memory that way, as this side's
  // peer_in (its writes) and peer_out (its reads).
  QueuePairTraffic PeerShared() const;

  // This side's queue pair failed or is being destroyed: from now on the
  // peer executes nothing more on this side's memory through its mappings
  // (it checks peer_closed() before each operation), as a device's peer
  // finds the queue pair gone. Before the TCP close reaches the peer, too.
  void MarkClosed();
  // True once the peer called MarkClosed().
  bool peer_closed() const;

 private:
  const Fd socket_;
  uint64_t* const page_;
  const bool connector_;
};

// The connector's half of the setup.
class ShmOffer {
 public:
  // kUnavailable when the socket cannot be made (then the hello offers
  // nothing).
  static absl::StatusOr<std::unique_ptr<ShmOffer>> Create();

  // Puts the offer into a hello.
  void Fill(HelloHeader* hello) const;
  // The listener answered shm = 1: accepts connections before `deadline`
  // until one comes from our uid or root and proves the nonce (another
  // local process may connect to the name first: it is closed), and maps
  // the usage page. kPermissionDenied when only impostors came by the
  // deadline, kDeadlineExceeded when nobody did, kUnavailable otherwise.
  absl::StatusOr<std::unique_ptr<ShmLink>> Complete(absl::Time deadline);

 private:
  ShmOffer() = default;
  // Checks one accepted connection (kPermissionDenied: not the listener).
  absl::StatusOr<std::unique_ptr<ShmLink>> Verify(Fd conn, absl::Time deadline) const;

  Fd listen_;
  uint8_t name_[kShmNameBytes] = {};
  uint8_t nonce_[kShmNonceBytes] = {};
};

// The listener's half: null (use TCP) when the hello offers nothing, its
// socket cannot be reached (another host or network namespace), or its
// owner is neither this uid nor root; else the link, the nonce and page
// already sent. Never blocks (a local connect and one small send).
std::unique_ptr<ShmLink> AnswerShmOffer(const HelloHeader& hello);

}  // namespace dreplay::verbs::soft

#endif  // DREPLAY_VERBS_SOFT_SHM_LINK_H_
