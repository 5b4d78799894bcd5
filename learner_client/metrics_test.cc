// Copyright dreplay authors.

#include "learner_client/metrics.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace dreplay::learner {
namespace {

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Link stats whose bytes are all experience.
LinkStats LinkOf(uint64_t bytes) {
  LinkStats link;
  link.experience = bytes;
  return link;
}

TEST(MetricsTest, ProgressAveragesTheLossOverTheStepsOfItsIntervalOnly) {
  MetricsRecorder m("buffer", 1, 475);
  m.RecordTrainStep(1.0);
  m.RecordTrainStep(3.0);
  ProgressRecord first = m.Progress(1.0);
  ASSERT_TRUE(first.loss.has_value());
  EXPECT_DOUBLE_EQ(*first.loss, 2.0);
  EXPECT_EQ(first.train_steps, 2u);
  m.RecordTrainStep(10.0);
  ProgressRecord second = m.Progress(2.0);
  EXPECT_DOUBLE_EQ(*second.loss, 10.0);
  EXPECT_EQ(second.train_steps, 3u);
  ProgressRecord empty = m.Progress(3.0);
  EXPECT_FALSE(empty.loss.has_value());
}

TEST(MetricsTest, ArrivalsAndFirstUsesAreCountedApart) {
  MetricsRecorder m("hybrid", 1, 475.0);
  m.RecordArrived(5);
  ProgressRecord r = m.Progress(1.0);
  EXPECT_EQ(r.transferred, 5u);
  EXPECT_FALSE(r.transferred_priority.has_value()) << "nothing trained on yet";
  m.RecordFirstUse(std::vector<float>{1.0f, 3.0f});
  r = m.Progress(2.0);
  EXPECT_EQ(r.transferred, 0u);
  ASSERT_TRUE(r.transferred_priority.has_value());
  EXPECT_DOUBLE_EQ(*r.transferred_priority, 2.0);
  EXPECT_EQ(m.link_transitions_total(), 5u);
  EXPECT_EQ(m.first_uses_total(), 2u);
}

TEST(MetricsTest, TransferredPriorityIsTheMeanOverTransitionsNotOverArrivals) {
  MetricsRecorder m("learner", 1, 475);
  m.RecordTransferred(std::vector<float>{1.0f});
  m.RecordTransferred(std::vector<float>{2.0f, 2.0f, 2.0f});
  ProgressRecord r = m.Progress(1.0);
  EXPECT_EQ(r.transferred, 4u);
  EXPECT_DOUBLE_EQ(*r.transferred_priority, 7.0 / 4.0);
  EXPECT_EQ(r.link_transitions_total, 4u);
  ProgressRecord next = m.Progress(2.0);
  EXPECT_EQ(next.transferred, 0u);
  EXPECT_FALSE(next.transferred_priority.has_value());
  EXPECT_EQ(next.link_transitions_total, 4u);
}

TEST(MetricsTest, RatesAreTheIncreaseOverTheIntervalDividedByItsLength) {
  MetricsRecorder m("buffer", 1, 475);
  m.SetLinkStats(LinkOf(1000));
  m.RecordTransferred(std::vector<float>(10, 1.0f));
  ProgressRecord first = m.Progress(2.0);
  EXPECT_DOUBLE_EQ(first.link_bytes_per_s, 500.0);
  EXPECT_DOUBLE_EQ(first.link_transitions_per_s, 5.0);
  m.SetLinkStats(LinkOf(4000));
  m.RecordTransferred(std::vector<float>(30, 1.0f));
  ProgressRecord second = m.Progress(5.0);
  EXPECT_EQ(second.link_bytes_total, 4000u);
  EXPECT_DOUBLE_EQ(second.link_bytes_per_s, 1000.0);
  EXPECT_DOUBLE_EQ(second.link_transitions_per_s, 10.0);
}

TEST(MetricsTest, ActorReturnIsTheMeanOverAllActorsEpisodes) {
  MetricsRecorder m("buffer", 1, 475);
  EXPECT_FALSE(m.Progress(1.0).actor_return_mean.has_value());
  ActorTotals totals;
  totals.env_steps = 500;
  totals.episodes = 12;
  totals.returns_count = 4;
  totals.returns_sum = 100;
  m.SetActorTotals(totals);
  ProgressRecord r = m.Progress(2.0);
  EXPECT_EQ(r.env_steps, 500u);
  EXPECT_EQ(r.episodes, 12u);
  EXPECT_DOUBLE_EQ(*r.actor_return_mean, 25.0);
}

TEST(MetricsTest, SolvedIsStampedAtTheFirstEvaluationThatReachesTheThreshold) {
  MetricsRecorder m("buffer", 1, 475);
  ActorTotals totals;
  totals.env_steps = 1000;
  m.SetActorTotals(totals);
  EXPECT_FALSE(m.RecordEvaluation(5.0, 200));
  totals.env_steps = 2000;
  m.SetActorTotals(totals);
  EXPECT_TRUE(m.RecordEvaluation(10.0, 475));
  totals.env_steps = 3000;
  m.SetActorTotals(totals);
  EXPECT_FALSE(m.RecordEvaluation(15.0, 500));  // already solved
  EXPECT_FALSE(m.RecordEvaluation(20.0, 100));
  const SummaryRecord s = m.Summary(21.0);
  EXPECT_TRUE(s.solved);
  EXPECT_DOUBLE_EQ(*s.time_to_solve_s, 10.0);
  EXPECT_EQ(*s.env_steps_to_solve, 2000u);
  EXPECT_DOUBLE_EQ(*s.eval_return_mean, 100.0);
  EXPECT_DOUBLE_EQ(*s.eval_return_best, 500.0);
  EXPECT_EQ(s.evaluations, 4u);
  EXPECT_EQ(s.env_steps, 3000u);
}

TEST(MetricsTest, SummaryAveragesTheLastHalfOfTraining) {
  MetricsRecorder m("learner", 1, 475);
  // Steps 1..4 with losses 10, 10, 2, 4: the last half is k >= 2.
  m.RecordTransferred(std::vector<float>{100.0f});  // arrived at step 0
  m.RecordTrainStep(10);
  m.RecordTrainStep(10);
  m.RecordTransferred(std::vector<float>{1.0f, 3.0f});  // arrived at step 2
  m.RecordTrainStep(2);
  m.RecordTrainStep(4);
  const SummaryRecord s = m.Summary(1.0);
  EXPECT_EQ(s.train_steps, 4u);
  EXPECT_DOUBLE_EQ(*s.loss_mean_last_half, (10.0 + 2.0 + 4.0) / 3.0);
  EXPECT_DOUBLE_EQ(*s.transferred_priority_mean_last_half, 2.0);
  EXPECT_EQ(s.link_transitions_total, 3u);
  EXPECT_FALSE(s.solved);
  EXPECT_FALSE(s.time_to_solve_s.has_value());
}

TEST(MetricsTest, ProgressJsonHasEveryFieldAndNullForMissingValues) {
  MetricsRecorder m("buffer", 7, 475);
  const std::string json = m.Progress(1.5).ToJson();
  for (const char* field : {"\"type\":\"progress\"",
                            "\"replay_placement\":\"buffer\"",
                            "\"seed\":7",
                            "\"wall_s\":1.5",
                            "\"train_steps\":0",
                            "\"env_steps\":0",
                            "\"loss\":null",
                            "\"transferred\":0",
                            "\"transferred_priority\":null",
                            "\"link_bytes_total\":0",
                            "\"link_transitions_total\":0",
                            "\"link_bytes_per_s\":0",
                            "\"link_transitions_per_s\":0",
                            "\"episodes\":0",
                            "\"actor_return_mean\":null",
                            "\"eval_return_mean\":null",
                            "\"trained_abs_td_error\":null",
                            "\"probe_loss\":null",
                            "\"samples_per_insert\":null",
                            "\"data_age_mean_s\":null",
                            "\"data_age_p50_s\":null",
                            "\"data_age_p95_s\":null",
                            "\"crossing_percentile\":null",
                            "\"link_bytes_experience\":0",
                            "\"link_bytes_metadata\":0",
                            "\"link_bytes_polling\":0",
                            "\"link_bytes_priorities\":0",
                            "\"link_bytes_params\":0",
                            "\"link_bytes_control\":0",
                            "\"transitions_fetched_total\":0",
                            "\"distinct_transitions_fetched_total\":0"}) {
    EXPECT_TRUE(Contains(json, field)) << field << " in " << json;
  }
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.back(), '}');
}

