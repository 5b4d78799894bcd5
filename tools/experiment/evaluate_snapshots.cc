// Copyright dreplay authors.
//
// evaluate_snapshots: the greedy return of every parameter snapshot a
// learner wrote with --snapshot_dir, evaluated here, after the run, so that
// evaluation never competes with training for the learner's CPU.
//
//   evaluate_snapshots --snapshot_dir=DIR --env=CartPole-v1 --hidden=64,64
//       [--episodes=100] [--seed=1000003] [--out=FILE]
//
// Reads DIR/snapshot-<k>.params for k = 0, 1, ... (learner_client/
// snapshot_writer.h) until the first missing index, evaluates each with the
// learner's own batched greedy evaluation (learner_loop.h, EvaluateGreedy:
// episode i starts from Reset(seed + i)), and writes one JSON line per
// snapshot to --out (default: stdout):
//   {"index": k, "eval_return_mean": R, "eval_return_std": .., "eval_return_min": ..,
//    "eval_return_max": ..}
// eval_return_std is the sample standard deviation of the episodes' returns.
// The run's clock, train steps and link bytes at each snapshot are in
// DIR/snapshots.jsonl; tools/experiment/experiment.py joins the two by index.
//
// Exit status: 0 with every snapshot evaluated, 1 on an unreadable or
// mismatched snapshot (or none at all), 2 for a bad flag.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/binary_main.h"
#include "common/flag_values.h"
#include "common/status_macros.h"
#include "gflags/gflags.h"
#include "learner_client/learner_loop.h"
#include "learner_client/snapshot_writer.h"
#include "rl/make_environment.h"
#include "rl/network_flags.h"
#include "rl/qnet.h"

DEFINE_string(snapshot_dir, "", "the learner's --snapshot_dir (required)");
DEFINE_string(env, "CartPole-v1", "the environment the learner trained on");
DEFINE_string(observation, "native", "the learner's --observation (native or pixels84)");
DEFINE_string(hidden, "", "the learner's hidden layer sizes (empty: the environment's default)");
DEFINE_int32(episodes, 100, "greedy episodes per snapshot");
DEFINE_int64(seed, 1000003, "episode i starts from Reset(seed + i), as the learner's evaluation");
DEFINE_string(out, "", "write the JSON lines here (default: stdout)");

namespace dreplay::learner {
namespace {

constexpr char kUsage[] =
    "Evaluates a learner's parameter snapshots offline: one JSON line per snapshot with its\n"
    "greedy mean return. Exit status: 0 done, 1 a bad or missing snapshot, 2 a bad flag.\n\n"
    "  evaluate_snapshots --snapshot_dir=DIR [--env=CartPole-v1] [--hidden=64,64] [--out=FILE]";

struct Options {
  std::string dir;
  std::string env;
  rl::ObservationMode observation = rl::ObservationMode::kNative;
  rl::QNetworkOptions network;
  int episodes = 100;
  uint64_t seed = 0;

  absl::Status Validate() const {
    if (dir.empty()) return FlagError("snapshot_dir", "", "is required");
    if (episodes < 1) return FlagError("episodes", std::to_string(episodes), "must be >= 1");
    return network.Validate();
  }
};

absl::StatusOr<Options> OptionsFromFlags() {
  Options o;
  o.dir = FLAGS_snapshot_dir;
  o.env = FLAGS_env;
  ASSIGN_OR_RETURN(o.observation, rl::ObservationFlag(FLAGS_observation));
  ASSIGN_OR_RETURN(const std::vector<int> hidden,
                   rl::HiddenFlag(FLAGS_hidden, o.env, o.observation));
  ASSIGN_OR_RETURN(std::unique_ptr<rl::Environment> env, rl::MakeEnvironment(o.env, o.observation));
  o.network = rl::NetworkOptionsFor(env->spec(), hidden);
  o.episodes = FLAGS_episodes;
  RETURN_IF_ERROR(CheckAtLeast("seed", FLAGS_seed, 0));
  o.seed = static_cast<uint64_t>(FLAGS_seed);
  RETURN_IF_ERROR(o.Validate());
  return o;
}

absl::StatusOr<std::vector<uint8_t>> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// The sample standard deviation (n - 1); 0 for a single return.
double SampleStd(const std::vector<double>& values, double mean) {
  if (values.size() < 2) return 0.0;
  double sum = 0.0;
  for (double v : values) sum += (v - mean) * (v - mean);
  return std::sqrt(sum / static_cast<double>(values.size() - 1));
}

absl::Status Evaluate(const Options& options, std::ostream& out) {
  ASSIGN_OR_RETURN(std::unique_ptr<rl::QNetwork> network, rl::QNetwork::Create(options.network, 0));
  uint64_t index = 0;
  for (;; ++index) {
    const std::string path = absl::StrCat(options.dir, "/", SnapshotFileName(index));
    absl::StatusOr<std::vector<uint8_t>> bytes = ReadFile(path);
    if (absl::IsNotFound(bytes.status())) break;
    RETURN_IF_ERROR(bytes.status());
    absl::StatusOr<uint64_t> version = network->Load(*bytes);
    if (!version.ok()) {
      return absl::Status(version.status().code(),
                          absl::StrCat(path, ": ", version.status().message()));
    }
    ASSIGN_OR_RETURN(
        const rl::EvaluationResult result,
        EvaluateGreedy(*network, options.env, options.episodes, options.seed, options.observation));
    const auto [lo, hi] = std::minmax_element(result.returns.begin(), result.returns.end());
    out << absl::StrFormat(
               "{\"index\": %d, \"eval_return_mean\": %.6g, \"eval_return_std\": %.6g, "
               "\"eval_return_min\": %.6g, \"eval_return_max\": %.6g}",
               index, result.mean_return, SampleStd(result.returns, result.mean_return), *lo, *hi)
        << std::endl;
    if (!out) return absl::DataLossError("cannot write the output");
  }
  if (index == 0) {
    return absl::NotFoundError(
        absl::StrCat("no snapshot in ", options.dir, " (", SnapshotFileName(0), " is missing)"));
  }
  std::cerr << "evaluate_snapshots: " << index << " snapshots of " << options.dir << ", "
            << options.episodes << " episodes each" << std::endl;
  return absl::OkStatus();
}

int Run(const BinaryMain& binary) {
  absl::StatusOr<Options> options = OptionsFromFlags();
  if (!options.ok()) return binary.BadFlag(options.status());
  std::ofstream file;
  if (!FLAGS_out.empty()) {
    file.open(FLAGS_out);
    if (!file) return binary.Exit(kExitFailure, absl::StrCat("cannot create ", FLAGS_out));
  }
  const absl::Status status = Evaluate(*options, FLAGS_out.empty() ? std::cout : file);
  if (!status.ok()) return binary.Failure(status);
  return kExitSuccess;
}

}  // namespace
}  // namespace dreplay::learner

int main(int argc, char** argv) {
  dreplay::BinaryMain binary(
      {"evaluate_snapshots", dreplay::learner::kUsage, "evaluate_snapshots", true});
  if (std::optional<int> done = binary.Init(argc, argv)) return *done;
  return dreplay::learner::Run(binary);
}
