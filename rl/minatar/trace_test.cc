// Copyright dreplay authors.
//
// Replays every reference trace listed in testdata/traces.tsv (made from
// MinAtar v1.0.15 by testdata/make_traces.sh) and checks our port's trace
// against it line for line: every reward, terminal flag and state bit, across
// resets and Freeway's time limit. Also checks that the traces cover what
// they are meant to.

#include "rl/minatar/trace.h"

#include "rl/minatar/game.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"

namespace dreplay::rl::minatar {
namespace {

constexpr char kTestdata[] = "rl/minatar/testdata/";

struct TraceCase {
  std::string file;  // the unzipped trace, in kTestdata
  TraceOptions options;
};

// Names a case by its file in failure messages.
void PrintTo(const TraceCase& c, std::ostream* os) { *os << c.file; }

std::vector<std::string> ReadLines(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<TraceCase> LoadManifest() {
  std::vector<TraceCase> cases;
  for (const std::string& line : ReadLines(std::string(kTestdata) + "traces.tsv")) {
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> f = absl::StrSplit(line, '\t');
    TraceCase c;
    if (f.size() != 7 || !absl::SimpleAtoi(f[2], &c.options.seed) ||
        !absl::SimpleAtod(f[3], &c.options.sticky_action_prob)) {
      ADD_FAILURE() << "bad manifest line: " << line;
      continue;
    }
    c.file = std::string(absl::StripSuffix(f[0], ".gz"));
    c.options.env = f[1];
    c.options.continue_after_terminal = true;
    cases.push_back(c);
  }
  return cases;
}

// The value of an integer field of a trace line, or -1 if it has none.
int IntField(const std::string& line, absl::string_view key) {
  const std::string prefix = absl::StrCat("\"", key, "\":");
  const size_t at = line.find(prefix);
  if (at == std::string::npos) return -1;
  const size_t start = at + prefix.size();
  int value = -1;
  if (!absl::SimpleAtoi(line.substr(start, line.find(',', start) - start), &value)) return -1;
  return value;
}

// The actions of a trace, in order.
std::vector<int> Actions(const std::vector<std::string>& lines) {
  std::vector<int> actions;
  for (const std::string& line : lines) {
    if (!absl::StartsWith(line, "{\"reset\"")) actions.push_back(IntField(line, "action"));
  }
  return actions;
}

class TraceTest : public ::testing::TestWithParam<TraceCase> {};

TEST_P(TraceTest, MatchesTheReferenceBitForBit) {
  const TraceCase& c = GetParam();
  const std::vector<std::string> expected = ReadLines(kTestdata + c.file);
  ASSERT_GT(expected.size(), 1u);
  std::vector<std::string> actual;
  const absl::StatusOr<int> taken = WriteTrace(
      c.options, Actions(expected), [&](absl::string_view line) { actual.emplace_back(line); });
  ASSERT_TRUE(taken.ok()) << taken.status();
  for (size_t i = 0; i < std::min(expected.size(), actual.size()); ++i) {
    // Stop at the first difference: everything after it differs too.
    ASSERT_EQ(actual[i], expected[i]) << c.file << " line " << i + 1;
  }
  EXPECT_EQ(actual.size(), expected.size());
}

std::string CaseName(const ::testing::TestParamInfo<TraceCase>& info) {
  std::string name = std::string(absl::StripSuffix(info.param.file, ".jsonl"));
  for (char& ch : name) {
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Reference, TraceTest, ::testing::ValuesIn(LoadManifest()), CaseName);

TEST(TraceCoverageTest, EveryGameHasSeveralSeedsThousandsOfStepsAndResets) {
  struct Coverage {
    std::map<int64_t, bool> seeds;
    int steps = 0;
    int episodes_ended = 0;
    int longest_episode = 0;
  };
  std::map<std::string, Coverage> games;
  for (const TraceCase& c : LoadManifest()) {
    Coverage& g = games[c.options.env];
    g.seeds[c.options.seed] = true;
    int episode = 0;
    for (const std::string& line : ReadLines(kTestdata + c.file)) {
      if (absl::StartsWith(line, "{\"reset\"")) continue;
      ++g.steps;
      ++episode;
      if (absl::StrContains(line, "\"terminated\":true")) {
        ++g.episodes_ended;
        g.longest_episode = std::max(g.longest_episode, episode);
        episode = 0;
      }
    }
  }
  EXPECT_EQ(games.size(), 5u);
  for (const auto& [name, g] : games) {
    EXPECT_GE(g.seeds.size(), 3u) << name;
    EXPECT_GE(g.steps, 10000) << name;
    EXPECT_GE(g.episodes_ended, 3) << name;
  }
  // Freeway ends only at its time limit: the 2501st frame of an episode.
  EXPECT_EQ(games["MinAtar/Freeway"].longest_episode, 2501);
}

TEST(TraceTest, RejectsASeedNumPyWouldReject) {
  TraceOptions options;
  options.env = "MinAtar/Breakout";
  options.seed = int64_t{1} << 32;
  auto ignore = [](absl::string_view) {};
  EXPECT_EQ(WriteTrace(options, {}, ignore).status().code(), absl::StatusCode::kInvalidArgument);
  options.seed = -1;
  EXPECT_EQ(WriteTrace(options, {}, ignore).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TraceTest, StopsAtTheFirstTerminalUnlessToldToContinue) {
  TraceOptions options;
  options.env = "MinAtar/Breakout";
  options.sticky_action_prob = 0;
  const std::vector<int> noops(100, kNoop);  // the ball is missed long before
  std::vector<std::string> lines;
  absl::StatusOr<int> taken =
      WriteTrace(options, noops, [&](absl::string_view line) { lines.emplace_back(line); });
  ASSERT_TRUE(taken.ok());
  EXPECT_LT(*taken, 100);
  EXPECT_EQ(lines.size(), static_cast<size_t>(*taken) + 1);
  EXPECT_TRUE(absl::StrContains(lines.back(), "\"terminated\":true"));
}

}  // namespace
}  // namespace dreplay::rl::minatar
