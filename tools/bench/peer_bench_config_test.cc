// Copyright dreplay authors.

#include "tools/bench/peer_bench_config.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tools/bench/peer_bench_copy.h"
#include "tools/bench/peer_bench_report.h"

namespace dreplay::tools {
namespace {

PeerBenchOptions Valid() {
  PeerBenchOptions o;
  o.systems = {PeerSystem::kRedis, PeerSystem::kGrpc, PeerSystem::kDreplay};
  o.payload_bytes = {128, 28672};
  return o;
}

TEST(PeerBenchConfigTest, ParsesSystemsInOrder) {
  absl::StatusOr<std::vector<PeerSystem>> s = ParsePeerSystems("dreplay,redis");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, (std::vector<PeerSystem>{PeerSystem::kDreplay, PeerSystem::kRedis}));
  EXPECT_TRUE(absl::StrContains(ParsePeerSystems("redis,kafka").status().message(), "kafka"));
  EXPECT_TRUE(absl::StrContains(ParsePeerSystems("grpc,grpc").status().message(), "twice"));
  s = ParsePeerSystems("dreplay,dreplay-tcp");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, (std::vector<PeerSystem>{PeerSystem::kDreplay, PeerSystem::kDreplayTcp}));
  EXPECT_STREQ(PeerSystemName(PeerSystem::kDreplayTcp), "dreplay-tcp");
}

TEST(PeerBenchConfigTest, ValidateNamesTheBadField) {
  EXPECT_TRUE(Valid().Validate().ok()) << Valid().Validate();
  PeerBenchOptions o = Valid();
  o.payload_bytes = {4};
  EXPECT_TRUE(absl::StrContains(o.Validate().message(), "payload_bytes=4"));
  o = Valid();
  o.writers = 0;
  EXPECT_TRUE(absl::StrContains(o.Validate().message(), "writers=0"));
  o = Valid();
  o.systems.clear();
  EXPECT_TRUE(absl::StrContains(o.Validate().message(), "systems"));
  o = Valid();
  o.duration = absl::ZeroDuration();
  EXPECT_TRUE(absl::StrContains(o.Validate().message(), "duration"));
  o = Valid();
  o.payload_bytes = {1 << 20};
  o.ring_bytes = 1 << 20;  // one slot of 1 MiB: no room for batches
  EXPECT_TRUE(absl::StrContains(o.Validate().message(), "ring_bytes"));
}

TEST(PeerBenchConfigTest, EveryArmOfASizeSharesItsGeometry) {
  const PeerBenchOptions o = Valid();
  const PeerCase small = CaseFor(o, 128);
  EXPECT_EQ(small.insert_batch, 256u);
  EXPECT_EQ(small.capacity, uint64_t{1} << 18);
  EXPECT_EQ(small.prefill, 65536u);
  const PeerCase large = CaseFor(o, 28672);
  EXPECT_EQ(large.insert_batch, 36u);
  EXPECT_EQ(large.capacity, 8192u);
  EXPECT_EQ(large.prefill, 4096u);
  EXPECT_EQ(large.writers, 4);
  EXPECT_EQ(large.batch_size, 256u);
}

PeerCaseResult Case(uint32_t payload, PeerSystem system, double cpu, double inserted,
                    double sampled) {
  PeerCaseResult r;
  r.payload_bytes = payload;
  r.system = system;
  r.seconds = 1;
  r.cpu_seconds = cpu;
  r.inserted_per_s = inserted;
  r.sampled_per_s = sampled;
  return r;
}

