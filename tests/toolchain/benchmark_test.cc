// Google Benchmark links and runs a registered benchmark to completion.
#include <benchmark/benchmark.h>

#include <numeric>
#include <vector>

#include "gtest/gtest.h"

namespace {

int g_runs = 0;

void BM_Sum(benchmark::State& state) {
  std::vector<int> v(static_cast<size_t>(state.range(0)), 1);
  for (auto _ : state) {
    benchmark::DoNotOptimize(std::accumulate(v.begin(), v.end(), 0));
  }
  ++g_runs;
}

class CountingReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs) {
      if (r.iterations > 0) ++reported;
    }
  }
  int reported = 0;
};

TEST(BenchmarkToolchainTest, RunsARegisteredBenchmark) {
  benchmark::RegisterBenchmark("BM_Sum", BM_Sum)->Arg(64)->Iterations(100);
  CountingReporter reporter;
  const size_t ran = benchmark::RunSpecifiedBenchmarks(&reporter);
  EXPECT_EQ(ran, 1u);
  EXPECT_EQ(reporter.reported, 1);
  EXPECT_GE(g_runs, 1);
}

}  // namespace
