#!/usr/bin/env python3
"""The soft provider's TCP path against its targets, side by side in one run.

    bazel build -c opt //tools/bench:verbs_bench //tools/bench:replay_bench
    sudo tools/bench/tcp_path_table.py                 # across namespaces, 3 rounds, ~5 min
    tools/bench/tcp_path_table.py --mode loopback --rounds 1 --json

The cases of the TCP path's targets (docs/benchmarks.md, "The TCP path's
table"), each round running every case once, in turn, so that the rounds
interleave and a noisy moment touches every case alike:

  read32k   32 KiB READ, depth 16, 10km-25g: the share of min(link, a TCP
            stream of the same message size on the same path)
  read1k    1 KiB READ, depth 16, 10km-25g: the share of the credit ceiling,
            depth / round trip = 16 / 100 us = 160 k ops/s
  write64   64 B WRITE, batches of 32, depth 256: M ops/s
  write28k  28 KiB WRITE, depth 16: the share of that TCP stream
  sampling  replay_bench's learner sampling over 10km-25g, 4 actors
            inserting: the share of the same run with no link, against the
            same server
  sampling_alone  the same with no actors (the learner alone on the
            prefilled memory), whose rate varies less between runs

The cases over a link (read32k, read1k, sampling) run once per
--releases mode, side by side in each round: --soft_link_release, who
holds each frame for its modelled arrival (auto: the sender, and the
receiver one that comes early; receiver: the receiver alone; sender: the
sender alone, as between hosts).

--mode netns runs verbs_bench (and replay_bench --server / --connect) in
two network namespaces over a veth pair and a bridge
(tools/launch/netns_cluster.sh --bench_only: root, iproute2), where no
same-host mapping is possible, as between hosts; --mode loopback runs each
in one process over loopback with --soft_transport=tcp. The verbs cases
also report the host's busy CPU per byte moved (nanoseconds), for the soft
provider and for the TCP stream.

Per case: every round's figure, the median and the range, and whether the
median meets the target. Exit status: 0 done (targets met or not), 1 a run
failed, 2 a bad argument.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LINK = "10km-25g"
LINK_ONE_WAY_S = 50e-6  # verbs/options.cc, the 10km-25g preset
DEPTH = 16

# name: (description, verbs_bench flags, target, unit)
VERBS_CASES = {
    "read32k": ("32 KiB READ, depth 16, " + LINK,
                ["--op=read", "--size=32768", "--depth=16", "--link=" + LINK, "--baseline=tcp"],
                0.9, "of min(link, TCP stream)"),
    "read1k": ("1 KiB READ, depth 16, " + LINK,
               ["--op=read", "--size=1024", "--depth=16", "--link=" + LINK],
               0.8, "of the 16-credit ceiling"),
    "write64": ("64 B WRITE, batches of 32, depth 256",
                ["--op=write", "--size=64", "--batch=32", "--depth=256", "--baseline=tcp"],
                2.0, "M ops/s"),
    "write28k": ("28 KiB WRITE, depth 16",
                 ["--op=write", "--size=28672", "--depth=16", "--baseline=tcp"],
                 0.9, "of the TCP stream"),
}
# name: (description, replay_bench flags, target, unit)
SAMPLING_CASES = {
    "sampling": ("replay_bench sampling, 4 actors, " + LINK + " against no link", [],
                 0.9, "of no link"),
    "sampling_alone": ("replay_bench sampling, no actors, " + LINK + " against no link",
                       ["--actors=0"], 0.9, "of no link"),
}
ALL_CASES = tuple(VERBS_CASES) + tuple(SAMPLING_CASES)
LINK_CASES = ("read32k", "read1k") + tuple(SAMPLING_CASES)
RELEASES = ("auto", "receiver", "sender")


def log(msg):
    print("tcp_path_table: " + msg, file=sys.stderr, flush=True)


def default_bin_dir():
    opt = os.path.join(ROOT, "bazel-out/k8-opt/bin")
    return opt if os.path.isdir(opt) else os.path.join(ROOT, "bazel-bin")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=("auto", "netns", "loopback"), default="auto",
                   help="where the benchmarks' two ends run (auto: netns when root and "
                   "'ip netns' work, else loopback)")
    p.add_argument("--rounds", type=int, default=3, help="rounds of every case (default 3)")
    p.add_argument("--duration_s", type=float, default=3, help="measured seconds per run (default 3)")
    p.add_argument("--warmup_s", type=float, default=0.5, help="seconds run before measuring (default 0.5)")
    p.add_argument("--cases", default=",".join(ALL_CASES),
                   help="comma-separated, of: " + ", ".join(ALL_CASES))
    p.add_argument("--releases", default="auto",
                   help="comma-separated --soft_link_release modes of the cases over a link, "
                   "of: " + ", ".join(RELEASES) + " (default auto)")
    p.add_argument("--bin_dir", default=default_bin_dir(),
                   help="built binaries (tools/bench/verbs_bench, tools/bench/replay_bench)")
    p.add_argument("--out_dir", default="", help="keep every run's output here (default: a "
                   "temporary directory, removed)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    if not 0 < args.duration_s <= 600:
        p.error("--duration_s must be in (0, 600]")
    if not 0 <= args.warmup_s <= 60:
        p.error("--warmup_s must be in [0, 60]")
    args.cases = [c for c in args.cases.split(",") if c]
    unknown = [c for c in args.cases if c not in ALL_CASES]
    if unknown or not args.cases:
        p.error("--cases: unknown %s (known: %s)" % (",".join(unknown) or "(none)",
                                                    ", ".join(ALL_CASES)))
    args.releases = [r for r in args.releases.split(",") if r]
    if not args.releases or any(r not in RELEASES for r in args.releases):
        p.error("--releases: expected some of %s" % ", ".join(RELEASES))
    for name in ("verbs_bench", "replay_bench"):
        path = os.path.join(args.bin_dir, "tools/bench", name)
        if not os.access(path, os.X_OK):
            p.error("%s not found: bazel build -c opt //tools/bench:%s, or give --bin_dir" %
                    (path, name))
    return args


def netns_usable():
    if os.geteuid() != 0:
        return False
    try:
        return subprocess.run(["ip", "netns", "list"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def run_json(argv, timeout_s, label):
    """Runs argv, returns its stdout's JSON; None (logged) when it fails."""
    try:
        run = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             timeout=timeout_s)
    except subprocess.TimeoutExpired:
        log("%s: no answer within %d s" % (label, timeout_s))
        return None
    if run.returncode != 0:
        log("%s: exit %d:\n%s" % (label, run.returncode, run.stderr[-2000:]))
        return None
    try:
        return json.loads(run.stdout)
    except ValueError:
        log("%s: output is not JSON: %r" % (label, run.stdout[-500:]))
        return None


