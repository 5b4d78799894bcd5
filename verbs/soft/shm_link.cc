// Copyright dreplay authors.

#include "verbs/soft/shm_link.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace dreplay::verbs::soft {
namespace {

// Page words: [0] connector's shared-path bytes out, [1] in; [2], [3] the
// listener's; [4] the connector's closed word, [5] the listener's.
constexpr int kWordsPerSide = 2;
constexpr int kClosedWord = 4;
// How long an accepted connection may take to prove the nonce.
constexpr absl::Duration kProofWait = absl::Milliseconds(100);

absl::Status Errno(const char* what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

bool FillRandom(void* p, size_t n) { return getrandom(p, n, 0) == static_cast<ssize_t>(n); }

// The abstract address of `name`: a 0 byte, "dreplay-", the name in hex.
socklen_t AbstractAddress(const uint8_t* name, sockaddr_un* addr) {
  std::memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  std::string path = "dreplay-";
  static const char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < kShmNameBytes; ++i) {
    path += kHex[name[i] >> 4];
    path += kHex[name[i] & 15];
  }
  std::memcpy(addr->sun_path + 1, path.data(), path.size());
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + path.size());
}

// True if the process at the other end of `fd` runs as our uid or as root.
bool TrustedPeer(int fd) {
  ucred cred = {};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return false;
  return cred.uid == getuid() || cred.uid == 0;
}

absl::Status WaitFor(int fd, short events, absl::Time deadline) {
  for (;;) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return absl::DeadlineExceededError("same-host link: timeout");
    pollfd p = {fd, events, 0};
    const int ms = static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1000));
    const int r = poll(&p, 1, ms);
    if (r > 0) return absl::OkStatus();
    if (r < 0 && errno != EINTR) return Errno("same-host link: poll");
  }
}

// Sends `n` bytes and `fds` as one message, without blocking.
absl::Status SendMessage(int fd, const void* data, size_t n, absl::Span<const int> fds) {
  iovec iov = {const_cast<void*>(data), n};
  msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<char> control(CMSG_SPACE(sizeof(int) * std::max<size_t>(fds.size(), 1)));
  if (!fds.empty()) {
    msg.msg_control = control.data();
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  const ssize_t sent = sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (sent != static_cast<ssize_t>(n)) return Errno("same-host link: sendmsg");
  return absl::OkStatus();
}

// Receives one message of up to `n` bytes and its fds.
absl::StatusOr<size_t> ReceiveMessage(int fd, void* data, size_t n, std::vector<Fd>* fds,
                                      absl::Time deadline) {
  std::vector<char> control(CMSG_SPACE(sizeof(int) * kMaxSharedSegments));
  for (;;) {
    iovec iov = {data, n};
    msghdr msg = {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    const ssize_t got = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) {
      absl::Status ready = WaitFor(fd, POLLIN, deadline);
      if (!ready.ok()) return ready;
      continue;
    }
    if (got < 0) return Errno("same-host link: recvmsg");
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int received;
        std::memcpy(&received, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        fds->emplace_back(received);
      }
    }
    if (got == 0) return absl::UnavailableError("same-host link: closed by the peer");
    if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
      return absl::DataLossError("same-host link: truncated message");
    }
    return static_cast<size_t>(got);
  }
}

