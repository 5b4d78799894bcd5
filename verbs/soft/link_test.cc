// Copyright dreplay authors.
//
// The link emulator's schedule: serialisation, delay, jitter, order.

#include "verbs/soft/link.h"

#include "gtest/gtest.h"

namespace dreplay::verbs::soft {
namespace {

LinkModel Model(int64_t delay_us, double gbps, int64_t jitter_us = 0) {
  LinkModel model;
  model.one_way_delay = absl::Microseconds(delay_us);
  model.bandwidth_gbps = gbps;
  model.jitter = absl::Microseconds(jitter_us);
  return model;
}

constexpr int64_t kUs = 1000;

TEST(LinkEmulatorTest, ADisabledModelIsNotEnabled) {
  EXPECT_FALSE(LinkEmulator(LinkModel(), 1).enabled());
  EXPECT_TRUE(LinkEmulator(Model(50, 0), 1).enabled());
  EXPECT_TRUE(LinkEmulator(Model(0, 10), 1).enabled());
}

TEST(LinkEmulatorTest, DelayWithoutBandwidthLimitIsConstant) {
  LinkEmulator link(Model(500, 0), 1);
  const int64_t held = 500 * kUs - kHostPathNs;
  for (int64_t t : {1000 * kUs, 1001 * kUs, 5000 * kUs}) {
    const auto slot = link.Schedule(t, 1 << 20);
    EXPECT_EQ(slot.arrival_ns, t + held);
    EXPECT_EQ(slot.idle_arrival_ns, t + held);
  }
}

TEST(LinkEmulatorTest, DelaysShorterThanTheHostPathAddNothing) {
  LinkEmulator link(Model(15, 0), 1);
  EXPECT_EQ(link.Schedule(100, 8).arrival_ns, 100);
}

TEST(LinkEmulatorTest, FramesSerialiseBackToBackAtTheBandwidth) {
  // 1 Gb/s: 1000 bytes take 8 us.
  LinkEmulator link(Model(100, 1), 1);
  const int64_t held = 100 * kUs - kHostPathNs;
  const int64_t t0 = 1000000;
  const auto a = link.Schedule(t0, 1000);
  const auto b = link.Schedule(t0, 1000);
  const auto c = link.Schedule(t0, 1000);
  EXPECT_EQ(a.arrival_ns, t0 + 8 * kUs + held);
  EXPECT_EQ(b.arrival_ns, t0 + 16 * kUs + held);
  EXPECT_EQ(c.arrival_ns, t0 + 24 * kUs + held);
  // Queued frames could have arrived earlier on an idle link.
  EXPECT_EQ(b.idle_arrival_ns, t0 + 8 * kUs + held);
  // Once the link is idle again, a frame starts at once.
  const auto d = link.Schedule(t0 + 1000 * kUs, 1000);
  EXPECT_EQ(d.arrival_ns, t0 + 1008 * kUs + held);
  EXPECT_EQ(d.idle_arrival_ns, d.arrival_ns);
}

TEST(LinkEmulatorTest, JitterIsBoundedOrderedAndReproducible) {
  LinkEmulator a(Model(100, 0, 40), 7);
  LinkEmulator b(Model(100, 0, 40), 7);
  const int64_t held = 100 * kUs - kHostPathNs;
  int64_t last = 0;
  bool varied = false;
  for (int i = 0; i < 1000; ++i) {
    const int64_t t = i * 100 * kUs;
    const auto slot = a.Schedule(t, 64);
    EXPECT_EQ(slot.arrival_ns, b.Schedule(t, 64).arrival_ns);
    EXPECT_GE(slot.arrival_ns, t + held);
    EXPECT_LE(slot.arrival_ns, t + held + 40 * kUs);
    EXPECT_GE(slot.arrival_ns, last);
    EXPECT_LE(slot.idle_arrival_ns, slot.arrival_ns);
    if (slot.arrival_ns != t + held) varied = true;
    last = slot.arrival_ns;
  }
  EXPECT_TRUE(varied);
}

TEST(LinkEmulatorTest, JitterNeverReordersFrames) {
  LinkEmulator link(Model(10, 0, 1000), 3);
  int64_t last = 0;
  for (int i = 0; i < 1000; ++i) {
    const int64_t arrival = link.Schedule(i * 1000, 64).arrival_ns;
    EXPECT_GE(arrival, last);
    last = arrival;
  }
}

}  // namespace
}  // namespace dreplay::verbs::soft
