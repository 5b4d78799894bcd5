#!/usr/bin/env python3
"""The long-haul experiment: where does replay at the buffer node (the
buffer placement, the paper's "proposal") beat replay at the learner (the
learner placement, the paper's "existing approach"), and by how much? A
regime map with controls and confidence intervals.

Arms (each a placement and its data path):
  learner-in_order   replay at the learner; the buffer node forwards every
                      transition, oldest first (lapped ones are lost)
  learner-freshest   the same, but a reader that falls behind jumps to the
                      newest transitions
  buffer              replay at the buffer node; the learner READs
                      pre-sampled prioritized batches
  buffer-cache      the same with the transfer-once cache: a transition the
                      learner holds is not sent again

Regimes (REGIMES below state every number: generation rate, transition
size, link bandwidth and delay, samples per insert): the paper's fibre
(link not binding), a WAN that the actors' data outruns 2-4 times, at a
DQN-like replay ratio (8) and an Ape-X-like one (0.5); plus the alpha = 0
control of the transferred-priority metric.

Controls, the same in every arm: the learner pinned to CPU 0, the buffer
node and actors to the rest (run_local.py --pin_cpus); greedy evaluation
offline, from parameter snapshots taken every 2 s (tools/experiment/evaluate_snapshots,
100 episodes each), so evaluation never competes with training; every
window is the same wall-clock window; the arms' order is shuffled per seed;
the seeds are paired (seed k gives every arm the same initial network,
actors and environments); the bytes in flight on the long link are sized
alike (about 150 kB on the WAN).

Outputs under --out:
  runs/<regime>/<arm>-seed<k>/   run_local's logs, metrics.jsonl, snap/
                                 (snapshots) and evals.jsonl
  summary.json, summary.md       the figures (shape: see experiment_report.py)
  return_vs_time.png, return_vs_bytes.png, survival.png, regime_map.png

Usage:
  tools/experiment/experiment.sh          # the default set (81 runs, about 66 min on 2 cores)
  tools/experiment/experiment.sh --quick  # a smoke run (about 2 min)
  tools/experiment/experiment.sh --full   # 10 seeds everywhere, 90 s runs (170 runs, about 4.5 h)
  tools/experiment/experiment.py --summarize_only --out DIR   # re-summarize finished runs
  tools/experiment/experiment.py --quick --env MinAtar/Breakout [--observation pixels84]

The environment is CartPole-v1 unless --env names another (MinAtar's, e.g.);
time-to-solve figures use CartPole-v1's threshold, which MinAtar runs never
reach: for them the return curves and areas are the figures.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import time

# experiment_stats reads the metrics with tools/launch/metrics_lines.py.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "launch"))
import experiment_report  # noqa: E402
import experiment_stats  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ARMS = {
    "learner-in_order": {"replay_placement": "learner", "forward_policy": "in_order"},
    "learner-freshest": {"replay_placement": "learner", "forward_policy": "freshest"},
    "buffer": {"replay_placement": "buffer", "learner_cache": False},
    "buffer-cache": {"replay_placement": "buffer", "learner_cache": True},
}
ARM_TITLES = {
    "learner-in_order": "learner placement, in order",
    "learner-freshest": "learner placement, freshest",
    "buffer": "buffer placement",
    "buffer-cache": "buffer placement + transfer-once cache",
}

# Every regime's numbers. delay_us is one way; gbps the link's bandwidth;
# the generation rate G is actors x actor_rate transitions/s (each env step
# makes one n-step transition); the transition size s is the slot size for
# the padded payload (actor --print_layout). The READ depth of each arm is
# sized so that about the same bytes are in flight on the long link.
REGIMES = {
    "fibre-spi8": {
        "title": "10 km fibre, 25 Gb/s, SPI 8 (link not binding)",
        "link": "10km-25g", "delay_us": 50, "gbps": 25.0,
        "actors": 4, "envs_per_actor": 2, "actor_rate": 500, "payload_pad_bytes": 0,
        "samples_per_insert": 8.0, "alpha": 0.6,
        "forward": (256, 8, 16384), "staging_depth": 8, "batch_depth": 0,
    },
    "wan-spi8": {
        "title": "1000 km WAN, 8 Mb/s, 1 KiB transitions, SPI 8 (link-bound, DQN-like)",
        "link": "5000:0.008", "delay_us": 5000, "gbps": 0.008,
        "actors": 4, "envs_per_actor": 2, "actor_rate": 500, "payload_pad_bytes": 1024,
        "samples_per_insert": 8.0, "alpha": 0.6,
        "forward": (32, 4, 2048), "staging_depth": 8, "batch_depth": 2,
    },
    "wan-spi0.5": {
        "title": "1000 km WAN, 4.8 Mb/s, 16 k transitions/s, SPI 0.5 (link-bound, Ape-X-like)",
        "link": "5000:0.0048", "delay_us": 5000, "gbps": 0.0048,
        "actors": 4, "envs_per_actor": 4, "actor_rate": 4000, "payload_pad_bytes": 0,
        "samples_per_insert": 0.5, "alpha": 0.6,
        "forward": (256, 4, 8192), "staging_depth": 16, "batch_depth": 16,
    },
}
# The alpha = 0 controls of the transferred-priority metric (how much of its
# ratio is the sampling rule): "<regime>-alpha0" is <regime> with uniform
# sampling at the buffer node, run for the buffer placement's two arms (the learner
# placement's transfers do not depend on the buffer node's alpha).
CONTROL_SUFFIX = "-alpha0"
CONTROL_ARMS = ("buffer", "buffer-cache")
PRIMARY = "wan-spi0.5"
# The equal-train-steps control of the primary regime: each placement's rate
# limiter counts what enters its own replay memory, so on a link-bound
# regime the learner placement (counting arrivals) trains fewer steps than
# the buffer placement (counting generation). Here the learner placement runs at the
# replay ratio that gives it the buffer placement's train steps per second (its
# arrivals x EQUAL_STEPS_SPI = the buffer placement's achieved samples/s).
EQUAL_STEPS_SUFFIX = "-equal-steps"
EQUAL_STEPS_SPI = 0.9
# The paper's regime (its fibre) and the primary one: where the paper's two
# metrics are reported beside their alpha = 0 controls.
PAPER_REGIMES = ("fibre-spi8", PRIMARY)

# (regime, arms, seeds) per set, and the run length.
SETS = {
    "default": {"duration_s": 45, "plan": [
        ("fibre-spi8", list(ARMS), 3), ("wan-spi8", list(ARMS), 3),
        (PRIMARY, list(ARMS), 10), (PRIMARY + CONTROL_SUFFIX, list(CONTROL_ARMS), 3),
        ("fibre-spi8" + CONTROL_SUFFIX, list(CONTROL_ARMS), 3),
        (PRIMARY + EQUAL_STEPS_SUFFIX, ["learner-freshest"], 5)]},
    "quick": {"duration_s": 6, "plan": [
        ("wan-spi8", list(ARMS), 1), (PRIMARY, list(ARMS), 1),
        (PRIMARY + CONTROL_SUFFIX, list(CONTROL_ARMS), 1)]},
    "full": {"duration_s": 90, "plan": [
        ("fibre-spi8", list(ARMS), 10), ("wan-spi8", list(ARMS), 10),
        (PRIMARY, list(ARMS), 10), (PRIMARY + CONTROL_SUFFIX, list(CONTROL_ARMS), 10),
        ("fibre-spi8" + CONTROL_SUFFIX, list(CONTROL_ARMS), 10),
        (PRIMARY + EQUAL_STEPS_SUFFIX, ["learner-freshest"], 10)]},
}
SOLVE_RETURN = 475.0
SNAPSHOT_INTERVAL_S = 2.0
EVAL_EPISODES = 100


def log(msg):
    print("experiment: " + msg, file=sys.stderr, flush=True)


def regime(name):
    if name.endswith(EQUAL_STEPS_SUFFIX):
        base = name[:-len(EQUAL_STEPS_SUFFIX)]
        r = dict(REGIMES[base])
        r["title"] = REGIMES[base]["title"] + (
            ", learner placement at SPI %g: the buffer placement's train steps (control)" %
            EQUAL_STEPS_SPI)
        r["samples_per_insert"] = EQUAL_STEPS_SPI
        return r
    if name.endswith(CONTROL_SUFFIX):
        base = name[:-len(CONTROL_SUFFIX)]
        r = dict(REGIMES[base])
        r["title"] = REGIMES[base]["title"] + ", alpha = 0 (control)"
        r["alpha"] = 0.0
        return r
    return REGIMES[name]


def default_bin_dir():
    opt = os.path.join(ROOT, "bazel-out", "k8-opt", "bin")
    return opt if os.path.isdir(opt) else os.path.join(ROOT, "bazel-bin")


BIN_DIR = [default_bin_dir()]  # --bin_dir
# The environment of every run (--env, --observation).
ENV = {"env": "CartPole-v1", "observation": "native"}


def bin_dir():
    return BIN_DIR[0]


def slot_bytes(r):
    """The slot size of a regime's transitions, from `actor --print_layout`."""
    out = subprocess.run([os.path.join(bin_dir(), "actor_client", "actor"), "--print_layout",
                          "--payload_pad_bytes=%d" % r["payload_pad_bytes"]],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True)
    return json.loads(out.stdout.decode())["slot_size"]


