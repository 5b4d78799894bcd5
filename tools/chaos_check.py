#!/usr/bin/env python3
"""The chaos soak's checker: reads the verification logs of a run
(common/verification_log.h: one file per server start, in start order, and
one per learner start) and checks the invariants tools/chaos.py promises.

The server's records build a model of its replay memory, slot index by slot
index: I (ingested) puts (sequence, checksum) at an index, T (torn) counts a
rejected slot and empties the index, C (checkpoint written) snapshots the
model, and a restarted server's R records (what its restore brought back)
are compared with the snapshot of the newest checkpoint. Then:

  * torn_accepted: learner entries (A records) whose copied slot fails its
    own check, or whose (index, sequence, checksum) no server ever ingested
    (a torn, stale or mismatched transition handed to training). Must be 0.
  * duplicates: an index ingested at a sequence it already held, or had
    passed, since the last restore (a transition ingested twice). Must be 0.
  * unexpected_losses: an entry of the newest checkpoint's snapshot that the
    restore did not bring back, unless its loss is explained by eviction:
    the restored slot names a later sequence of its lease (the actor had
    begun to overwrite it), or the restored slot fails its check and a
    later sequence of its lease was written there (ingested or declared
    torn by any server start: the actor was overwriting the slot while the
    checkpoint streamed the ring, which saved a mixture; counted as
    torn_at_checkpoint). Must be 0.
  * lost_since_checkpoint: what a dead server had ingested after its last
    checkpoint and nothing brought back (not restored, not ingested again).
    Expected after a SIGKILL; reported, not an error.

Importable (check_run, Report) and runnable on a directory:

  tools/chaos_check.py RUN_DIR [--json]

Only the Python standard library is used.
"""

import argparse
import glob
import json
import os
import re
import sys


class Report:
    """What the logs say; `failures` names each broken invariant."""

    def __init__(self):
        self.transitions_committed = 0  # distinct transitions ingested
        self.torn_rejected = 0
        self.lost_since_checkpoint = 0
        self.unexpected_losses = 0
        self.torn_accepted = 0
        self.duplicates = 0
        self.evicted_at_checkpoint = 0
        self.torn_at_checkpoint = 0  # of those: saved while their actor rewrote them
        self.reingested_after_restore = 0  # the same transition ingested by a later start
        self.sequences_reissued = 0  # an (index, sequence) ingested with another checksum
        self.restores = 0
        self.accepted = 0
        self.bad_records = 0
        self.failures = []
        self.examples = {}  # invariant -> a few offending records

    def note(self, kind, example):
        examples = self.examples.setdefault(kind, [])
        if len(examples) < 5:
            examples.append(example)

    def finish(self):
        if self.duplicates:
            self.failures.append(
                "no transition ingested twice: %d ingests at a sequence the index already held "
                "or had passed (e.g. %s)" % (self.duplicates, self.examples["duplicate"]))
        if self.unexpected_losses:
            self.failures.append(
                "every transition of a restored checkpoint is present after the restore: %d "
                "missing without eviction (e.g. %s)" % (self.unexpected_losses,
                                                       self.examples["unexpected_loss"]))
        if self.torn_accepted:
            self.failures.append(
                "the learner never accepted a torn or mismatched entry: %d accepted (e.g. %s)" %
                (self.torn_accepted, self.examples["torn_accepted"]))
        if self.bad_records:
            self.failures.append("verification logs are readable: %d malformed records (e.g. %s)"
                                 % (self.bad_records, self.examples["bad_record"]))
        return self

    def figures(self):
        return {
            "transitions_committed": self.transitions_committed,
            "torn_rejected": self.torn_rejected,
            "lost_since_checkpoint": self.lost_since_checkpoint,
            "unexpected_losses": self.unexpected_losses,
            "torn_accepted": self.torn_accepted,
        }


_FIELDS = {"S": 1, "I": 3, "T": 2, "C": 0, "R": 4, "A": 4}


def read_records(path, bad):
    """The records of one log as tuples (kind, ints...), checksums as ints.
    A last line without its newline (the process died in its write) is
    skipped; any other malformed line is appended to `bad`."""
    with open(path, "rb") as f:
        data = f.read().decode("ascii", errors="replace")
    complete = data.split("\n")[:-1]  # the last element is "" or a torn last line
    records = []
    for n, line in enumerate(complete):
        fields = line.split(" ")
        kind = fields[0]
        try:
            if kind not in _FIELDS or len(fields) != 1 + _FIELDS[kind]:
                raise ValueError(kind)
            if kind in ("I", "R", "A"):
                values = (int(fields[1]), int(fields[2]), int(fields[3], 16)) + tuple(
                    int(x) for x in fields[4:])
            else:
                values = tuple(int(x) for x in fields[1:])
        except ValueError:
            bad.append("%s:%d %r" % (path, n + 1, line))
            continue
        records.append((kind,) + values)
    return records


