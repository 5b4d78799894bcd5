#!/usr/bin/env python3
"""Checks that a multi-host run's counters add up, from its output directory.
Used by tools/launch/netns_cluster.sh and tools/launch/slurm/dreplay.sbatch once the
learner has ended and the actors have been stopped (the server still runs).

  cluster_counters.py --out_dir DIR --actors N [--metrics_url URL]
  cluster_counters.py --out_dir DIR --actors N --sites K --site S [--metrics_url URL]

With edge sites (--sites K > 1), site S is checked alone: its actors are
those with index i mod K == S, its server's text is server-S_metrics.prom
and the figures go to counters-site-S.txt.

Reads, in DIR:
  actor-<i>.log     each actor's last line: "actor I: ... N transitions
                    committed (M abandoned) ..." (actor_client/actor_run.cc);
  metrics.jsonl     the learner's summary record (learner_client/metrics.h);
  server_metrics.prom  the server's Prometheus text; with --metrics_url it is
                    fetched (GET) first, again until ingest has caught up
                    with what the actors committed or --ingest_wait_s passed.

Checks: the learner took train steps and read batches; the actors committed
transitions; every committed transition was inserted by the server or
dropped as overrun or torn (the causes of replay_server/prometheus_metrics.cc
that follow a commit; "abandoned" slots were never committed); the learner's
priority updates reached the server (batches released, updates applied).

Writes DIR/counters.txt (KEY=VALUE lines, also printed) and exits 0 when
every check holds, 1 otherwise (the failed checks on stderr), 2 when an input
is missing or unreadable. Only the Python standard library is used.
"""

import argparse
import json
import os
import re
import sys
import time
import urllib.request

ACTOR_FINAL = re.compile(r"actor (\d+): \d+ env steps, \d+ episodes, (\d+) transitions committed")
PROM_FILE = "server_metrics.prom"
SAMPLES = {
    "server_inserted": "dreplay_server_inserted_total",
    "server_dropped_overrun": 'dreplay_server_dropped_total{cause="overrun"}',
    "server_dropped_torn": 'dreplay_server_dropped_total{cause="torn"}',
    "server_batches_released": "dreplay_server_batches_released_total",
    "server_priority_updates_applied": 'dreplay_server_priority_updates_total{result="applied"}',
    "server_actors_accepted": 'dreplay_server_connections_accepted_total{role="actor"}',
    "server_learners_accepted": 'dreplay_server_connections_accepted_total{role="learner"}',
}


class InputError(Exception):
    pass


def actors_committed(out_dir, indices):
    """The transitions each actor of `indices` says it committed, from its
    last line."""
    committed = []
    for i in indices:
        path = os.path.join(out_dir, "actor-%d.log" % i)
        try:
            with open(path, errors="replace") as f:
                found = [int(n) for index, n in ACTOR_FINAL.findall(f.read()) if int(index) == i]
        except OSError as e:
            raise InputError("cannot read %s: %s" % (path, e))
        if not found:
            raise InputError("%s has no final line (was the actor stopped uncleanly?)" % path)
        committed.append(found[-1])
    return committed


def prom_samples(text):
    """{sample name with labels: value} of a Prometheus text."""
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            try:
                values[name] = float(value)
            except ValueError:
                pass
    return values


def server_counters(text):
    samples = prom_samples(text)
    missing = [s for s in SAMPLES.values() if s not in samples]
    if missing:
        raise InputError("the server's metrics lack %s" % ", ".join(missing))
    return {key: int(samples[s]) for key, s in SAMPLES.items()}