TEST(PeerBenchReportTest, RatiosDivideTotalsPerSize) {
  const std::vector<PeerCaseResult> cases = {
      Case(128, PeerSystem::kRedis, 1, 100, 100),    Case(128, PeerSystem::kGrpc, 2, 300, 100),
      Case(128, PeerSystem::kDreplay, 2, 1500, 500), Case(28672, PeerSystem::kRedis, 1, 0, 0),
      Case(28672, PeerSystem::kDreplay, 1, 10, 10),
  };
  const std::vector<PeerRatios> r = PeerRatiosOf(cases);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].payload_bytes, 128u);
  EXPECT_DOUBLE_EQ(*r[0].over_redis, 10.0);
  EXPECT_DOUBLE_EQ(*r[0].over_grpc, 5.0);
  EXPECT_DOUBLE_EQ(*r[0].over_redis_per_cpu, 5.0);  // 1000 / 200 per CPU second
  EXPECT_DOUBLE_EQ(*r[0].over_grpc_per_cpu, 5.0);   // 1000 / 200
  EXPECT_FALSE(r[1].over_redis.has_value());        // redis total 0
  EXPECT_FALSE(r[1].over_grpc.has_value());         // grpc did not run
  const std::string json = FormatPeerBenchReport(Valid(), {0, 1}, {cases}, true);
  EXPECT_TRUE(absl::StrContains(json,
                                "\"128\":{\"dreplay_over_redis\":10.0000,"
                                "\"dreplay_over_grpc\":5.0000,"));
  EXPECT_TRUE(absl::StrContains(json, "\"system\":\"grpc\""));
  EXPECT_FALSE(absl::StrContains(json, "\"rounds\":["));
  const std::string text = FormatPeerBenchReport(Valid(), {0, 1}, {cases}, false);
  EXPECT_TRUE(absl::StrContains(text, "dreplay / redis 10.00x, dreplay / grpc 5.00x"));
}

TEST(PeerBenchReportTest, TheTcpArmHasItsOwnRatios) {
  const std::vector<PeerCaseResult> cases = {
      Case(128, PeerSystem::kRedis, 1, 100, 100),
      Case(128, PeerSystem::kDreplay, 2, 1500, 500),
      Case(128, PeerSystem::kDreplayTcp, 2, 250, 50),
  };
  const std::vector<PeerRatios> r = PeerRatiosOf(cases);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].system, PeerSystem::kDreplay);
  EXPECT_EQ(r[1].system, PeerSystem::kDreplayTcp);
  EXPECT_DOUBLE_EQ(*r[1].over_redis, 1.5);
  EXPECT_FALSE(r[1].over_grpc.has_value());
  const std::string json = FormatPeerBenchReport(Valid(), {0}, {cases}, true);
  EXPECT_TRUE(absl::StrContains(json,
                                "\"128\":{\"dreplay_over_redis\":10.0000,"
                                "\"dreplay_over_redis_per_cpu\":5.0000,"
                                "\"dreplay_tcp_over_redis\":1.5000,"
                                "\"dreplay_tcp_over_redis_per_cpu\":0.7500}"))
      << json;
  const std::string text = FormatPeerBenchReport(Valid(), {0}, {cases}, false);
  EXPECT_TRUE(absl::StrContains(text, "dreplay-tcp / redis 1.50x, dreplay-tcp / grpc -")) << text;
}

TEST(PeerBenchReportTest, CopyReferencesGiveEachArmsShare) {
  const std::vector<PeerCaseResult> cases = {Case(128, PeerSystem::kRedis, 1, 100, 100),
                                             Case(128, PeerSystem::kDreplay, 1, 600, 200)};
  PeerCopyReference copy;
  copy.payload_bytes = 128;
  copy.blocks_per_s = 1000;
  copy.bytes_per_s = 128000;
  copy.low = copy.high = 1000;
  const std::string text = FormatPeerBenchReport(Valid(), {0}, {cases}, false, {copy});
  EXPECT_TRUE(absl::StrContains(text, "redis 0.20 dreplay 0.80")) << text;
  const std::string json = FormatPeerBenchReport(Valid(), {0}, {cases}, true, {copy});
  EXPECT_TRUE(absl::StrContains(json,
                                "\"copy\":{\"128\":{\"bytes_per_s\":128000.0,"
                                "\"blocks_per_s\":1000.0,\"low\":1000.0,\"high\":1000.0}}"))
      << json;
  EXPECT_FALSE(absl::StrContains(FormatPeerBenchReport(Valid(), {0}, {cases}, true), "copy"));
}

TEST(PeerBenchReportTest, TcpReferencesGiveEachArmsShare) {
  const std::vector<PeerCaseResult> cases = {Case(128, PeerSystem::kRedis, 1, 100, 100),
                                             Case(128, PeerSystem::kDreplayTcp, 1, 300, 100)};
  PeerTcpReference tcp;
  tcp.payload_bytes = 128;
  tcp.message_bytes = 32768;
  tcp.bytes_per_s = 64000;
  tcp.transitions_per_s = 500;
  tcp.low = 400;
  tcp.high = 900;
  const std::string text = FormatPeerBenchReport(Valid(), {0}, {cases}, false, {}, {tcp});
  EXPECT_TRUE(absl::StrContains(text, "(sends of 32768 B)")) << text;
  EXPECT_TRUE(absl::StrContains(text, "(500 transitions per s, rounds 400 to 900)")) << text;
  EXPECT_TRUE(absl::StrContains(text, "redis 0.40 dreplay-tcp 0.80")) << text;
  EXPECT_FALSE(absl::StrContains(text, "one thread copies")) << text;
  const std::string json = FormatPeerBenchReport(Valid(), {0}, {cases}, true, {}, {tcp});
  EXPECT_TRUE(absl::StrContains(json,
                                "\"tcp\":{\"128\":{\"message_bytes\":32768,"
                                "\"bytes_per_s\":64000.0,\"transitions_per_s\":500.0,"
                                "\"low\":400.0,\"high\":900.0}}"))
      << json;
  EXPECT_FALSE(absl::StrContains(json, "\"copy\""));
}