def run_netns(args, tool, flags, case_dir, label, timeout_s):
    """One netns_cluster.sh --bench_only run of `tool`; its bench.json or None."""
    argv = [os.path.join(ROOT, "tools/launch/netns_cluster.sh"), "--bench_only",
            "--bench_tool", tool, "--bin_dir", args.bin_dir, "--out_dir", case_dir]
    for f in flags:
        argv += ["--bench_flag", f]
    try:
        run = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True, timeout=timeout_s + 30)
    except subprocess.TimeoutExpired:
        log("%s: netns_cluster.sh did not end" % label)
        return None
    if run.returncode != 0:
        log("%s: netns_cluster.sh exit %d:\n%s" % (label, run.returncode, run.stderr[-2000:]))
        return None
    with open(os.path.join(case_dir, "bench.json")) as f:
        return json.load(f)


def run_verbs_case(args, name, release, out_dir, round_index):
    flags = VERBS_CASES[name][1] + ["--duration_s=%g" % args.duration_s,
                                    "--warmup_s=%g" % args.warmup_s]
    if release:
        flags.append("--soft_link_release=" + release)
    timeout_s = int(2 * (args.duration_s + args.warmup_s)) + 60
    tag = name + ("-" + release if release else "")
    label = "%s round %d" % (tag, round_index + 1)
    if args.mode == "netns":
        case_dir = os.path.join(out_dir, "%s-%d" % (tag, round_index + 1))
        return run_netns(args, "verbs_bench", flags, case_dir, label, timeout_s)
    argv = [os.path.join(args.bin_dir, "tools/bench/verbs_bench"), "--json",
            "--soft_transport=tcp"] + flags
    return run_json(argv, timeout_s, label)


def verbs_figure(name, report):
    if name == "read32k":
        return report["ratio_vs_min_link_tcp"]
    if name == "read1k":
        ceiling = DEPTH / (2 * LINK_ONE_WAY_S)
        return report["ops_per_s"] / ceiling
    if name == "write64":
        return report["ops_per_s"] / 1e6
    return report["ratio_vs_tcp"]