def pin_cpus():
    n = os.cpu_count() or 1
    return "0:1-%d" % (n - 1) if n > 2 else ("0:1" if n == 2 else "")


def run_argv(r, arm, seed, duration_s, run_dir):
    a = ARMS[arm]
    chunk_slots, chunks, window = r["forward"]
    argv = [
        sys.executable, os.path.join(ROOT, "tools", "launch", "run_local.py"),
        "--env", ENV["env"], "--observation", ENV["observation"],
        "--replay_placement", a["replay_placement"], "--link", r["link"], "--seed", str(seed),
        "--actors", str(r["actors"]), "--envs_per_actor", str(r["envs_per_actor"]),
        "--actor_rate", str(r["actor_rate"]), "--payload_pad_bytes", str(r["payload_pad_bytes"]),
        "--samples_per_insert", repr(r["samples_per_insert"]), "--alpha", repr(r["alpha"]),
        "--staging_depth", str(r["staging_depth"]),
        "--duration_s", repr(float(duration_s)), "--eval_interval_s", "0",
        "--progress_interval_s", "2.5",
        "--metrics_out", os.path.join(run_dir, "metrics.jsonl"), "--out_dir", run_dir,
        "--bin_dir", bin_dir(),
        "--learner_flag=--snapshot_dir=" + os.path.join(run_dir, "snap"),
        "--learner_flag=--snapshot_interval_s=%r" % SNAPSHOT_INTERVAL_S,
    ]
    if pin_cpus():
        argv += ["--pin_cpus", pin_cpus()]
    if a["replay_placement"] == "learner":
        argv += ["--forward_policy", a["forward_policy"],
                 "--learner_flag=--forward_chunk_slots=%d" % chunk_slots,
                 "--learner_flag=--forward_chunks_in_flight=%d" % chunks,
                 "--learner_flag=--forward_window=%d" % window]
    else:
        argv.append("--learner_flag=--batch_depth=%d" % r["batch_depth"])
        # Explicit either way: run_local.py's default is the cache.
        argv.append("--learner_cache" if a["learner_cache"] else "--nolearner_cache")
    return argv