def check_records(server_runs, learner_runs, bad_records=()):
    """server_runs: a list (one per server start, in start order) of record
    lists; learner_runs: a list of record lists; bad_records: malformed
    lines found reading them. Returns a finished Report."""
    report = Report()
    report.bad_records = len(bad_records)
    for b in bad_records:
        report.note("bad_record", b)
    ingested = {}     # (index, sequence) -> checksums ever ingested there
    ingested_by = []  # per start: the (index, sequence, checksum) it ingested
    back_by = []      # per start: what its restore brought back (valid)
    after_by = []     # per start: what it ingested after its last checkpoint
    snapshot = {}     # the model at the newest checkpoint: {index: (seq, sum)}
    # The highest sequence any start ingested or declared torn at each index.
    written = {}
    for records in server_runs:
        for r in records:
            if r[0] in ("I", "T"):
                written[r[1]] = max(r[2], written.get(r[1], r[2]))
    for run_number, records in enumerate(server_runs):
        restored = {r[1]: (r[2], r[3], r[4]) for r in records if r[0] == "R"}
        model = {}   # index -> (sequence, checksum) the memory holds
        passed = {}  # index -> highest sequence the memory held or rejected there
        if run_number > 0:
            report.restores += 1
            for index, (seq, checksum) in snapshot.items():
                r = restored.get(index)
                if r is not None and r[2] == 1 and (r[0], r[1]) == (seq, checksum):
                    continue
                if r is not None and r[0] > seq:
                    report.evicted_at_checkpoint += 1
                    continue
                if r is not None and r[2] == 0 and r[0] == seq and written.get(index, seq) > seq:
                    report.evicted_at_checkpoint += 1
                    report.torn_at_checkpoint += 1
                    continue
                report.unexpected_losses += 1
                report.note("unexpected_loss", "server start %d: index %d sequence %d "
                            "checksum %016x restored as %s" % (run_number, index, seq, checksum,
                            "nothing" if r is None else "sequence %d checksum %016x valid %d" % r))
        for index, (seq, checksum, valid) in restored.items():
            if valid == 1:
                model[index] = (seq, checksum)
                passed[index] = seq
        back_by.append({(i, s, c) for i, (s, c) in model.items()})
        mine = set()
        after = []
        for r in records:
            kind = r[0]
            if kind == "I":
                _, index, seq, checksum = r
                if index in passed and seq <= passed[index]:
                    report.duplicates += 1
                    report.note("duplicate", "server start %d: index %d sequence %d after "
                                "sequence %d" % (run_number, index, seq, passed[index]))
                sums = ingested.setdefault((index, seq), set())
                if checksum in sums:
                    report.reingested_after_restore += 1
                elif sums:
                    report.sequences_reissued += 1
                sums.add(checksum)
                passed[index] = max(seq, passed.get(index, seq))
                model[index] = (seq, checksum)
                mine.add((index, seq, checksum))
                after.append((index, seq, checksum))
            elif kind == "T":
                _, index, seq = r
                report.torn_rejected += 1
                passed[index] = max(seq, passed.get(index, seq))
                model.pop(index, None)
            elif kind == "C":
                snapshot = dict(model)
                after = []
        ingested_by.append(mine)
        after_by.append(after)
    # A server followed by another start lost what it ingested after its
    # last checkpoint, unless the next start restored it or a later one
    # ingested it again (from the restored ring). The last server stopped
    # at the end of the run (or is checked for a clean exit elsewhere).
    for k in range(len(server_runs) - 1):
        later = set().union(*ingested_by[k + 1:])
        report.lost_since_checkpoint += sum(
            1 for e in set(after_by[k]) if e not in back_by[k + 1] and e not in later)
    report.transitions_committed = sum(len(sums) for sums in ingested.values())

    for records in learner_runs:
        for r in records:
            if r[0] != "A":
                continue
            report.accepted += 1
            _, index, seq, checksum, ok = r
            if ok != 1:
                report.torn_accepted += 1
                report.note("torn_accepted", "index %d sequence %d: its slot fails its check" %
                            (index, seq))
            elif checksum not in ingested.get((index, seq), ()):
                report.torn_accepted += 1
                report.note("torn_accepted", "index %d sequence %d checksum %016x: never "
                            "ingested" % (index, seq, checksum))
    return report.finish()


def _start_number(path):
    m = re.search(r"\.(\d+)\.vlog$", path)
    return int(m.group(1)) if m else -1


def check_run(run_dir):
    """Checks the logs tools/chaos.py leaves in run_dir: server.<n>.vlog
    (n: the server start, from 0) and learner.<n>.vlog."""
    servers = sorted(glob.glob(os.path.join(run_dir, "server.*.vlog")), key=_start_number)
    learners = sorted(glob.glob(os.path.join(run_dir, "learner.*.vlog")), key=_start_number)
    bad = []
    server_runs = [read_records(p, bad) for p in servers]
    learner_runs = [read_records(p, bad) for p in learners]
    return check_records(server_runs, learner_runs, bad)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("run_dir", help="a chaos run's --out_dir")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = p.parse_args(argv)
    report = check_run(args.run_dir)
    if args.json:
        print(json.dumps(report.figures(), sort_keys=True))
    else:
        for k, v in sorted(report.figures().items()):
            print("%s: %d" % (k, v))
    for f in report.failures:
        print("chaos_check: invariant broken: " + f, file=sys.stderr)
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