TEST(MetricsTest, SummaryJsonHasEveryField) {
  MetricsRecorder m("learner", 3, 475);
  m.RecordTrainStep(std::numeric_limits<double>::infinity());
  const std::string json = m.Summary(2).ToJson();
  for (const char* field :
       {"\"type\":\"summary\"", "\"replay_placement\":\"learner\"", "\"solved\":false",
        "\"time_to_solve_s\":null", "\"env_steps_to_solve\":null", "\"train_steps\":1",
        "\"link_bytes_total\":0", "\"link_transitions_total\":0", "\"loss_mean_last_half\":null",
        "\"transferred_priority_mean_last_half\":null", "\"probe_loss\":null",
        "\"samples_per_insert\":null", "\"data_age_mean_s\":null", "\"link_bytes_control\":0",
        "\"distinct_transitions_fetched_total\":0", "\"crossing_percentile\":null"}) {
    EXPECT_TRUE(Contains(json, field)) << field << " in " << json;
  }
}

TEST(MetricsTest, LinkBytesByClassAddUpToTheTotal) {
  MetricsRecorder m("buffer", 1, 475);
  LinkStats link;
  link.experience = 1000;
  link.metadata = 100;
  link.polling = 10;
  link.priorities = 20;
  link.params = 300;
  link.control = 5;
  link.transitions_fetched = 64;
  link.distinct_transitions_fetched = 40;
  m.SetLinkStats(link);
  const ProgressRecord r = m.Progress(1.0);
  EXPECT_EQ(r.link_bytes_total, 1435u);
  EXPECT_DOUBLE_EQ(r.link_bytes_per_s, 1435.0);
  const std::string json = r.ToJson();
  for (const char* field :
       {"\"link_bytes_experience\":1000", "\"link_bytes_metadata\":100",
        "\"link_bytes_polling\":10", "\"link_bytes_priorities\":20", "\"link_bytes_params\":300",
        "\"link_bytes_control\":5", "\"transitions_fetched_total\":64",
        "\"distinct_transitions_fetched_total\":40", "\"link_bytes_total\":1435"}) {
    EXPECT_TRUE(Contains(json, field)) << field << " in " << json;
  }
  EXPECT_EQ(m.Summary(2.0).link.params, 300u);
  EXPECT_TRUE(Contains(m.Summary(2.0).ToJson(), "\"link_bytes_polling\":10"));
}