def run_sampling(args, name, release, out_dir, round_index):
    """One round of a sampling case: replay_bench over the link, then with
    no link against the same server; its run record or None."""
    flags = SAMPLING_CASES[name][1] + [
        "--soft_link_release=" + release, "--link=" + LINK, "--baseline=nolink",
        "--rounds=1", "--duration_s=%g" % args.duration_s,
        "--warmup_s=%g" % max(args.warmup_s, 0.5)]
    timeout_s = int(2 * (args.duration_s + args.warmup_s + 5)) + 120
    label = "%s-%s round %d" % (name, release, round_index + 1)
    if args.mode == "netns":
        case_dir = os.path.join(out_dir, "%s-%s-%d" % (name, release, round_index + 1))
        report = run_netns(args, "replay_bench", flags, case_dir, label, timeout_s)
    else:
        argv = [os.path.join(args.bin_dir, "tools/bench/replay_bench"), "--json",
                "--soft_transport=tcp"] + flags
        report = run_json(argv, timeout_s, label)
    if report is None:
        return None
    r = report["per_round"][0]
    return {"figure": r["sampled_per_s"] / r["nolink_sampled_per_s"],
            "sampled_per_s": r["sampled_per_s"],
            "nolink_sampled_per_s": r["nolink_sampled_per_s"]}


def summarise(name, release, description, target, unit, runs):
    figures = [r["figure"] for r in runs]
    median = statistics.median(figures)
    if release:
        description += " (release: %s)" % release
    return {"case": name, "release": release, "description": description, "unit": unit,
            "target": target,
            "figures": [round(x, 4) for x in figures], "median": round(median, 4),
            "min": round(min(figures), 4), "max": round(max(figures), 4),
            "met": median >= target, "runs": runs}


def verbs_run_record(name, report):
    record = {"figure": verbs_figure(name, report), "ops_per_s": report["ops_per_s"],
              "gbps": report["gbps"], "cpu_ns_per_byte": report.get("cpu_ns_per_byte")}
    if "tcp" in report:
        record["tcp_gbps"] = report["tcp"]["gbps"]
        record["tcp_cpu_ns_per_byte"] = report["tcp"].get("cpu_ns_per_byte")
    return record


def measure(args, out_dir):
    # (case, release): release is None for a case with no link.
    arms = [(c, r if c in LINK_CASES else None)
            for c in args.cases
            for r in (args.releases if c in LINK_CASES else [None])]
    runs = {arm: [] for arm in arms}
    for i in range(args.rounds):
        for arm in arms:
            name, release = arm
            if name in SAMPLING_CASES:
                record = run_sampling(args, name, release, out_dir, i)
                unit = SAMPLING_CASES[name][3]
            else:
                report = run_verbs_case(args, name, release, out_dir, i)
                record = None if report is None else verbs_run_record(name, report)
                unit = VERBS_CASES[name][3]
            if record is None:
                return None
            runs[arm].append(record)
            log("round %d/%d %s%s: %.3f %s" % (i + 1, args.rounds, name,
                                              " " + release if release else "",
                                              record["figure"], unit))
    rows = []
    for arm in arms:
        name, release = arm
        description, _, target, unit = (SAMPLING_CASES.get(name) or VERBS_CASES[name])
        rows.append(summarise(name, release, description, target, unit, runs[arm]))
    return rows


def print_table(report):
    print("mode %s, %d rounds of %g s, %d CPUs" % (report["mode"], report["rounds"],
                                                   report["duration_s"], report["cpus"]))
    print("| case | median [min, max] | target | met | CPU ns/byte soft / stream |")
    print("| --- | --- | --- | --- | --- |")
    for row in report["cases"]:
        cpu = ", ".join("%.2f / %.2f" % (r["cpu_ns_per_byte"], r["tcp_cpu_ns_per_byte"])
                        for r in row["runs"]
                        if r.get("cpu_ns_per_byte") and r.get("tcp_cpu_ns_per_byte"))
        print("| %s | %.3f [%.3f, %.3f] %s | >= %g | %s | %s |" %
              (row["description"], row["median"], row["min"], row["max"], row["unit"],
               row["target"], "yes" if row["met"] else "no", cpu or "-"))


def main(argv):
    args = parse_args(argv)
    if args.mode == "auto":
        args.mode = "netns" if netns_usable() else "loopback"
    elif args.mode == "netns" and not netns_usable():
        log("--mode netns needs root and a working 'ip netns'")
        return 2
    log("mode %s, cases %s, %d rounds of %g s" % (args.mode, ",".join(args.cases), args.rounds,
                                                  args.duration_s))
    if args.out_dir:
        os.makedirs(args.out_dir, exist_ok=True)
        rows = measure(args, args.out_dir)
    else:
        with tempfile.TemporaryDirectory(prefix="tcp_path_table-") as tmp:
            rows = measure(args, tmp)
    if rows is None:
        return 1
    report = {"mode": args.mode, "rounds": args.rounds, "duration_s": args.duration_s,
              "cpus": os.cpu_count(), "link": LINK, "cases": rows}
    if args.json:
        print(json.dumps(report))
    else:
        print_table(report)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
