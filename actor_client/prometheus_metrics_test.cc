// Copyright dreplay authors.

#include "actor_client/prometheus_metrics.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "testing/metrics_scrape.h"

namespace dreplay::actor {
namespace {

bool HasLine(const std::string& text, const std::string& line) {
  for (absl::string_view l : absl::StrSplit(text, '\n')) {
    if (l == line) return true;
  }
  return false;
}

ActorMetrics SampleMetrics() {
  ActorMetrics m;
  m.actor_index = 3;
  m.env_steps = 5000;
  m.episodes = 40;
  m.last_episode_return = 120.5;
  m.params_version = 7;
  m.writer.committed = 4990;
  m.writer.flushes = 160;
  m.writer.latency.Record(absl::Microseconds(50));
  m.writer.latency.Record(absl::Milliseconds(2));
  return m;
}

TEST(ActorPrometheusMetricsTest, RendersTheWritersCountersAndTheEpisodes) {
  const std::string text = RenderActorMetrics(SampleMetrics());
  EXPECT_TRUE(HasLine(text, "dreplay_actor_up 1")) << text;
  EXPECT_TRUE(HasLine(text, "# TYPE dreplay_actor_env_steps_total counter"));
  EXPECT_TRUE(HasLine(text, "dreplay_actor_env_steps_total 5000"));
  EXPECT_TRUE(HasLine(text, "dreplay_actor_episodes_total 40"));
  EXPECT_TRUE(HasLine(text, "dreplay_actor_transitions_committed_total 4990"));
  EXPECT_TRUE(HasLine(text, "dreplay_actor_flushes_total 160"));
  EXPECT_TRUE(HasLine(text, "dreplay_actor_info{actor_index=\"3\"} 1"));
  EXPECT_TRUE(HasLine(text, "dreplay_actor_params_version 7"));
  EXPECT_TRUE(HasLine(text, "dreplay_actor_last_episode_return 120.5"));
  EXPECT_TRUE(absl::StrContains(text, "dreplay_actor_insert_latency_p99_seconds 0.002"));
}

TEST(ActorPrometheusMetricsTest, LeavesOutWhatHasNotHappenedYet) {
  const std::string text = RenderActorMetrics(ActorMetrics{});
  EXPECT_FALSE(absl::StrContains(text, "last_episode_return"));
  EXPECT_FALSE(absl::StrContains(text, "insert_latency"));
}

TEST(ActorPrometheusMetricsTest, TheExportShowsTheLatestSnapshot) {
  ActorMetricsExport exported;
  EXPECT_TRUE(HasLine(exported.Render(), "dreplay_actor_up 0"));
  EXPECT_FALSE(absl::StrContains(exported.Render(), "env_steps"));
  ActorMetrics m = SampleMetrics();
  exported.Update(m);
  m.env_steps = 6000;
  exported.Update(m);
  EXPECT_TRUE(HasLine(exported.Render(), "dreplay_actor_env_steps_total 6000"));
}

TEST(ActorPrometheusMetricsTest, PromtoolAcceptsTheText) {
  absl::StatusOr<testing::PromtoolResult> lint =
      testing::PromtoolCheckMetrics(RenderActorMetrics(SampleMetrics()));
  if (absl::IsNotFound(lint.status())) GTEST_SKIP() << lint.status().message();
  ASSERT_TRUE(lint.ok()) << lint.status();
  EXPECT_EQ(lint->exit_status, 0) << lint->output;
}

}  // namespace
}  // namespace dreplay::actor