def evaluate(run_dir):
    argv = [os.path.join(bin_dir(), "tools", "experiment", "evaluate_snapshots"),
            "--snapshot_dir=" + os.path.join(run_dir, "snap"),
            "--episodes=%d" % EVAL_EPISODES, "--out=" + os.path.join(run_dir, "evals.jsonl"),
            "--env=" + ENV["env"], "--observation=" + ENV["observation"]]
    if subprocess.call(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) != 0:
        raise RuntimeError("evaluation failed: " + " ".join(argv))


def complete(run_dir):
    metrics = os.path.join(run_dir, "metrics.jsonl")
    evals = os.path.join(run_dir, "evals.jsonl")
    return (os.path.exists(metrics) and os.path.exists(evals)
            and experiment_stats.read_jsonl(evals)
            and any(r.get("type") == "summary" for r in experiment_stats.read_jsonl(metrics)))


def schedule(plan, order_seed):
    """[(regime, arm, seed)]: regime by regime, seed by seed, the arms of
    each (regime, seed) in an order drawn for it."""
    runs = []
    for name, arms, seeds in plan:
        for seed in range(1, seeds + 1):
            order = list(arms)
            random.Random("%d/%s/%d" % (order_seed, name, seed)).shuffle(order)
            runs += [(name, arm, seed) for arm in order]
    return runs