TEST(MetricsTest, DataAgeIsOverTheIntervalAndItsMeanOverTheRun) {
  MetricsRecorder m("learner", 1, 475);
  for (int i = 1; i <= 100; ++i) m.RecordDataAge(i * 0.01);  // 0.01 .. 1.00
  const ProgressRecord first = m.Progress(1.0);
  EXPECT_NEAR(*first.data_age_mean_s, 0.505, 1e-9);
  EXPECT_NEAR(*first.data_age_p50_s, 0.51, 1e-9);
  EXPECT_NEAR(*first.data_age_p95_s, 0.96, 1e-9);
  m.RecordDataAge(3.0);
  const ProgressRecord second = m.Progress(2.0);
  EXPECT_DOUBLE_EQ(*second.data_age_mean_s, 3.0);
  EXPECT_FALSE(m.Progress(3.0).data_age_mean_s.has_value());
  EXPECT_NEAR(*m.Summary(3.0).data_age_mean_s, (50.5 + 3.0) / 101, 1e-9);
}

TEST(MetricsTest, PolicyLagIsOverTheIntervalAndItsMeanOverTheRun) {
  MetricsRecorder m("buffer", 1, 475);
  EXPECT_FALSE(m.Progress(1.0).policy_lag_mean.has_value()) << "none recorded";
  for (int lag : {0, 1, 2, 5}) m.RecordPolicyLag(lag);
  const ProgressRecord first = m.Progress(2.0);
  EXPECT_DOUBLE_EQ(*first.policy_lag_mean, 2.0);
  EXPECT_NE(first.ToJson().find("\"policy_lag_mean\":2"), std::string::npos) << first.ToJson();
  m.RecordPolicyLag(12);
  EXPECT_DOUBLE_EQ(*m.Progress(3.0).policy_lag_mean, 12.0);
  const SummaryRecord s = m.Summary(3.0);
  EXPECT_DOUBLE_EQ(*s.policy_lag_mean, 4.0);
  EXPECT_NE(s.ToText().find("policy lag 4 versions"), std::string::npos) << s.ToText();
}