// Makes and maps a sealed one-page memfd.
absl::StatusOr<std::pair<Fd, void*>> MakePage() {
  Fd fd(memfd_create("dreplay-shm-usage", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) return Errno("memfd_create");
  if (ftruncate(fd.get(), ShmLink::kPageBytes) != 0 ||
      fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return Errno("sizing the usage page");
  }
  void* page = mmap(nullptr, ShmLink::kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (page == MAP_FAILED) return Errno("mapping the usage page");
  return std::make_pair(std::move(fd), page);
}

}  // namespace

ShmLink::ShmLink(Fd socket, void* page, bool connector)
    : socket_(std::move(socket)), page_(static_cast<uint64_t*>(page)), connector_(connector) {}

ShmLink::~ShmLink() { munmap(page_, kPageBytes); }

absl::Status ShmLink::SendFds(uint32_t tag, absl::Span<const int> fds) {
  return SendMessage(socket_.get(), &tag, sizeof(tag), fds);
}

absl::StatusOr<std::vector<Fd>> ShmLink::ReceiveFds(uint32_t tag, size_t count,
                                                    absl::Time deadline) {
  std::vector<Fd> fds;
  uint32_t got_tag = 0;
  absl::StatusOr<size_t> got =
      ReceiveMessage(socket_.get(), &got_tag, sizeof(got_tag), &fds, deadline);
  if (!got.ok()) return got.status();
  if (*got != sizeof(got_tag) || got_tag != tag || fds.size() != count) {
    return absl::DataLossError(absl::StrCat("same-host link: expected ", count, " fds for key ",
                                            tag, ", got ", fds.size(), " for key ", got_tag));
  }
  return fds;
}

void ShmLink::CountShared(uint64_t out, uint64_t in) {
  uint64_t* mine = page_ + (connector_ ? 0 : kWordsPerSide);
  // One writer per word: this side's application thread.
  __atomic_store_n(&mine[0], __atomic_load_n(&mine[0], __ATOMIC_RELAXED) + out, __ATOMIC_RELAXED);
  __atomic_store_n(&mine[1], __atomic_load_n(&mine[1], __ATOMIC_RELAXED) + in, __ATOMIC_RELAXED);
}

void ShmLink::MarkClosed() {
  __atomic_store_n(&page_[kClosedWord + (connector_ ? 0 : 1)], 1, __ATOMIC_SEQ_CST);
}

bool ShmLink::peer_closed() const {
  return __atomic_load_n(&page_[kClosedWord + (connector_ ? 1 : 0)], __ATOMIC_SEQ_CST) != 0;
}

QueuePairTraffic ShmLink::PeerShared() const {
  const uint64_t* theirs = page_ + (connector_ ? kWordsPerSide : 0);
  QueuePairTraffic t;
  t.peer_in = __atomic_load_n(&theirs[0], __ATOMIC_RELAXED);
  t.peer_out = __atomic_load_n(&theirs[1], __ATOMIC_RELAXED);
  return t;
}

absl::StatusOr<std::unique_ptr<ShmOffer>> ShmOffer::Create() {
  std::unique_ptr<ShmOffer> offer(new ShmOffer);
  if (!FillRandom(offer->name_, sizeof(offer->name_)) ||
      !FillRandom(offer->nonce_, sizeof(offer->nonce_))) {
    return Errno("getrandom");
  }
  offer->listen_ = Fd(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!offer->listen_.valid()) return Errno("same-host link: socket");
  sockaddr_un addr;
  const socklen_t len = AbstractAddress(offer->name_, &addr);
  if (bind(offer->listen_.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      listen(offer->listen_.get(), 8) != 0) {
    return Errno("same-host link: bind");
  }
  return offer;
}

void ShmOffer::Fill(HelloHeader* hello) const {
  std::memcpy(hello->shm_name, name_, sizeof(name_));
  std::memcpy(hello->shm_nonce, nonce_, sizeof(nonce_));
}

absl::StatusOr<std::unique_ptr<ShmLink>> ShmOffer::Complete(absl::Time deadline) {
  // Anybody on the host can connect to an abstract name; only the one that
  // proves the nonce is the listener. The others are closed and waited past.
  absl::Status refused;
  for (;;) {
    Fd conn(accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!conn.valid()) {
      if (errno != EAGAIN && errno != EINTR) return Errno("same-host link: accept");
      absl::Status ready = WaitFor(listen_.get(), POLLIN, deadline);
      if (!ready.ok()) return refused.ok() ? ready : refused;
      continue;
    }
    // The listener sent its nonce before its TCP reply, so it is already
    // here; an impostor that sends nothing costs at most kProofWait.
    absl::StatusOr<std::unique_ptr<ShmLink>> link =
        Verify(std::move(conn), std::min(deadline, absl::Now() + kProofWait));
    if (link.ok() || !absl::IsPermissionDenied(link.status())) return link;
    refused = link.status();
  }
}

absl::StatusOr<std::unique_ptr<ShmLink>> ShmOffer::Verify(Fd conn, absl::Time deadline) const {
  if (!TrustedPeer(conn.get())) {
    return absl::PermissionDeniedError("same-host link: the listener runs as another user");
  }
  uint8_t nonce[kShmNonceBytes];
  std::vector<Fd> fds;
  absl::StatusOr<size_t> got = ReceiveMessage(conn.get(), nonce, sizeof(nonce), &fds, deadline);
  if (!got.ok() || *got != sizeof(nonce) || std::memcmp(nonce, nonce_, sizeof(nonce)) != 0 ||
      fds.size() != 1) {
    return absl::PermissionDeniedError("same-host link: the listener did not prove the nonce");
  }
  void* page =
      mmap(nullptr, ShmLink::kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0].get(), 0);
  if (page == MAP_FAILED) return Errno("same-host link: mapping the usage page");
  return std::make_unique<ShmLink>(std::move(conn), page, /*connector=*/true);
}

std::unique_ptr<ShmLink> AnswerShmOffer(const HelloHeader& hello) {
  static const uint8_t kNone[kShmNameBytes] = {};
  if (std::memcmp(hello.shm_name, kNone, kShmNameBytes) == 0) return nullptr;
  Fd sock(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!sock.valid()) return nullptr;
  sockaddr_un addr;
  const socklen_t len = AbstractAddress(hello.shm_name, &addr);
  // A local connect completes at once or fails (no such name here).
  if (connect(sock.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    VLOG(1) << "same-host link not reachable: " << std::strerror(errno);
    return nullptr;
  }
  if (!TrustedPeer(sock.get())) {
    VLOG(1) << "same-host link refused: the peer runs as another user";
    return nullptr;
  }
  absl::StatusOr<std::pair<Fd, void*>> page = MakePage();
  if (!page.ok()) {
    VLOG(1) << page.status();
    return nullptr;
  }
  const int page_fd = page->first.get();
  absl::Status sent = SendMessage(sock.get(), hello.shm_nonce, kShmNonceBytes, {&page_fd, 1});
  if (!sent.ok()) {
    munmap(page->second, ShmLink::kPageBytes);
    VLOG(1) << sent;
    return nullptr;
  }
  return std::make_unique<ShmLink>(std::move(sock), page->second, /*connector=*/false);
}

}  // namespace dreplay::verbs::soft
