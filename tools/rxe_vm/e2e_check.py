#!/usr/bin/env python3
"""End to end on a real RDMA provider: tools/launch/run_local.py starts the replay
server, two actors and a learner (--provider, ibverbs by default; no link
emulation, which is the soft provider's), trains CartPole-v1 for a short
while in each of three configurations, and checks that the counters add up:

  buffer          the learner READs pre-sampled batches;
  buffer+cache    the same with the transfer-once cache: the learner trains
                  on more transitions than cross the link;
  learner         the buffer node forwards, the learner keeps the replay.

In each: training and acting happened, transitions crossed the link, and
the link bytes by class add up to the queue pair's total. Exit status 0 when
every check holds; the failures are printed otherwise.

  python3 tools/rxe_vm/e2e_check.py --bin_dir bazel-bin --out_dir /tmp/e2e
"""

import argparse
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from tools.launch import metrics_lines  # noqa: E402

BATCH_SIZE = 32
CONFIGS = {
    "buffer": ["--replay_placement", "buffer", "--nolearner_cache"],
    "buffer_cache": ["--replay_placement", "buffer", "--learner_cache"],
    "learner": ["--replay_placement", "learner", "--samples_per_insert", "4"],
}


def run(args, name, extra):
    out_dir = os.path.join(args.out_dir, name)
    os.makedirs(out_dir, exist_ok=True)
    metrics = os.path.join(out_dir, "metrics.jsonl")
    cmd = [
        sys.executable, os.path.join(ROOT, "tools/launch/run_local.py"),
        "--bin_dir", args.bin_dir,
        "--provider", args.provider,
        "--link", "none",
        "--env", "CartPole-v1",
        "--actors", "2",
        "--batch_size", str(BATCH_SIZE),
        "--seed", "1",
        "--duration_s", str(args.duration_s),
        "--eval_episodes", "2",
        "--eval_interval_s", str(args.duration_s),
        "--progress_interval_s", "5",
        "--metrics_out", metrics,
        "--out_dir", out_dir,
    ] + extra
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=args.duration_s + 240)
    output = proc.stdout.decode(errors="replace")
    if proc.returncode != 0:
        return None, "run_local.py exited with %d:\n%s" % (proc.returncode, output[-3000:])
    _, summary = metrics_lines.read(metrics, strict=True)
    if summary is None:
        return None, "no summary record:\n" + output[-3000:]
    return summary, output


def check(name, summary):
    """The failed checks of one run, as strings."""
    problems = []

    def expect(condition, what):
        if not condition:
            problems.append("%s: %s" % (name, what))

    placement = "learner" if name == "learner" else "buffer"
    expect(summary["replay_placement"] == placement, "replay_placement is %r, not %r"
           % (summary["replay_placement"], placement))
    for key in ("train_steps", "env_steps", "link_transitions_total", "link_bytes_total",
                "transitions_fetched_total"):
        expect(summary[key] > 0, "%s is %r" % (key, summary[key]))
    by_class = sum(summary["link_bytes_" + c] for c in metrics_lines.LINK_CLASSES)
    expect(by_class == summary["link_bytes_total"],
           "link bytes by class add up to %d, the total is %d" %
           (by_class, summary["link_bytes_total"]))
    distinct = summary["distinct_transitions_fetched_total"]
    fetched = summary["transitions_fetched_total"]
    expect(distinct <= fetched, "%d distinct of %d fetched" % (distinct, fetched))
    if name == "buffer_cache":
        # Transfer-once: the learner trains on more than crosses the link;
        # the rest are references to what it holds. (A transition staged
        # again before its first batch's priorities reached the server still
        # crosses twice: the server marks it held only then.)
        sampled = summary["train_steps"] * BATCH_SIZE
        expect(summary["link_transitions_total"] < sampled,
               "%d transitions crossed the link for %d trained on: no cache hit" %
               (summary["link_transitions_total"], sampled))
    return problems


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin_dir", default="bazel-bin", help="where the built binaries are")
    p.add_argument("--out_dir", required=True, help="logs and metrics of each run")
    p.add_argument("--provider", default="ibverbs", help="RDMA provider (default ibverbs)")
    p.add_argument("--duration_s", type=float, default=20.0,
                   help="learner run time of each configuration (default 20)")
    p.add_argument("--only", choices=sorted(CONFIGS), help="run one configuration")
    args = p.parse_args()
    if args.duration_s <= 0:
        p.error("--duration_s must be positive")
    problems = []
    for name, extra in CONFIGS.items():
        if args.only and name != args.only:
            continue
        summary, output = run(args, name, extra)
        if summary is None:
            problems.append("%s: %s" % (name, output))
            continue
        print("%s: %d train steps (%d transitions trained on), %d env steps, %d transitions "
              "on the link (%d distinct), %d link bytes" %
              (name, summary["train_steps"], summary["train_steps"] * BATCH_SIZE,
               summary["env_steps"], summary["link_transitions_total"],
               summary["distinct_transitions_fetched_total"], summary["link_bytes_total"]))
        problems += check(name, summary)
    for problem in problems:
        print("FAILED " + problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
