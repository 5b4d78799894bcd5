// Copyright dreplay authors.

#include "tools/replay_monitor.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace dreplay::tools {
namespace {

using protocol::ActorLine;

MonitorSnapshot At(uint64_t server_seconds, uint64_t inserted, uint64_t sampled) {
  MonitorSnapshot s;
  s.stats.epoch = 1;
  s.stats.server_time_ns = server_seconds * 1'000'000'000;
  s.stats.inserted = inserted;
  s.stats.sampled = sampled;
  s.stats.batches_staged = sampled / 8;
  s.stats.batches_released = sampled / 8;
  s.stats.capacity = 1024;
  s.taken = absl::FromUnixSeconds(1'700'000'000);
  return s;
}

ActorLine Line(uint32_t id, uint64_t steps, uint64_t updated_s) {
  ActorLine line = {};
  line.actor_id = id;
  line.env_steps = steps;
  line.episodes = 3;
  line.returns_count = 2;
  line.returns_sum = 30;
  line.last_return = 12.5;
  line.transitions = steps / 2;
  line.updated_ns = updated_s * 1'000'000'000;
  return line;
}

MonitorInfo Info() {
  MonitorInfo info;
  info.server = "127.0.0.1:7471";
  info.config.capacity = 1024;
  info.config.slot_size = 160;
  info.config.batch_size = 8;
  info.config.staging_depth = 4;
  EXPECT_TRUE(info.config.set_spec("test \"f32\"").ok());
  return info;
}

TEST(ReplayMonitorTest, RatesAreCounterDeltasOverTheServersClock) {
  const MonitorSnapshot a = At(10, 1000, 800);
  const MonitorSnapshot b = At(12, 5000, 2400);
  const std::optional<MonitorRates> r = ComputeRates(&a, b);
  ASSERT_TRUE(r.has_value());
  EXPECT_DOUBLE_EQ(r->window_s, 2);
  EXPECT_DOUBLE_EQ(r->inserts_per_s, 2000);
  EXPECT_DOUBLE_EQ(r->samples_per_s, 800);
  EXPECT_DOUBLE_EQ(r->batches_per_s, 100);
}

TEST(ReplayMonitorTest, NoRatesWithoutAnOlderSnapshotOfTheSameEpoch) {
  const MonitorSnapshot b = At(12, 5000, 2400);
  EXPECT_FALSE(ComputeRates(nullptr, b).has_value());
  EXPECT_FALSE(ComputeRates(&b, b).has_value()) << "the server has not refreshed its stats";
  MonitorSnapshot other_epoch = At(10, 1000, 800);
  other_epoch.stats.epoch = 2;
  EXPECT_FALSE(ComputeRates(&other_epoch, b).has_value());
}

TEST(ReplayMonitorTest, PriorityMeanIsSumOverSizeAndAbsentForAnEmptyMemory) {
  MonitorSnapshot s = At(1, 0, 0);
  EXPECT_FALSE(PriorityMean(s.stats).has_value());
  s.stats.size = 4;
  s.stats.priority_sum = 6;
  EXPECT_DOUBLE_EQ(*PriorityMean(s.stats), 1.5);
}

TEST(ReplayMonitorTest, ActorStepRateUsesTheActorsOwnClock) {
  MonitorSnapshot a = At(1, 0, 0);
  MonitorSnapshot b = At(2, 0, 0);
  a.actors = {Line(3, 1000, 100)};
  b.actors = {Line(3, 5000, 104), Line(4, 10, 104)};
  EXPECT_DOUBLE_EQ(*ActorStepRate(&a, b.actors[0]), 1000);
  EXPECT_FALSE(ActorStepRate(&a, b.actors[1]).has_value()) << "actor 4 was not in `a`";
  EXPECT_FALSE(ActorStepRate(&a, a.actors[0]).has_value()) << "not published since";
}

TEST(ReplayMonitorTest, ShowsALineForEveryLeaseEverHeld) {
  MonitorSnapshot s = At(1, 100, 0);
  s.stats.priorities_bounded = 7;
  s.stats.transitions_invalid = 5;
  s.leases.resize(3);
  s.leases[0].state = static_cast<uint32_t>(protocol::LeaseState::kHeld);
  s.leases[0].holder_actor_id = 4;
  s.leases[0].ingest_cursor = 90;
  s.leases[0].inserted = 88;
  s.leases[0].torn = 2;
  s.leases[0].priorities_bounded = 7;
  s.leases[0].transitions_invalid = 5;
  s.leases[2].state = static_cast<uint32_t>(protocol::LeaseState::kReleased);
  s.leases[2].holder_actor_id = 9;
  s.leases[2].ingest_cursor = 10;
  s.leases[2].inserted = 10;
  const std::string text = RenderMonitorText(Info(), s, nullptr);
  EXPECT_NE(text.find("leases    1 held of 3"), std::string::npos) << text;
  EXPECT_NE(text.find("    0 held          4           90           88        2        0        5"
                      "        7"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("released"), std::string::npos) << text;
  EXPECT_NE(text.find("priorities_bounded 7"), std::string::npos) << text;
  EXPECT_NE(text.find("invalid_transitions 5"), std::string::npos) << text;
  const std::string json = RenderMonitorJson(Info(), s, nullptr);
  EXPECT_NE(
      json.find("\"leases\":[{\"lease\":0,\"state\":\"held\",\"holder_actor_id\":4,"
                "\"ingest_cursor\":90,\"inserted\":88,\"torn\":2,\"overrun\":0,"
                "\"priorities_bounded\":7,\"transitions_invalid\":5,\"grants\":0},{\"lease\":2,"),
      std::string::npos)
      << json;
  EXPECT_NE(json.find("\"priorities_bounded\":7"), std::string::npos) << json;
  EXPECT_NE(json.find("\"transitions_invalid\":5"), std::string::npos) << json;
}

TEST(ReplayMonitorTest, JsonHoldsEveryFigureAndNullForMissingOnes) {
  MonitorSnapshot a = At(10, 1000, 800);
  MonitorSnapshot b = At(12, 5000, 2400);
  b.stats.size = 512;
  b.stats.priority_sum = 256;
  b.stats.priority_max = std::numeric_limits<double>::infinity();
  b.stats.torn_slots = 7;
  b.stats.actors_connected = 2;
  b.actors = {Line(0, 100, 1'700'000'000)};
  const std::string json = RenderMonitorJson(Info(), b, &a);
  for (const char* expected :
       {"\"server\":\"127.0.0.1:7471\"", "\"epoch\":1", "\"inserted\":5000", "\"size\":512",
        "\"priority_mean\":0.5", "\"priority_max\":null", "\"inserts_per_s\":2000",
        "\"torn_slots\":7", "\"actors\":2", "\"mean_return\":15", "\"last_return\":12.5",
        "\"env_steps_per_s\":null", "\"transition_spec\":\"test \\\"f32\\\"\""}) {
    EXPECT_NE(json.find(expected), std::string::npos) << expected << " in " << json;
  }
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.back(), '}');
  const std::string without_rates = RenderMonitorJson(Info(), b, nullptr);
  EXPECT_NE(without_rates.find("\"rates\":null"), std::string::npos) << without_rates;
}

TEST(ReplayMonitorTest, TextShowsRatesDropsClientsAndActors) {
  MonitorSnapshot a = At(10, 1000, 800);
  MonitorSnapshot b = At(12, 2'001'000, 2400);
  b.stats.overrun_slots = 3;
  b.stats.learners_connected = 1;
  a.actors = {Line(5, 100, 100)};
  b.actors = {Line(5, 300, 102)};
  const std::string text = RenderMonitorText(Info(), b, &a);
  for (const char* expected :
       {"inserts/s 1.00M", "overrun 3", "learners 1", "epoch 1", "size 0 / 1024"}) {
    EXPECT_NE(text.find(expected), std::string::npos) << expected << " in\n" << text;
  }
  EXPECT_EQ(text.find("\x1b"), std::string::npos) << "no terminal control codes";
  const std::string no_actors = RenderMonitorText(Info(), At(1, 0, 0), nullptr);
  EXPECT_NE(no_actors.find("(none published)"), std::string::npos) << no_actors;
  EXPECT_NE(no_actors.find("inserts/s -"), std::string::npos) << no_actors;
}

TEST(ReplayMonitorTest, WarnsThatPrioritiesAreFrozenWhenEveryRecordIsInvalid) {
  MonitorSnapshot a = At(10, 1000, 800);
  a.stats.priority_updates_applied = 640;
  MonitorSnapshot b = At(12, 5000, 2400);
  b.stats.priority_updates_applied = 640;
  b.stats.priority_updates_invalid = 96;  // a learner sending only NaN
  const std::vector<std::string> warnings = MonitorWarnings(&a, b);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("frozen"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("96 NaN"), std::string::npos) << warnings[0];
  const std::string text = RenderMonitorText(Info(), b, &a);
  EXPECT_EQ(text.find("WARNING   every priority record"), text.find('\n') + 1)
      << "the warning comes right after the title:\n"
      << text;
  const std::string json = RenderMonitorJson(Info(), b, &a);
  EXPECT_NE(json.find("\"warnings\":[\"every priority record"), std::string::npos) << json;
}

TEST(ReplayMonitorTest, CountsInvalidRecordsAmongTheAppliedOnesAndOverTheEpochWithoutRates) {
  MonitorSnapshot a = At(10, 1000, 800);
  MonitorSnapshot b = At(12, 5000, 2400);
  b.stats.priority_updates_applied = 90;
  b.stats.priority_updates_invalid = 10;
  const std::vector<std::string> warnings = MonitorWarnings(&a, b);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("10 of 100 priority records"), std::string::npos) << warnings[0];
  const std::vector<std::string> epoch = MonitorWarnings(nullptr, b);
  ASSERT_EQ(epoch.size(), 1u);
  EXPECT_NE(epoch[0].find("10 priority records of this epoch"), std::string::npos) << epoch[0];
  // Nothing invalid: no warning, and an empty array in JSON.
  EXPECT_TRUE(MonitorWarnings(&a, At(12, 5000, 2400)).empty());
  EXPECT_NE(RenderMonitorJson(Info(), At(12, 5000, 2400), &a).find("\"warnings\":[]"),
            std::string::npos);
}

TEST(ReplayMonitorTest, ShowsTheReplayRatioBesideThePolicyAndTheTransferOnceFigures) {
  MonitorInfo info = Info();
  info.policy.samples_per_insert = 4;
  info.policy.spi_error_buffer = 64;
  info.policy.min_size_to_sample = 100;
  info.policy.spi_block_actors = 1;
  MonitorSnapshot s = At(10, 1000, 3000);
  s.stats.limiter_sample_waits = 17;
  s.stats.limiter_sample_wait_ns = 2'500'000'000;
  s.stats.limiter_insert_wait_ns = 500'000'000;
  s.stats.staged_payloads = 750;
  s.stats.staged_cached = 2250;
  s.stats.learner_cache_resets = 2;
  EXPECT_DOUBLE_EQ(*AchievedSamplesPerInsert(s.stats), 3);
  EXPECT_DOUBLE_EQ(*CachedFraction(s.stats), 0.75);
  const std::string json = RenderMonitorJson(info, s, nullptr);
  for (const char* expected :
       {"\"samples_per_insert\":4", "\"spi_error_buffer\":64", "\"min_size_to_sample\":100",
        "\"spi_block_actors\":1", "\"achieved_samples_per_insert\":3",
        "\"limiter_sample_waits\":17", "\"limiter_sample_wait_s\":2.5",
        "\"limiter_insert_wait_s\":0.5", "\"staged_payloads\":750", "\"staged_cached\":2250",
        "\"cached_fraction\":0.75", "\"learner_cache_resets\":2"}) {
    EXPECT_NE(json.find(expected), std::string::npos) << expected << " in " << json;
  }
  const std::string text = RenderMonitorText(info, s, nullptr);
  for (const char* expected :
       {"samples/insert 3.00 (target 4 +- 64, blocks actors, min_size 100)", "limiter waits 17",
        "(2.50 s)", "insert waits 0.50 s", "payloads 750  cached 2250 (75.0%)", "cache_resets 2"}) {
    EXPECT_NE(text.find(expected), std::string::npos) << expected << " in\n" << text;
  }
  // Before anything was inserted or staged, and without a limit.
  const MonitorSnapshot empty = At(1, 0, 0);
  EXPECT_FALSE(AchievedSamplesPerInsert(empty.stats).has_value());
  EXPECT_FALSE(CachedFraction(empty.stats).has_value());
  const std::string none = RenderMonitorText(Info(), empty, nullptr);
  EXPECT_NE(none.find("samples/insert - (no limit"), std::string::npos) << none;
  EXPECT_NE(RenderMonitorJson(Info(), empty, nullptr).find("\"cached_fraction\":null"),
            std::string::npos);
}

// A node read twice, 2 s of server time apart, holding `size` transitions
// of priority mass `priority_sum`.
NodeView ReadNode(const std::string& server, uint64_t inserted, uint64_t sampled, uint64_t size,
                  double priority_sum) {
  NodeView node;
  node.server = server;
  node.info = Info();
  node.info.server = server;
  node.before = At(10, 0, 0);
  node.now = At(12, inserted, sampled);
  node.now.stats.size = size;
  node.now.stats.priority_sum = priority_sum;
  return node;
}

NodeView FailedNode(const std::string& server) {
  NodeView node;
  node.server = server;
  node.error = server + ": cannot reach the server within 5s";
  return node;
}

TEST(ReplayNodesTest, TotalsSumTheNodesAndShareThePriorityMassBySk) {
  const std::vector<NodeView> nodes = {ReadNode("a:1", 1000, 400, 100, 30),
                                       ReadNode("b:2", 3000, 800, 300, 90)};
  const NodeTotals t = CombineNodes(nodes);
  EXPECT_EQ(t.nodes, 2u);
  EXPECT_EQ(t.reachable, 2u);
  EXPECT_EQ(t.size, 400u);
  EXPECT_EQ(t.capacity, 2048u);
  EXPECT_EQ(t.inserted, 4000u);
  EXPECT_EQ(t.sampled, 1200u);
  EXPECT_DOUBLE_EQ(*t.inserts_per_s, 2000);  // 500/s + 1500/s
  EXPECT_DOUBLE_EQ(*t.samples_per_s, 600);   // 200/s + 400/s
  EXPECT_DOUBLE_EQ(t.priority_sum, 120);
  ASSERT_EQ(t.priority_share.size(), 2u);
  EXPECT_DOUBLE_EQ(*t.priority_share[0], 0.25);
  EXPECT_DOUBLE_EQ(*t.priority_share[1], 0.75);
}

TEST(ReplayNodesTest, AFailedNodeAddsNothingAndHasNoShare) {
  const std::vector<NodeView> nodes = {FailedNode("a:1"), ReadNode("b:2", 3000, 800, 300, 90)};
  const NodeTotals t = CombineNodes(nodes);
  EXPECT_EQ(t.nodes, 2u);
  EXPECT_EQ(t.reachable, 1u);
  EXPECT_EQ(t.size, 300u);
  EXPECT_DOUBLE_EQ(*t.inserts_per_s, 1500);
  EXPECT_FALSE(t.priority_share[0].has_value());
  EXPECT_DOUBLE_EQ(*t.priority_share[1], 1);
  // None read: no rates at all, and no shares.
  const NodeTotals none = CombineNodes({FailedNode("a:1")});
  EXPECT_EQ(none.reachable, 0u);
  EXPECT_FALSE(none.inserts_per_s.has_value());
  EXPECT_FALSE(none.priority_share[0].has_value());
}

TEST(ReplayNodesTest, NoTotalRatesWhileANodeReadHasNoneAndNoSharesOfAnEmptyMass) {
  std::vector<NodeView> nodes = {ReadNode("a:1", 1000, 400, 0, 0),
                                 ReadNode("b:2", 3000, 800, 0, 0)};
  nodes[1].before.reset();  // its first snapshot
  const NodeTotals t = CombineNodes(nodes);
  EXPECT_FALSE(t.inserts_per_s.has_value()) << "a sum without node b would mislead";
  EXPECT_FALSE(t.samples_per_s.has_value());
  EXPECT_FALSE(t.priority_share[0].has_value());
  EXPECT_FALSE(t.priority_share[1].has_value());
}

TEST(ReplayNodesTest, JsonHoldsEachNodesObjectOrItsErrorThenTheTotals) {
  const std::vector<NodeView> nodes = {ReadNode("a:1", 1000, 400, 100, 30), FailedNode("b:2"),
                                       ReadNode("c:3", 3000, 800, 300, 90)};
  const std::string json = RenderNodesJson(nodes);
  const std::string first = RenderMonitorJson(nodes[0].info, nodes[0].now, &*nodes[0].before);
  EXPECT_EQ(json.find("{\"nodes\":[" + first +
                      ",{\"server\":\"b:2\",\"error\":\"b:2: cannot "
                      "reach the server within 5s\"},{\"server\":\"c:3\""),
            0u)
      << json;
  EXPECT_NE(json.find("],\"totals\":{\"nodes\":3,\"reachable\":2,\"size\":400,\"capacity\":2048,"
                      "\"inserted\":4000,\"sampled\":1200,\"inserts_per_s\":2000,"
                      "\"samples_per_s\":600,\"priority_sum\":120,"
                      "\"priority_share\":[0.25,null,0.75]}}"),
            std::string::npos)
      << json;
  EXPECT_EQ(json.back(), '}');
}

TEST(ReplayNodesTest, TextShowsTotalsThenABlockPerNodeHeadedByItsAddress) {
  const std::vector<NodeView> nodes = {ReadNode("a:1", 1000, 400, 100, 30), FailedNode("b:2"),
                                       ReadNode("c:3", 3000, 800, 300, 90)};
  const std::string text = RenderNodesText(nodes);
  EXPECT_EQ(text.find("replay_top  3 nodes, 2 reachable\n"
                      "total     inserts/s 2000  samples/s 600  size 400 / 2048 (19.5%)  "
                      "inserted 4000  sampled 1200\n"
                      "share     a:1 25.0%  b:2 -  c:3 75.0%  (of sum p^alpha 120)\n\n"
                      "replay_top  a:1  epoch 1"),
            0u)
      << text;
  EXPECT_NE(text.find("\nreplay_top  b:2  unreachable\n"
                      "error     b:2: cannot reach the server within 5s\n\n"
                      "replay_top  c:3  epoch 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("inserts/s 1500"), std::string::npos) << "c's own block:\n" << text;
  EXPECT_EQ(text.find("\x1b"), std::string::npos) << "no terminal control codes";
}

}  // namespace
}  // namespace dreplay::tools
