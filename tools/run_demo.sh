#!/usr/bin/env bash
# The README's first command: the end-to-end demo. A buffer node (the replay
# server), 4 actors and a learner train DQN on CartPole-v1 on this machine;
# the learner's connection emulates a 10 km / 25 GbE link, and the
# prioritized replay memory sits in the buffer node (the learner READs the
# batches it pre-samples, keeping what it received: the learner cache). The
# replay ratio is 16 samples per insert (docs/benchmarks.md says why). The
# run ends when the learner's greedy evaluation (100 episodes) averages 475
# or more, or when the time budget is spent.
#
#   tools/run_demo.sh                     # defaults: budget 600 s
#   tools/run_demo.sh --budget_s 300
#   tools/run_demo.sh --replay_placement learner   # the replay memory at the learner
#   tools/run_demo.sh --replay_placement hybrid    # at the learner, forwarded by priority
#   tools/run_demo.sh --seed 2 --lr 5e-4  # anything else goes to tools/launch/run_local.py
#   tools/run_demo.sh --samples_per_insert 0 --nolearner_cache   # no limit, no cache
#   tools/run_demo.sh --env MinAtar/Breakout [--observation pixels84]
#
# With a MinAtar environment the run has no solve threshold: it trains for
# the whole budget, shows the greedy return as it goes (docs/minatar.md), and
# exits 0 when the run completes.
#
# Installs what is missing (tools/install_deps.sh, as root the first time),
# builds the three binaries, shows the learner's progress, and prints a
# summary (tools/launch/metrics_lines.py demo_summary): time to solve, environment
# steps, transitions and bytes across the link, the link bytes by traffic
# class (experience, metadata, polling, priorities, params, control), the
# transitions fetched, the experience bytes per distinct transition trained
# on, the probe loss, the achieved samples per insert and the data age.
# Logs and metrics stay in the directory it names.
#
# Exit status: 0 when solved within the budget (MinAtar: when the run
# completes), 1 when not (or on failure).
set -euo pipefail
cd "$(dirname "$0")/.."

budget_s=600
env=CartPole-v1
placement=buffer
pass=()
while [ $# -gt 0 ]; do
  case "$1" in
    --budget_s) budget_s="$2"; shift 2 ;;
    --budget_s=*) budget_s="${1#*=}"; shift ;;
    --env) env="$2"; shift 2 ;;
    --env=*) env="${1#*=}"; shift ;;
    --replay_placement) placement="$2"; shift 2 ;;
    --replay_placement=*) placement="${1#*=}"; shift ;;
    -h|--help) sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) pass+=("$1"); shift ;;
  esac
done

tools/install_deps.sh
echo "run_demo: building the replay server, actor and learner"
bazel build --jobs=2 //replay_server:replay_server //actor_client:actor //learner_client:learner

out=$(mktemp -d "${TMPDIR:-/tmp}/dreplay-demo-XXXXXX")
metrics="$out/metrics.jsonl"
solve=(--stop_when_solved)
# MinAtar: no solve threshold, and a greedy evaluation of 20 episodes every
# 30 s, so that evaluating does not take the learner's time from training
# (100 episodes every 5 s left a shared-core learner a few batches a minute).
evaluation=()
case "$env" in MinAtar/*) solve=() evaluation=(--eval_interval_s 30 --eval_episodes 20) ;; esac
echo "run_demo: 4 actors, $placement placement, $env, link 10km-25g, 16 samples per insert," \
  "budget ${budget_s} s; logs in $out"
start=$(date +%s.%N)
set +e
python3 tools/launch/run_local.py --replay_placement "$placement" --link 10km-25g --env "$env" \
  --actors 4 --samples_per_insert 16 "${solve[@]+"${solve[@]}"}" \
  "${evaluation[@]+"${evaluation[@]}"}" --duration_s "$budget_s" \
  --metrics_out "$metrics" --out_dir "$out" "${pass[@]+"${pass[@]}"}"
rc=$?
set -e
end=$(date +%s.%N)

solved=0
python3 tools/launch/metrics_lines.py demo_summary "$metrics" "$start" "$end" "$rc" "$env" &&
  solved=1

if [ "$rc" -ne 0 ]; then
  echo "run_demo: the run failed (exit code $rc); logs in $out" >&2
  exit 1
fi
if [ "$solved" -ne 1 ] && [ ${#solve[@]} -gt 0 ]; then
  exit 1
fi
exit 0
