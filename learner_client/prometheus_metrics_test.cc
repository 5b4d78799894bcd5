// Copyright dreplay authors.

#include "learner_client/prometheus_metrics.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "testing/metrics_scrape.h"

namespace dreplay::learner {
namespace {

bool HasLine(const std::string& text, const std::string& line) {
  for (absl::string_view l : absl::StrSplit(text, '\n')) {
    if (l == line) return true;
  }
  return false;
}

ProgressRecord SampleRecord() {
  ProgressRecord r;
  r.replay_placement = "buffer";
  r.wall_s = 12.5;
  r.train_steps = 400;
  r.env_steps = 9000;
  r.loss = 0.25;
  r.link.experience = 1000;
  r.link.priorities = 64;
  r.link.transitions_fetched = 3200;
  r.data_age_p95_s = 0.004;
  r.transitions_dropped = 7;
  r.params_withheld = 2;
  return r;
}

TEST(LearnerPrometheusMetricsTest, RendersTheRecordsCountersAndPresentGauges) {
  const std::string text = RenderLearnerMetrics(SampleRecord());
  EXPECT_TRUE(HasLine(text, "dreplay_learner_up 1")) << text;
  EXPECT_TRUE(HasLine(text, "# TYPE dreplay_learner_train_steps_total counter"));
  EXPECT_TRUE(HasLine(text, "dreplay_learner_train_steps_total 400"));
  EXPECT_TRUE(HasLine(text, "dreplay_learner_env_steps_total 9000"));
  EXPECT_TRUE(HasLine(text, "dreplay_learner_link_bytes_total{class=\"experience\"} 1000"));
  EXPECT_TRUE(HasLine(text, "dreplay_learner_link_bytes_total{class=\"priorities\"} 64"));
  EXPECT_TRUE(HasLine(text, "dreplay_learner_transitions_fetched_total 3200"));
  EXPECT_TRUE(HasLine(text, "dreplay_learner_transitions_dropped_total 7"));
  EXPECT_TRUE(HasLine(text, "dreplay_learner_params_withheld_total 2"));
  EXPECT_TRUE(HasLine(text, "dreplay_learner_info{placement=\"buffer\"} 1"));
  EXPECT_TRUE(HasLine(text, "dreplay_learner_wall_seconds 12.5"));
  EXPECT_TRUE(HasLine(text, "dreplay_learner_loss 0.25"));
  EXPECT_TRUE(HasLine(text, "dreplay_learner_data_age_p95_seconds 0.004"));
  // Values the record does not have are left out, not rendered as 0.
  EXPECT_FALSE(absl::StrContains(text, "dreplay_learner_probe_loss"));
  EXPECT_FALSE(absl::StrContains(text, "dreplay_learner_eval_return_mean"));
}

TEST(LearnerPrometheusMetricsTest, TheExportShowsTheLatestRecord) {
  LearnerMetricsExport exported;
  EXPECT_EQ(exported.Render(),
            "# HELP dreplay_learner_up 1 once the learner has reported its first progress "
            "record.\n"
            "# TYPE dreplay_learner_up gauge\n"
            "dreplay_learner_up 0\n");
  ProgressRecord r = SampleRecord();
  exported.Update(r);
  r.train_steps = 500;
  exported.Update(r);
  EXPECT_TRUE(HasLine(exported.Render(), "dreplay_learner_train_steps_total 500"));
}

TEST(LearnerPrometheusMetricsTest, PromtoolAcceptsTheText) {
  absl::StatusOr<testing::PromtoolResult> lint =
      testing::PromtoolCheckMetrics(RenderLearnerMetrics(SampleRecord()));
  if (absl::IsNotFound(lint.status())) GTEST_SKIP() << lint.status().message();
  ASSERT_TRUE(lint.ok()) << lint.status();
  EXPECT_EQ(lint->exit_status, 0) << lint->output;
}

std::vector<NodeMetrics> TwoNodes() {
  NodeMetrics a;
  a.address = "10.0.0.2:7471";
  a.rows = 6400;
  a.batches = 120;
  a.link_bytes = 5000000;
  a.taken_share = 0.7;
  a.mass_share = 0.69;
  a.priority_sum = 3200.5;
  NodeMetrics b = a;
  b.address = "10.0.1.2:7471";
  b.rows = 2600;
  b.passed_over = 2;
  b.dropped = 11;
  b.taken_share = 0.3;
  b.mass_share = 0.31;
  b.away = true;
  a.policy_lag_mean = 2.5;  // b's is not known yet
  a.inserts_per_s = 310;
  b.inserts_per_s = 150;
  return {a, b};
}

TEST(LearnerPrometheusMetricsTest, SeveralNodesAreLabelledByAddress) {
  LearnerMetricsExport exported;
  exported.Update(SampleRecord());
  exported.UpdateNodes(TwoNodes(), 0.01);
  const std::string text = exported.Render();
  EXPECT_TRUE(HasLine(text, "dreplay_learner_train_steps_total 400")) << text;
  EXPECT_TRUE(HasLine(text, "dreplay_learner_node_rows_total{node=\"10.0.0.2:7471\"} 6400"));
  EXPECT_TRUE(HasLine(text, "dreplay_learner_node_rows_total{node=\"10.0.1.2:7471\"} 2600"));
  EXPECT_TRUE(HasLine(text, "dreplay_learner_node_passed_over_total{node=\"10.0.1.2:7471\"} 2"));
  EXPECT_TRUE(HasLine(text, "dreplay_learner_node_rows_dropped_total{node=\"10.0.1.2:7471\"} 11"));
  EXPECT_TRUE(HasLine(text, "dreplay_learner_node_taken_share{node=\"10.0.0.2:7471\"} 0.7"));
  EXPECT_TRUE(HasLine(text, "dreplay_learner_node_away{node=\"10.0.0.2:7471\"} 0"));
  EXPECT_TRUE(HasLine(text, "dreplay_learner_node_away{node=\"10.0.1.2:7471\"} 1"));
  EXPECT_TRUE(HasLine(text, "dreplay_learner_sampling_tv_distance 0.01"));
  EXPECT_TRUE(HasLine(text, "dreplay_learner_node_policy_lag_mean{node=\"10.0.0.2:7471\"} 2.5"));
  EXPECT_FALSE(absl::StrContains(text, "dreplay_learner_node_policy_lag_mean{node=\"10.0.1.2"))
      << "no sample for a node whose lag is not known";
  EXPECT_TRUE(HasLine(text, "dreplay_learner_node_inserts_per_second{node=\"10.0.1.2:7471\"} 150"));
  // One learner, one node: no node families.
  EXPECT_FALSE(absl::StrContains(RenderLearnerMetrics(SampleRecord()), "dreplay_learner_node_"));
  absl::StatusOr<testing::PromtoolResult> lint = testing::PromtoolCheckMetrics(text);
  if (absl::IsNotFound(lint.status())) GTEST_SKIP() << lint.status().message();
  ASSERT_TRUE(lint.ok()) << lint.status();
  EXPECT_EQ(lint->exit_status, 0) << lint->output;
}

}  // namespace
}  // namespace dreplay::learner
