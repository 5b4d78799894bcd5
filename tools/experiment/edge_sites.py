#!/usr/bin/python3
"""The edge-sites experiment: one learner over two buffer nodes of unequal
sites, sampled three ways (learner --shard_policy):

  exact        each draw from node k with probability S_k / sum S: exact
               prioritized sampling over both nodes
  first_ready  the batch of whichever node staged one first
  round_robin  the nodes' batches in turn (Reverb's sharding)

The sites: site 0 has two actors at full speed, site 1 one actor at half
speed (run_local.py --buffer_nodes 2 --actors 3 --site_speeds 1,0.5), so
site 0 generates four times what site 1 does. Every run trains the same
number of updates at the same governed rate (learner --max_updates_per_s,
--train_steps), over the same emulated link to each node (10km-25g), with
paired seeds (seed k gives every policy the same initial network, actors
and environments), the policies' order shuffled per seed.

Per run: the greedy return, evaluated offline from parameter snapshots
(evaluate_snapshots, EVAL_EPISODES episodes each), as its mean over the
updates (the area under the return-vs-updates curve); and the learner's own
figures (learner.log: "node:" and "shards:" lines): each node's share of
the rows and of the priority mass, and the policy's total-variation
distance from exact sampling, 1/2 sum_k |taken share - mass share| (each
node samples exactly by its own priorities, so the distance between the
policy's distribution and p^alpha / sum S is the nodes'; an exact run's is
its multinomial noise).

Outputs under --out: runs/<policy>-seed<k>/ (run_local's logs,
metrics.jsonl, snap/, evals.jsonl), summary.json and summary.md: per policy
the mean and 95 % bootstrap interval of each figure; paired differences of
exact against each other policy (BCa interval, paired t, Wilcoxon).

Usage:
  tools/experiment/edge_sites.py --out out/edge-sites              # 5 seeds, 15 runs, about 15 min
  tools/experiment/edge_sites.py --quick --out /tmp/edge-quick     # 1 seed, 3 short runs
  tools/experiment/edge_sites.py --summarize_only --out out/edge-sites
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "launch"))
import experiment_stats  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
POLICIES = ("exact", "first_ready", "round_robin")
ACTOR_RATE = 150.0      # steps/s of a full-speed actor
SITE_SPEEDS = "1,0.5"   # site 1's actor at half speed
UPDATES_PER_S = 200.0   # the governed rate, every policy
UPDATES = 8000
SNAPSHOT_UPDATES = 1000
EVAL_EPISODES = 50
MIN_REPLAY = 500
START_MARGIN_S = 20.0  # sites fill, at their own pace, before every policy can sample
ORDER_SEED = 20261204
NODE_LINE = re.compile(r"^node: (?P<address>\S+) rows (?P<rows>\d+) "
                       r"taken_share (?P<taken>[0-9.e-]+) mass_share (?P<mass>[0-9.e-]+) "
                       r"batches (?P<batches>\d+) passed_over (?P<passed_over>\d+)")
SHARDS_LINE = re.compile(r"^shards: policy (?P<policy>\S+) tv (?P<tv>[0-9.e-]+) "
                         r"mass_drift_per_s (?P<drift>\S+) longest_gap_s (?P<gap>[0-9.e-]+)")


def log(msg):
    print("edge_sites: " + msg, file=sys.stderr, flush=True)


def default_bin_dir():
    opt = os.path.join(ROOT, "bazel-out", "k8-opt", "bin")
    return opt if os.path.isdir(opt) else os.path.join(ROOT, "bazel-bin")


def pin_cpus():
    n = os.cpu_count() or 1
    return "0:1-%d" % (n - 1) if n > 2 else ("0:1" if n == 2 else "")


def run_argv(args, policy, seed, run_dir):
    duration_s = args.updates / UPDATES_PER_S + START_MARGIN_S
    argv = [
        sys.executable, os.path.join(ROOT, "tools", "launch", "run_local.py"),
        "--bin_dir", args.bin_dir, "--buffer_nodes", "2", "--shard_policy", policy,
        "--actors", "3", "--actor_rate", repr(ACTOR_RATE), "--site_speeds", SITE_SPEEDS,
        "--link", "10km-25g", "--env", "CartPole-v1", "--seed", str(seed),
        "--min_replay", str(MIN_REPLAY), "--max_updates_per_s", repr(UPDATES_PER_S),
        "--train_steps", str(args.updates), "--duration_s", repr(duration_s),
        "--eval_interval_s", "0", "--progress_interval_s", "2.5",
        "--metrics_out", os.path.join(run_dir, "metrics.jsonl"), "--out_dir", run_dir,
        "--learner_flag=--snapshot_dir=" + os.path.join(run_dir, "snap"),
        "--learner_flag=--snapshot_interval_s=%r" % (SNAPSHOT_UPDATES / UPDATES_PER_S),
    ]
    if pin_cpus():
        argv += ["--pin_cpus", pin_cpus()]
    if args.epsilon is not None:
        # Every actor the same epsilon, in place of Ape-X's ladder over them.
        argv += ["--actor_flag=--epsilon_base=%r" % args.epsilon, "--actor_flag=--epsilon_alpha=0"]
    return argv


def evaluate(args, run_dir):
    argv = [os.path.join(args.bin_dir, "tools", "experiment", "evaluate_snapshots"),
            "--snapshot_dir=" + os.path.join(run_dir, "snap"), "--episodes=%d" % EVAL_EPISODES,
            "--out=" + os.path.join(run_dir, "evals.jsonl"), "--env=CartPole-v1"]
    if subprocess.call(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) != 0:
        raise RuntimeError("evaluation failed: " + " ".join(argv))


def complete(run_dir):
    return (os.path.exists(os.path.join(run_dir, "evals.jsonl"))
            and experiment_stats.read_jsonl(os.path.join(run_dir, "evals.jsonl")))


def run_figures(run_dir, updates):
    """The figures of one finished run, or None when its files lack them."""
    with open(os.path.join(run_dir, "learner.log"), errors="replace") as f:
        lines = f.read().splitlines()
    nodes = [m.groupdict() for m in map(NODE_LINE.match, lines) if m]
    shards = [m.groupdict() for m in map(SHARDS_LINE.match, lines) if m]
    if len(nodes) != 2 or len(shards) != 1:
        return None
    summary = [r for r in experiment_stats.read_jsonl(os.path.join(run_dir, "metrics.jsonl"))
               if r.get("type") == "summary"]
    points = experiment_stats.return_curve(run_dir)
    drift = shards[0]["drift"]
    return {
        "auc_updates": experiment_stats.area_under_updates(points, updates),
        "final_return": points[-1][3] if points else None,
        "train_steps": summary[-1]["train_steps"] if summary else None,
        "tv": float(shards[0]["tv"]),
        "mass_drift_per_s": float(drift) if drift != "-" else None,
        "longest_gap_s": float(shards[0]["gap"]),
        "site0_taken_share": float(nodes[0]["taken"]),
        "site0_mass_share": float(nodes[0]["mass"]),
        "passed_over": sum(int(n["passed_over"]) for n in nodes),
        "link_bytes_total": summary[-1]["link_bytes_total"] if summary else None,
    }


FIGURES = ("auc_updates", "final_return", "tv", "site0_taken_share", "site0_mass_share",
           "mass_drift_per_s", "longest_gap_s", "train_steps", "link_bytes_total")


def summarize(args):
    runs = {p: {} for p in args.policies}
    for policy in args.policies:
        for seed in range(1, args.seeds + 1):
            run_dir = os.path.join(args.out, "runs", "%s-seed%d" % (policy, seed))
            if complete(run_dir):
                figures = run_figures(run_dir, args.updates)
                if figures is not None:
                    runs[policy][seed] = figures
    out = {"design": {"updates": args.updates, "updates_per_s": UPDATES_PER_S,
                      "actor_rate": ACTOR_RATE, "site_speeds": SITE_SPEEDS, "actors": 3,
                      "buffer_nodes": 2, "link": "10km-25g", "eval_episodes": EVAL_EPISODES,
                      "seeds": args.seeds,
                      "epsilon": args.epsilon if args.epsilon is not None else "ladder"},
           "policies": {}, "paired": {}}
    for policy, by_seed in runs.items():
        out["policies"][policy] = {
            f: experiment_stats.mean_ci([r[f] for r in by_seed.values()]) for f in FIGURES}
    if "exact" in runs:
        for other in args.policies:
            if other == "exact":
                continue
            out["paired"]["exact-" + other] = {
                f: experiment_stats.paired_test({s: r[f] for s, r in runs["exact"].items()},
                                                {s: r[f] for s, r in runs[other].items()})
                for f in ("auc_updates", "final_return", "tv")}
    out = experiment_stats.round_figures(out)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write(report(out))
    return out


def interval(c):
    if c is None or c.get("mean") is None:
        return "-"
    ci = c.get("ci95")
    text = "%.3g" % c["mean"]
    return text + (" [%.3g, %.3g]" % tuple(ci) if ci else "")


def report(out):
    d = out["design"]
    lines = ["# Edge sites: exact, first_ready and round_robin at equal updates", "",
             "Two buffer nodes: site 0 with 2 actors at %g steps/s, site 1 with 1 actor at "
             "half that; %d updates at %g/s; link %s to each node; actors' epsilon: %s; %d "
             "seeds; greedy return from snapshots (%d episodes each). Means with 95 %% bootstrap "
             "intervals." % (d["actor_rate"], d["updates"], d["updates_per_s"], d["link"],
                             d.get("epsilon", "ladder"), d["seeds"], d["eval_episodes"]), "",
             "| policy | return, mean over updates | final return | TV from exact | "
             "site 0 rows | site 0 mass | longest wait (s) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for policy, figures in out["policies"].items():
        lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            policy, interval(figures["auc_updates"]), interval(figures["final_return"]),
            interval(figures["tv"]), interval(figures["site0_taken_share"]),
            interval(figures["site0_mass_share"]), interval(figures["longest_gap_s"])))
    if out["paired"]:
        lines += ["", "Paired differences (exact minus the other; BCa interval, paired t, "
                  "Wilcoxon):", "", "| contrast | figure | mean [95 % CI] | t p | Wilcoxon p | "
                  "exact higher |", "| --- | --- | --- | --- | --- | --- |"]
        for name, tests in out["paired"].items():
            for figure, t in tests.items():
                ci = t.get("ci95")
                lines.append("| %s | %s | %s | %s | %s | %d of %d |" % (
                    name, figure, ("%.3g" % t["mean"] if t["mean"] is not None else "-") +
                    (" [%.3g, %.3g]" % tuple(ci) if ci else ""),
                    "%.3g" % t["t_p"] if t.get("t_p") is not None else "-",
                    "%.3g" % t["wilcoxon_p"] if t.get("wilcoxon_p") is not None else "-",
                    t["wins"], t["n"]))
    return "\n".join(lines) + "\n"


def run_all(args):
    schedule = []
    for seed in range(1, args.seeds + 1):
        order = list(args.policies)
        random.Random("%d/%d" % (ORDER_SEED, seed)).shuffle(order)
        schedule += [(p, seed) for p in order]
    for i, (policy, seed) in enumerate(schedule):
        run_dir = os.path.join(args.out, "runs", "%s-seed%d" % (policy, seed))
        if args.resume and complete(run_dir):
            continue
        os.makedirs(run_dir, exist_ok=True)
        log("run %d of %d: %s, seed %d" % (i + 1, len(schedule), policy, seed))
        with open(os.path.join(run_dir, "run_local.out"), "w") as out:
            code = subprocess.call(run_argv(args, policy, seed, run_dir), stdout=out,
                                   stderr=subprocess.STDOUT)
        if code != 0:
            raise RuntimeError("run %s seed %d failed (exit %d): see %s" % (
                policy, seed, code, os.path.join(run_dir, "run_local.out")))
        evaluate(args, run_dir)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="directory for the runs and the summary")
    p.add_argument("--seeds", type=int, default=5, help="paired seeds (default 5)")
    p.add_argument("--policies", default=",".join(POLICIES),
                   help="comma-separated shard policies (default all three)")
    p.add_argument("--updates", type=int, default=UPDATES,
                   help="updates per run (default %d)" % UPDATES)
    p.add_argument("--quick", action="store_true",
                   help="a smoke run: 1 seed, 1,500 updates per run")
    p.add_argument("--epsilon", type=float, default=None,
                   help="every actor's epsilon (default: Ape-X's ladder, which gives the three "
                   "actors 0.4, 0.016 and 0.0007 by their index, so the sites differ in it too)")
    p.add_argument("--resume", action="store_true", help="skip runs already complete")
    p.add_argument("--summarize_only", action="store_true", help="summarize finished runs")
    p.add_argument("--bin_dir", default=os.environ.get("DREPLAY_BIN_DIR", "") or default_bin_dir(),
                   help="the built binaries (default bazel-out/k8-opt/bin)")
    args = p.parse_args(argv)
    args.policies = [x for x in args.policies.split(",") if x]
    for policy in args.policies:
        if policy not in POLICIES:
            p.error("unknown policy %r (expected %s)" % (policy, ", ".join(POLICIES)))
    if args.quick:
        args.seeds, args.updates = 1, 1500
    if args.epsilon is not None and not 0 < args.epsilon <= 1:
        p.error("--epsilon must be in (0, 1], got %r" % args.epsilon)
    if args.seeds < 1 or args.updates < SNAPSHOT_UPDATES:
        p.error("--seeds must be >= 1 and --updates >= %d" % SNAPSHOT_UPDATES)
    return args


def main(argv):
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    if not args.summarize_only:
        run_all(args)
    out = summarize(args)
    sys.stdout.write(report(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
