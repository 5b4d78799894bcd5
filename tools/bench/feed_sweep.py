#!/usr/bin/env python3
"""Throughput without learning, across link speeds: where must the replay
memory live to feed a pixels learner?

    bazel build -c opt //tools/bench:frame_feed_bench
    tools/bench/feed_sweep.py                        # 4 links x 3 rounds, ~15 min
    tools/bench/feed_sweep.py --links 50:1,50:0.04 --rounds 1 --json

Runs tools/bench/frame_feed_bench once per link and round, every arm side
by side in each run: one actor replays a recorded MinAtar pixels84 trace
(frames stored once), a learner emulator consumes up to C transitions a
second at --samples_per_insert, across the emulated link. The system is
the full-size one scaled down to 2 cores: C = 6,800/s is 1/25 of the
170 k/s of an H200 double DQN at batch 512, so every link is scaled by
1/25 too, which keeps rho and kappa (the default links stand for 25 GbE,
1 Gb/s, 100 Mb/s and 25 Mb/s, each with 10 km of fibre; the emulator's
slowest link is 1 Mb/s).

rho = G s / B and kappa = C s / B, with G = C / samples_per_insert and s the
raw stacked s and s' (56,448 bytes): the link's load if every generated,
or every consumed, transition crossed as raw stacks.

Per link and arm, as the median and the range over the rounds: the
learner's utilisation (fraction of C consumed), distinct transitions
crossing a second, link bytes per sampled transition down (experience,
metadata, polling) and up (priorities, parameters), and the mean
percentile of what crossed within the buffer node's priority
distribution (not measured in the learner placement, which stages
nothing). Exit
status: 0 done, 1 a run failed, 2 a bad argument.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RAW_STACKED_BYTES = 2 * 4 * 84 * 84
DEFAULT_ARMS = ("frames+zstd:3,hybrid/frames+zstd:3,hybrid-uniform/frames+zstd:3,"
                "hybrid-fifo/frames+zstd:3,learner/frames")
# 25 GbE, 1 Gb/s, 100 Mb/s and 25 Mb/s, scaled by 1/25 with C.
DEFAULT_LINKS = "50:1,50:0.04,50:0.004,50:0.001"
FULL_SIZE = {"50:1": "25 GbE", "50:0.04": "1 Gb/s", "50:0.004": "100 Mb/s",
             "50:0.001": "25 Mb/s"}


def log(msg):
    print("feed_sweep: " + msg, file=sys.stderr, flush=True)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--binary", default=os.path.join(ROOT, "bazel-bin/tools/bench/frame_feed_bench"),
                   help="the frame_feed_bench binary")
    p.add_argument("--links", default=DEFAULT_LINKS,
                   help="emulated links, DELAY_US:GBPS, comma-separated")
    p.add_argument("--arms", default=DEFAULT_ARMS, help="frame_feed_bench --arms")
    p.add_argument("--rounds", type=int, default=3, help="runs per link (>= 1)")
    p.add_argument("--consume_rate", type=float, default=6800, help="C, transitions a second")
    p.add_argument("--samples_per_insert", type=float, default=8)
    p.add_argument("--window_s", type=float, default=8)
    p.add_argument("--extra", default="",
                   help="more frame_feed_bench flags, space-separated (sizes for a smoke run)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error("--rounds must be >= 1")
    if not os.path.exists(args.binary):
        p.error("--binary %s does not exist: bazel build -c opt //tools/bench:frame_feed_bench"
                % args.binary)
    links = [l for l in args.links.split(",") if l]
    for link in links:
        try:
            delay, gbps = link.split(":")
            if float(delay) < 0 or float(gbps) < 0.001:
                raise ValueError
        except ValueError:
            p.error("--links: %r is not DELAY_US:GBPS with GBPS >= 0.001" % link)
    args.link_list = links
    return args


def run_bench(args, link):
    cmd = [args.binary, "--json", "--arms=" + args.arms, "--link=" + link,
           "--consume_rate=%g" % args.consume_rate,
           "--samples_per_insert=%g" % args.samples_per_insert,
           "--window_s=%g" % args.window_s] + args.extra.split()
    run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if run.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), run.returncode,
                                                    run.stderr[-2000:]))
    return json.loads(run.stdout)


def arm_figures(a):
    """The figures of one arm of one run (None values for a stalled arm)."""
    if a.get("stalled"):
        return {"utilisation": 0.0, "distinct_per_s": 0.0, "down_per_sample": None,
                "up_per_sample": None, "experience_per_sample": None, "left_out_per_s": None,
                "crossing_percentile": None}
    consumed = a["consumed"]
    return {
        "utilisation": a["fraction_of_rate"],
        "distinct_per_s": a["distinct_fetched_per_s"],
        "down_per_sample": a["link_bytes_down"] / consumed,
        "up_per_sample": a["link_bytes_up"] / consumed,
        "experience_per_sample": a["link_bytes_experience"] / consumed,
        "left_out_per_s": a["left_out"] / a["seconds"],
        "crossing_percentile": (a["crossing_percentile"] if a["crossing_percentile"] >= 0
                                else None),
    }


def summarise(values):
    present = [v for v in values if v is not None]
    if not present:
        return None
    return {"median": statistics.median(present), "min": min(present), "max": max(present),
            "n": len(present)}


def regime(args, link):
    gbps = float(link.split(":")[1])
    g = args.consume_rate / args.samples_per_insert
    return {"rho": g * RAW_STACKED_BYTES * 8 / (gbps * 1e9),
            "kappa": args.consume_rate * RAW_STACKED_BYTES * 8 / (gbps * 1e9)}


def fmt(s, scale=1.0, digits=0):
    if s is None:
        return "-"
    if s["min"] == s["max"]:
        return "%.*f" % (digits, s["median"] * scale)
    return "%.*f [%.*f, %.*f]" % (digits, s["median"] * scale, digits, s["min"] * scale,
                                   digits, s["max"] * scale)


def main(argv):
    args = parse_args(argv)
    runs = {}  # link -> [report]
    for r in range(args.rounds):
        for link in args.link_list:  # links interleaved within each round
            log("round %d of %d, link %s" % (r + 1, args.rounds, link))
            try:
                runs.setdefault(link, []).append(run_bench(args, link))
            except (RuntimeError, ValueError) as e:
                log(str(e))
                return 1
    table = []
    for link in args.link_list:
        arms = [a["arm"] for a in runs[link][0]["arms"]]
        for arm in arms:
            per_run = [arm_figures(next(a for a in rep["arms"] if a["arm"] == arm))
                       for rep in runs[link]]
            row = {"link": link, "full_size_link": FULL_SIZE.get(link, ""), "arm": arm}
            row.update(regime(args, link))
            for key in per_run[0]:
                row[key] = summarise([f[key] for f in per_run])
            table.append(row)
    if args.json:
        print(json.dumps({"consume_rate": args.consume_rate,
                          "samples_per_insert": args.samples_per_insert,
                          "rounds": args.rounds, "window_s": args.window_s,
                          "arms": args.arms, "rows": table, "runs": runs}))
        return 0
    print("C %.0f/s at %g samples per insert, %d rounds, %g s windows; median [range]"
          % (args.consume_rate, args.samples_per_insert, args.rounds, args.window_s))
    print("%-10s %-9s %6s %7s  %-28s %-20s %-18s %-18s %-14s %-12s %s"
          % ("link", "(full)", "rho", "kappa", "arm", "utilisation", "distinct/s",
             "down B/sample", "up B/sample", "left out/s", "crossing pct"))
    for row in table:
        print("%-10s %-9s %6.2f %7.1f  %-28s %-20s %-18s %-18s %-14s %-12s %s"
              % (row["link"], row["full_size_link"], row["rho"], row["kappa"], row["arm"],
                 fmt(row["utilisation"], digits=2), fmt(row["distinct_per_s"]),
                 fmt(row["down_per_sample"]), fmt(row["up_per_sample"], digits=1),
                 fmt(row["left_out_per_s"]), fmt(row["crossing_percentile"], digits=1)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