TEST(PeerBenchCopyTest, TcpStreamMeasuresARateAndRefusesEmptyMessages) {
  absl::StatusOr<PeerTcpReference> r = MeasurePeerTcpStream(128, 32768, absl::Milliseconds(50));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->payload_bytes, 128u);
  EXPECT_EQ(r->message_bytes, 32768u);
  EXPECT_GT(r->bytes_per_s, 0);
  EXPECT_DOUBLE_EQ(r->transitions_per_s, r->bytes_per_s / 128);
  EXPECT_EQ(MeasurePeerTcpStream(0, 32768, absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MeasurePeerTcpStream(128, 0, absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MeasurePeerTcpStream(128, 32768, absl::ZeroDuration()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PeerBenchCopyTest, TheMedianReferenceKeepsTheRangeOfItsRounds) {
  std::vector<PeerTcpReference> tcps(4);
  const double rates[] = {300, 100, 400, 200};
  for (size_t i = 0; i < tcps.size(); ++i) {
    tcps[i].transitions_per_s = rates[i];
    tcps[i].bytes_per_s = rates[i] * 2;
  }
  const PeerTcpReference t = MedianReference(tcps);
  EXPECT_EQ(t.transitions_per_s, 200);  // the lower middle
  EXPECT_EQ(t.bytes_per_s, 400);        // of the same round
  EXPECT_EQ(t.low, 100);
  EXPECT_EQ(t.high, 400);
  std::vector<PeerCopyReference> copies(1);
  copies[0].blocks_per_s = 7;
  const PeerCopyReference c = MedianReference(copies);
  EXPECT_EQ(c.blocks_per_s, 7);
  EXPECT_EQ(c.low, 7);
  EXPECT_EQ(c.high, 7);
}

TEST(PeerBenchCopyTest, MeasuresARateAndRefusesImpossibleBlocks) {
  absl::StatusOr<PeerCopyReference> r = MeasurePeerCopy(4096, 1 << 20, absl::Milliseconds(20));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->payload_bytes, 4096u);
  EXPECT_GT(r->blocks_per_s, 0);
  EXPECT_DOUBLE_EQ(r->bytes_per_s, r->blocks_per_s * 4096);
  EXPECT_EQ(MeasurePeerCopy(0, 1 << 20, absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MeasurePeerCopy(4096, 1024, absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MeasurePeerCopy(4096, 1 << 20, absl::ZeroDuration()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PeerBenchReportTest, EachCaseIsItsMedianRound) {
  const std::vector<PeerCaseResult> results = {
      Case(128, PeerSystem::kRedis, 1, 300, 0), Case(128, PeerSystem::kDreplay, 1, 5, 0),
      Case(128, PeerSystem::kRedis, 1, 100, 0), Case(128, PeerSystem::kDreplay, 1, 7, 0),
      Case(128, PeerSystem::kRedis, 1, 200, 0), Case(128, PeerSystem::kDreplay, 1, 6, 0),
  };
  const std::vector<PeerCaseResult> median = PeerMedianCases(results);
  ASSERT_EQ(median.size(), 2u);
  EXPECT_EQ(median[0].system, PeerSystem::kRedis);
  EXPECT_DOUBLE_EQ(median[0].inserted_per_s, 200);
  EXPECT_EQ(median[1].system, PeerSystem::kDreplay);
  EXPECT_DOUBLE_EQ(median[1].inserted_per_s, 6);
  const std::string json = FormatPeerBenchReport(
      Valid(), {0}, {{results[0], results[1]}, {results[2], results[3]}}, true);
  EXPECT_TRUE(absl::StrContains(json, "\"rounds\":[["));
}

}  // namespace
}  // namespace dreplay::tools