TEST(MetricsTest, TrainedErrorIsTheMeanOverTheTrainedTransitionsOfTheInterval) {
  MetricsRecorder m("buffer", 1, 475);
  const std::vector<float> a = {1, 2, 3};
  const std::vector<float> b = {6};
  m.RecordTrainStep(0.5, a);
  m.RecordTrainStep(0.5, b);
  EXPECT_DOUBLE_EQ(*m.Progress(1.0).trained_abs_td_error, 3.0);
  EXPECT_FALSE(m.Progress(2.0).trained_abs_td_error.has_value());
}

TEST(MetricsTest, ProbeLossAndSamplesPerInsertAreReportedAsSet) {
  MetricsRecorder m("learner", 1, 475);
  m.SetProbeLoss(0.25);
  m.SetSamplesPerInsert(4.0);
  const ProgressRecord r = m.Progress(1.0);
  EXPECT_DOUBLE_EQ(*r.probe_loss, 0.25);
  EXPECT_DOUBLE_EQ(*r.samples_per_insert, 4.0);
  const std::string json = r.ToJson();
  EXPECT_TRUE(Contains(json, "\"probe_loss\":0.25")) << json;
  EXPECT_TRUE(Contains(json, "\"samples_per_insert\":4")) << json;
  const SummaryRecord s = m.Summary(1.0);
  EXPECT_DOUBLE_EQ(*s.probe_loss, 0.25);
  EXPECT_DOUBLE_EQ(*s.samples_per_insert, 4.0);
}

TEST(MetricsTest, TheCrossingPercentileIsReportedAsSet) {
  MetricsRecorder m("buffer", 1, 475);
  m.SetCrossingPercentile(71.5);
  EXPECT_TRUE(Contains(m.Progress(1.0).ToJson(), "\"crossing_percentile\":71.5"));
  EXPECT_DOUBLE_EQ(*m.Summary(1.0).crossing_percentile, 71.5);
  EXPECT_TRUE(Contains(m.Summary(1.0).ToJson(), "\"crossing_percentile\":71.5"));
}

TEST(MetricsTest, JsonEscapesQuotesInStrings) {
  MetricsRecorder m("a\"b\\c", 0, 475);
  EXPECT_TRUE(Contains(m.Progress(1).ToJson(), "\"replay_placement\":\"a\\\"b\\\\c\""));
}

TEST(MetricsTest, MetricsFileWritesOneLinePerRecord) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/metrics.jsonl";
  {
    auto file = MetricsFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    ASSERT_TRUE((*file)->Write("{\"a\":1}").ok());
    ASSERT_TRUE((*file)->Write("{\"b\":2}").ok());
  }
  std::ifstream in(path);
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(in, line)) lines.push_back(line);
  EXPECT_EQ(lines, (std::vector<std::string>{"{\"a\":1}", "{\"b\":2}"}));
}

TEST(MetricsTest, MetricsFileRefusesAPathThatCannotBeCreated) {
  EXPECT_TRUE(absl::IsInvalidArgument(MetricsFile::Open("/nonexistent/dir/m.jsonl").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(MetricsFile::Open("").status()));
}

}  // namespace
}  // namespace dreplay::learner