def scrape(url, out_path, committed, wait_s):
    """Fetches the server's metrics until ingest has caught up with
    `committed` (or wait_s passed); writes the last text to out_path."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                text = response.read().decode()
        except OSError as e:
            raise InputError("GET %s failed: %s" % (url, e))
        c = server_counters(text)
        ingested = c["server_inserted"] + c["server_dropped_overrun"] + c["server_dropped_torn"]
        if ingested >= committed or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    with open(out_path + ".tmp", "w") as f:
        f.write(text)
    os.replace(out_path + ".tmp", out_path)
    return text


def learner_summary(out_dir):
    path = os.path.join(out_dir, "metrics.jsonl")
    summary = None
    try:
        with open(path) as f:
            for line in f:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict) and record.get("type") == "summary":
                    summary = record
    except OSError as e:
        raise InputError("cannot read %s: %s" % (path, e))
    if summary is None:
        raise InputError("%s has no summary record (did the learner end cleanly?)" % path)
    return summary


def check(counters, actors):
    """The failed checks, as sentences (empty when all hold)."""
    c = counters
    failures = []
    if c["learner_train_steps"] <= 0:
        failures.append("the learner took no train step")
    if c["learner_transitions_fetched"] <= 0:
        failures.append("the learner read no batch")
    if c["actors_committed"] <= 0:
        failures.append("the actors committed nothing")
    ingested = c["server_inserted"] + c["server_dropped_overrun"] + c["server_dropped_torn"]
    if ingested != c["actors_committed"]:
        failures.append("the actors committed %d transitions; the server inserted %d and dropped "
                        "%d overrun + %d torn" % (c["actors_committed"], c["server_inserted"],
                                                  c["server_dropped_overrun"],
                                                  c["server_dropped_torn"]))
    if c["server_batches_released"] <= 0 or c["server_priority_updates_applied"] <= 0:
        failures.append("no priority update from the learner reached the server")
    if c["server_actors_accepted"] < actors:
        failures.append("the server accepted %d actor connections, expected %d" %
                        (c["server_actors_accepted"], actors))
    if c["server_learners_accepted"] < 1:
        failures.append("the server accepted no learner")
    return failures


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out_dir", required=True)
    p.add_argument("--actors", type=int, required=True)
    p.add_argument("--metrics_url", default="",
                   help="the server's /metrics (default: read DIR/server_metrics.prom)")
    p.add_argument("--ingest_wait_s", type=float, default=10.0)
    p.add_argument("--sites", type=int, default=1, help="edge sites (buffer nodes)")
    p.add_argument("--site", type=int, default=0, help="the site to check (0 .. sites - 1)")
    args = p.parse_args(argv)
    if args.actors < 1:
        p.error("--actors must be >= 1")
    if args.sites < 1 or not 0 <= args.site < args.sites or args.actors < args.sites:
        p.error("--site must be in [0, --sites) and --actors >= --sites >= 1")
    indices = [i for i in range(args.actors) if i % args.sites == args.site]
    prom_file, counters_file = PROM_FILE, "counters.txt"
    if args.sites > 1:
        prom_file = "server-%d_metrics.prom" % args.site
        counters_file = "counters-site-%d.txt" % args.site
    try:
        per_actor = actors_committed(args.out_dir, indices)
        prom_path = os.path.join(args.out_dir, prom_file)
        if args.metrics_url:
            text = scrape(args.metrics_url, prom_path, sum(per_actor), args.ingest_wait_s)
        else:
            try:
                with open(prom_path) as f:
                    text = f.read()
            except OSError as e:
                raise InputError("cannot read %s: %s" % (prom_path, e))
        counters = {"actors_committed": sum(per_actor)}
        counters.update(server_counters(text))
        summary = learner_summary(args.out_dir)
        counters["learner_train_steps"] = int(summary["train_steps"])
        counters["learner_transitions_fetched"] = int(summary["transitions_fetched_total"])
    except InputError as e:
        print("cluster_counters: %s" % e, file=sys.stderr)
        return 2
    lines = ["%s=%d" % kv for kv in counters.items()]
    with open(os.path.join(args.out_dir, counters_file), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("counters%s: %s" % ("" if args.sites == 1 else " (site %d)" % args.site,
                                " ".join(lines)))
    failures = check(counters, len(indices))
    for failure in failures:
        print("cluster_counters: check failed: %s" % failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