def run_all(args, plan, duration_s):
    runs = schedule(plan, args.order_seed)
    started = time.monotonic()
    for i, (name, arm, seed) in enumerate(runs):
        run_dir = os.path.join(args.out, "runs", name, "%s-seed%d" % (arm, seed))
        if args.resume and complete(run_dir):
            log("[%d/%d] reusing %s" % (i + 1, len(runs), run_dir))
            continue
        os.makedirs(run_dir, exist_ok=True)
        argv = run_argv(regime(name), arm, seed, duration_s, run_dir)
        elapsed = time.monotonic() - started
        log("[%d/%d] %s %s seed %d (%.0f min elapsed)" % (i + 1, len(runs), name, arm, seed,
                                                         elapsed / 60))
        with open(os.path.join(run_dir, "run_local.log"), "w") as out:
            rc = subprocess.call(argv, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
        if rc != 0:
            raise RuntimeError("run failed (exit %d); see %s" % (rc, run_dir))
        evaluate(run_dir)


def summarize(args, plan, duration_s):
    regimes = []
    auc_by_seed = {}
    for name, arms, _ in plan:
        r = regime(name)
        s = slot_bytes(r)
        figures = {}
        for arm in arms:
            base = os.path.join(args.out, "runs", name)
            by_seed = {}
            for entry in sorted(os.listdir(base)) if os.path.isdir(base) else []:
                prefix = arm + "-seed"
                if entry.startswith(prefix) and complete(os.path.join(base, entry)):
                    by_seed[int(entry[len(prefix):])] = experiment_stats.run_figures(
                        os.path.join(base, entry), duration_s, SOLVE_RETURN, s)
            figures[arm] = by_seed
            auc_by_seed[(name, arm)] = {seed: f["auc"] for seed, f in by_seed.items()}
        regimes.append(experiment_report.regime_summary(name, r, s, figures, duration_s))
    if not any(by_seed for by_seed in auc_by_seed.values()):
        raise RuntimeError("no complete run under %s" % os.path.join(args.out, "runs"))
    return experiment_report.assemble(regimes, PRIMARY, PAPER_REGIMES, CONTROL_SUFFIX,
                                      EQUAL_STEPS_SUFFIX, duration_s, auc_by_seed)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.path.join(ROOT, "out", "experiment"),
                   help="output directory (default out/experiment)")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--quick", action="store_true", help="the smoke set (about 2 min)")
    group.add_argument("--full", action="store_true", help="the full set (170 runs, about 4.5 h)")
    p.add_argument("--order_seed", type=int, default=1,
                   help="seed of the arms' run order (default 1)")
    p.add_argument("--resume", action="store_true", help="keep the runs already complete")
    p.add_argument("--summarize_only", action="store_true",
                   help="only summarize the runs under --out")
    p.add_argument("--report_only", action="store_true",
                   help="only redraw summary.md and the plots from --out's summary.json "
                   "(which holds every figure and curve; the raw runs are not needed)")
    p.add_argument("--bin_dir", default=os.environ.get("DREPLAY_BIN_DIR", ""),
                   help="where the built binaries are (default: bazel-out/k8-opt/bin, else "
                   "bazel-bin)")
    p.add_argument("--env", default="CartPole-v1", help="the environment (default CartPole-v1)")
    p.add_argument("--observation", choices=("native", "pixels84"), default="native",
                   help="pixels84: MinAtar only")
    args = p.parse_args(argv)
    if args.bin_dir:
        BIN_DIR[0] = args.bin_dir
    ENV.update(env=args.env, observation=args.observation)
    chosen = SETS["quick" if args.quick else "full" if args.full else "default"]
    plan, duration_s = chosen["plan"], chosen["duration_s"]
    os.makedirs(args.out, exist_ok=True)
    if args.report_only:
        try:
            with open(os.path.join(args.out, "summary.json")) as f:
                summary = json.load(f)
        except (OSError, ValueError) as e:
            log("error: cannot read the summary: %s" % e)
            return 1
        experiment_report.write(args.out, summary, ARM_TITLES)
        log("redrew %s" % ", ".join(os.path.join(args.out, f) for f in experiment_report.OUTPUTS))
        return 0
    try:
        if not args.summarize_only:
            run_all(args, plan, duration_s)
        summary = summarize(args, plan, duration_s)
    except (RuntimeError, subprocess.CalledProcessError, OSError) as e:
        log("error: %s" % e)
        return 1
    experiment_report.write(args.out, summary, ARM_TITLES)
    log("wrote %s" % ", ".join(os.path.join(args.out, f) for f in experiment_report.OUTPUTS))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
