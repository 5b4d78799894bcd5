// Copyright dreplay authors.
//
// Tests of the same-host link's setup (shm_link.h): the listener reaches the
// connector's abstract socket and proves the nonce; fds pass with their tag;
// a wrong nonce, a missing offer or a socket in another network namespace
// leave the connection on TCP.

#include "verbs/soft/shm_link.h"

#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace dreplay::verbs::soft {
namespace {

constexpr absl::Duration kWait = absl::Seconds(10);

TEST(ShmLinkTest, LinksBothEndsAndPassesTaggedFds) {
  auto offer = ShmOffer::Create();
  ASSERT_TRUE(offer.ok()) << offer.status();
  HelloHeader hello = {};
  (*offer)->Fill(&hello);
  std::unique_ptr<ShmLink> listener = AnswerShmOffer(hello);
  ASSERT_NE(listener, nullptr);
  auto connector = (*offer)->Complete(absl::Now() + kWait);
  ASSERT_TRUE(connector.ok()) << connector.status();

  const int fd = memfd_create("shm-link-test", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  ASSERT_TRUE(listener->SendFds(77, {&fd, 1}).ok());
  auto wrong = (*connector)->ReceiveFds(78, 1, absl::Now() + kWait);
  EXPECT_TRUE(absl::IsDataLoss(wrong.status())) << wrong.status();
  ASSERT_TRUE(listener->SendFds(77, {&fd, 1}).ok());
  auto fds = (*connector)->ReceiveFds(77, 1, absl::Now() + kWait);
  ASSERT_TRUE(fds.ok()) << fds.status();
  ASSERT_EQ(fds->size(), 1u);
  // The same file, reachable through the received fd.
  ASSERT_EQ(pwrite(fd, "x", 1, 10), 1);
  char c = 0;
  ASSERT_EQ(pread((*fds)[0].get(), &c, 1, 10), 1);
  EXPECT_EQ(c, 'x');
  close(fd);

  // The usage page: each side reads what the other counted.
  (*connector)->CountShared(100, 20);
  listener->CountShared(5, 0);
  EXPECT_EQ(listener->PeerShared().peer_in, 100u);
  EXPECT_EQ(listener->PeerShared().peer_out, 20u);
  EXPECT_EQ((*connector)->PeerShared().peer_in, 5u);
}

TEST(ShmLinkTest, NoOfferNoLink) {
  HelloHeader hello = {};
  EXPECT_EQ(AnswerShmOffer(hello), nullptr);
}

TEST(ShmLinkTest, AWrongNonceFailsTheConnector) {
  auto offer = ShmOffer::Create();
  ASSERT_TRUE(offer.ok()) << offer.status();
  HelloHeader hello = {};
  (*offer)->Fill(&hello);
  hello.shm_nonce[0] ^= 1;
  ASSERT_NE(AnswerShmOffer(hello), nullptr);
  auto connector = (*offer)->Complete(absl::Now() + absl::Milliseconds(200));
  EXPECT_TRUE(absl::IsPermissionDenied(connector.status())) << connector.status();
}

TEST(ShmLinkTest, AnImpostorConnectingFirstIsSkipped) {
  auto offer = ShmOffer::Create();
  ASSERT_TRUE(offer.ok()) << offer.status();
  HelloHeader hello = {};
  (*offer)->Fill(&hello);
  HelloHeader forged = hello;
  forged.shm_nonce[3] ^= 0x80;
  std::unique_ptr<ShmLink> impostor = AnswerShmOffer(forged);
  ASSERT_NE(impostor, nullptr);
  std::unique_ptr<ShmLink> listener = AnswerShmOffer(hello);
  ASSERT_NE(listener, nullptr);
  auto connector = (*offer)->Complete(absl::Now() + kWait);
  ASSERT_TRUE(connector.ok()) << connector.status();
  listener->CountShared(1, 2);
  EXPECT_EQ((*connector)->PeerShared().peer_in, 1u);
}

TEST(ShmLinkTest, AnOfferFromAnotherNetworkNamespaceIsNotReached) {
  // The offer is made by a thread in a network namespace of its own, as a
  // peer in a container or on another host would be.
  absl::StatusOr<std::unique_ptr<ShmOffer>> offer;
  int unshare_errno = 0;
  std::thread other([&] {
    if (unshare(CLONE_NEWNET) != 0) {
      unshare_errno = errno;
      return;
    }
    offer = ShmOffer::Create();
  });
  other.join();
  if (unshare_errno != 0) {
    GTEST_SKIP() << "unshare(CLONE_NEWNET) needs root: " << std::strerror(unshare_errno);
  }
  ASSERT_TRUE(offer.ok()) << offer.status();
  HelloHeader hello = {};
  (*offer)->Fill(&hello);
  EXPECT_EQ(AnswerShmOffer(hello), nullptr);
}

}  // namespace
}  // namespace dreplay::verbs::soft
