#!/usr/bin/env python3
"""The chaos soak's checker: reads the verification logs of a run
(common/verification_log.h: one file per server start, in start order, and
one per learner start) and checks the invariants tools/chaos/chaos.py promises.

The server's records build a model of its replay memory, slot index by slot
index: I (ingested) puts (sequence, checksum) at an index, T (torn) counts a
rejected slot and empties the index; with frames stored once, F (a frame
record that adds no transition) empties the index too, and E removes a
transition whose records were overwritten (an E before the B record: one
the restore dropped because a record it needs did not survive the write,
counted as evicted_at_checkpoint). Checkpoints are cut on the core's
thread and written while the core runs: K <id> snapshots the model (the
cut), D <id> names an entry of the cut the writer found overwritten (saved
absent: the actor was evicting it), C <id> says the write ended. A
restarted server's B record names the cut it restored (by epoch and ingest
cursor; without one, the newest cut a C names), and its R records (what
the restore brought back) are compared with that cut. Then:

  * torn_accepted: learner entries (A records) whose copied slot fails its
    own check, or whose (index, sequence, checksum) no server ever ingested
    (a torn, stale or mismatched transition handed to training). Must be 0.
  * duplicates: an index ingested at a sequence it already held, or had
    passed, since the last restore (a transition ingested twice). Must be 0.
  * unexpected_losses: an entry of the restored cut that the restore did
    not bring back valid with its sequence and checksum, and that no D
    record names (a D-named entry counts as evicted_at_checkpoint). Must be
    0: the writer keeps a slot only when it verifies as the cut's entry, so
    a slot restored torn, or with another sequence, is a real failure.
  * lost_since_checkpoint: what a dead server had ingested after the cut
    the next start restored (including what it ingested between that cut
    and the end of its write, which the file does not hold) and nothing
    brought back (not restored, not ingested again). Expected after a
    SIGKILL; reported, not an error.
  * the records agree: every B names a cut of an earlier start, every D an
    entry of its cut, every C a cut. Must hold.

The actors' logs (P records: a commit the actor saw complete, with the
epoch of the server start it wrote to) tie what actors were told to what
the servers did:

  * actor_commits_ingested: P records whose (index, sequence, checksum)
    some server start ingested.
  * actor_commits_lost: P records no start ingested, written to a start
    that a later one followed (killed, or stopped before ingesting them),
    and beyond everything that start ingested or tore of the actor's lease
    in that epoch. A lease is ingested in sequence order, so such a commit
    came after the start's last ingest of the lease, and so after the cut
    the next start restored: lost after the last cut, with what that server
    ingested after it. Expected after a SIGKILL; reported, not an error.
  * actor_commits_unaccounted: P records no start ingested, written to the
    last start (which stops cleanly, ingesting every commit first) or to an
    epoch no server log names; or whose (index, sequence) was ingested with
    other contents; or that the start they were written to passed over or
    tore (it ingested or tore that or a later sequence of the actor's lease
    in that epoch).
    Must be 0.

Importable (check_run, Report) and runnable on a directory:

  tools/chaos/chaos_check.py RUN_DIR [--json]

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
        self.records_held = 0  # F records: frame records that add no transition
        self.unknown_restores = 0  # B records that name no cut of an earlier start
        self.bad_absences = 0  # D or C records that name no entry or cut
        self.reingested_after_restore = 0  # the same transition ingested by a later start
        self.sequences_reissued = 0  # an (index, sequence) ingested with another checksum
        self.restores = 0
        self.accepted = 0
        self.actor_commits_ingested = 0
        self.actor_commits_lost = 0
        self.actor_commits_unaccounted = 0
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
        if self.sequences_reissued:
            self.failures.append(
                "no sequence is reused after a crash: %d (index, sequence) pairs ingested with "
                "two contents (e.g. %s)" % (self.sequences_reissued, self.examples["reissued"]))
        if self.unexpected_losses:
            self.failures.append(
                "every transition of a restored checkpoint is present after the restore: %d "
                "missing without eviction (e.g. %s)" % (self.unexpected_losses,
                                                       self.examples["unexpected_loss"]))
        if self.torn_accepted:
            self.failures.append(
                "the learner never accepted a torn or mismatched entry: %d accepted (e.g. %s)" %
                (self.torn_accepted, self.examples["torn_accepted"]))
        if self.unknown_restores:
            self.failures.append(
                "every restore names a cut an earlier start took: %d do not (e.g. %s)" %
                (self.unknown_restores, self.examples["unknown_restore"]))
        if self.bad_absences:
            self.failures.append(
                "every D record names an entry of its cut, every C record a cut: %d do not "
                "(e.g. %s)" % (self.bad_absences, self.examples["bad_absence"]))
        if self.actor_commits_unaccounted:
            self.failures.append(
                "every transition an actor saw committed was ingested, or lost after the last "
                "cut with a server that a later one replaced: %d were not (e.g. %s)" % (
                    self.actor_commits_unaccounted, self.examples["actor_commit"]))
        if self.bad_records:
            self.failures.append("verification logs are readable: %d malformed records (e.g. %s)"
                                 % (self.bad_records, self.examples["bad_record"]))
        return self

    def figures(self):
        return {
            "transitions_committed": self.transitions_committed,
            "records_held": self.records_held,
            "torn_rejected": self.torn_rejected,
            "lost_since_checkpoint": self.lost_since_checkpoint,
            "unexpected_losses": self.unexpected_losses,
            "torn_accepted": self.torn_accepted,
            "actor_commits_ingested": self.actor_commits_ingested,
            "actor_commits_lost": self.actor_commits_lost,
            "actor_commits_unaccounted": self.actor_commits_unaccounted,
        }


_FIELDS = {"S": 1, "I": 3, "T": 2, "F": 3, "E": 2, "X": 2, "K": 3, "D": 3, "C": 1, "B": 2, "R": 4, "A": 4,
           "P": 4}


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
            if kind in ("I", "F", "R", "A"):
                values = (int(fields[1]), int(fields[2]), int(fields[3], 16)) + tuple(
                    int(x) for x in fields[4:])
            elif kind == "P":
                values = (int(fields[1]), int(fields[2]), int(fields[3]), int(fields[4], 16))
            else:
                values = tuple(int(x) for x in fields[1:])
        except ValueError:
            bad.append("%s:%d %r" % (path, n + 1, line))
            continue
        records.append((kind,) + values)
    return records


def _restores_and_cuts(server_runs, report):
    """Replays the server records: returns (cuts, restored_cut, ingests_by).
    cuts: {(start, cut id): cut}, a cut being a dict with the model at the
    cut ("model": {index: (sequence, checksum)}), its "position" (how many
    I records of its start came before it), "absent" ({index: sequence}
    from D records) and "written" (a C record names it). restored_cut: per
    start, the key of the cut its restore brought back (None: none)."""
    cuts = {}
    by_position = {}  # (epoch, ingest cursor) -> the newest cut there
    newest_written = None
    restored_cut = []
    for start, records in enumerate(server_runs):
        key = newest_written  # a restore without a B record: the newest written
        for r in records:
            if r[0] == "B":
                key = by_position.get((r[1], r[2]))
                if key is None:
                    report.unknown_restores += 1
                    report.note("unknown_restore", "server start %d: epoch %d ingest cursor %d"
                                % (start, r[1], r[2]))
        restored_cut.append(key if start > 0 else None)
        restored = {r[1]: (r[2], r[3]) for r in records if r[0] == "R" and r[4] == 1}
        model = dict(restored)  # the memory after the restore
        ingests = 0
        for r in records:
            kind = r[0]
            if kind == "I":
                model[r[1]] = (r[2], r[3])
                ingests += 1
            elif kind in ("T", "F"):
                model.pop(r[1], None)
            elif kind in ("E", "X"):
                if model.get(r[1], (None,))[0] == r[2]:
                    del model[r[1]]
            elif kind == "K":
                cuts[(start, r[1])] = {"model": dict(model), "position": ingests, "absent": {},
                                       "written": False}
                by_position[(r[2], r[3])] = (start, r[1])
            elif kind == "D":
                cut = cuts.get((start, r[1]))
                if cut is None or cut["model"].get(r[2], (None,))[0] != r[3]:
                    report.bad_absences += 1
                    report.note("bad_absence", "server start %d: cut %d index %d sequence %d: "
                                "not an entry of the cut" % ((start,) + r[1:]))
                else:
                    cut["absent"][r[2]] = r[3]
            elif kind == "C":
                if (start, r[1]) in cuts:
                    cuts[(start, r[1])]["written"] = True
                    newest_written = (start, r[1])
                else:
                    report.bad_absences += 1
                    report.note("bad_absence", "server start %d: C %d names no cut" % (start, r[1]))
    return cuts, restored_cut


def _passed_by_start(server_runs, actor_runs):
    """For each (actor run, epoch): the highest sequence the start of that
    epoch ingested or tore at an index the actor committed to in it (its
    lease's slots; a lease keeps its actor within one start). -1: none."""
    seen_by_start = []  # per start: index -> highest sequence ingested or torn
    for records in server_runs:
        seen = {}
        for r in records:
            if r[0] in ("I", "T", "F"):
                seen[r[1]] = max(r[2], seen.get(r[1], r[2]))
        seen_by_start.append(seen)
    start_of_epoch = {}
    for start, records in enumerate(server_runs):
        for r in records:
            if r[0] == "S":
                start_of_epoch[r[1]] = start
    passed = {}  # (actor run, epoch) -> highest sequence
    for run, records in enumerate(actor_runs):
        indices = {}
        for r in records:
            if r[0] == "P":
                indices.setdefault(r[1], set()).add(r[2])
        for epoch, mine in indices.items():
            start = start_of_epoch.get(epoch)
            seen = seen_by_start[start] if start is not None else {}
            passed[(run, epoch)] = max((seen.get(i, -1) for i in mine), default=-1)
    return start_of_epoch, passed


def _check_actor_commits(server_runs, actor_runs, ingested, report):
    """Judges every P record of `actor_runs` against what the server starts
    ingested (`ingested`: (index, sequence) -> checksums)."""
    start_of_epoch, passed = _passed_by_start(server_runs, actor_runs)
    last = len(server_runs) - 1
    for run, records in enumerate(actor_runs):
        for r in records:
            if r[0] != "P":
                continue
            _, epoch, index, seq, checksum = r
            sums = ingested.get((index, seq), set())
            if checksum in sums:
                report.actor_commits_ingested += 1
                continue
            start = start_of_epoch.get(epoch)
            skipped = passed.get((run, epoch), -1) >= seq
            if not sums and start is not None and start < last and not skipped:
                report.actor_commits_lost += 1
                continue
            report.actor_commits_unaccounted += 1
            report.note("actor_commit", "epoch %d index %d sequence %d checksum %016x: %s" % (
                epoch, index, seq, checksum,
                "ingested with other contents" if sums else
                "no server start has that epoch" if start is None else
                "passed over or torn by the start it was written to" if skipped else
                "never ingested by the last start"))


def check_records(server_runs, learner_runs, bad_records=(), actor_runs=()):
    """server_runs: a list (one per server start, in start order) of record
    lists; learner_runs and actor_runs: lists of record lists; bad_records:
    malformed lines found reading them. Returns a finished Report."""
    return check_sites([(server_runs, actor_runs)], learner_runs, bad_records)


def check_sites(sites, learner_runs, bad_records=()):
    """Several edge sites and one learner over all of them: `sites` holds,
    per site, (server_runs, actor_runs) as check_records takes them. Each
    site's servers and actors are checked on their own (its own starts,
    cuts and epochs); the learner's entries against what any site ingested
    (an entry's (index, sequence, checksum) names its site: the checksum
    covers its actor's lease and sequence). Returns a finished Report whose
    figures add up over the sites."""
    report = Report()
    report.bad_records = len(bad_records)
    for b in bad_records:
        report.note("bad_record", b)
    ingested = {}  # (index, sequence) -> checksums any site ingested there
    for server_runs, actor_runs in sites:
        for key, sums in _check_site(server_runs, actor_runs, report).items():
            ingested.setdefault(key, set()).update(sums)
    _check_learner(learner_runs, ingested, report)
    return report.finish()


def _check_site(server_runs, actor_runs, report):
    """Checks one site's server starts and the actors that wrote to it into
    `report`; returns what it ingested: (index, sequence) -> checksums."""
    cuts, restored_cut = _restores_and_cuts(server_runs, report)
    ingested = {}     # (index, sequence) -> checksums ever ingested there
    ingested_by = []  # per start: the (index, sequence, checksum) in order
    back_by = []      # per start: what its restore brought back (valid)
    for run_number, records in enumerate(server_runs):
        restored = {r[1]: (r[2], r[3], r[4]) for r in records if r[0] == "R"}
        # Frames stored once: transitions the restore dropped because a
        # record they need did not survive the write (E before the B).
        b_at = next((k for k, r in enumerate(records) if r[0] == "B"), 0)
        dropped = {(r[1], r[2]) for r in records[:b_at] if r[0] == "E"}
        model = {}   # index -> (sequence, checksum) the memory holds
        passed = {}  # index -> highest sequence the memory held or rejected there
        if run_number > 0:
            report.restores += 1
            key = restored_cut[run_number]
            cut = cuts[key] if key is not None else {"model": {}, "absent": {}}
            for index, (seq, checksum) in cut["model"].items():
                if cut["absent"].get(index) == seq or (index, seq) in dropped:
                    report.evicted_at_checkpoint += 1  # overwritten during the write
                    continue
                r = restored.get(index)
                if r is not None and r[2] == 1 and (r[0], r[1]) == (seq, checksum):
                    continue
                report.unexpected_losses += 1
                report.note("unexpected_loss", "server start %d: index %d sequence %d "
                            "checksum %016x of cut %s restored as %s" % (
                                run_number, index, seq, checksum, key,
                                "nothing" if r is None else
                                "sequence %d checksum %016x valid %d" % r))
        for index, (seq, checksum, valid) in restored.items():
            if valid == 1:
                model[index] = (seq, checksum)
                passed[index] = seq
        back_by.append({(i, s, c) for i, (s, c) in model.items()})
        mine = []
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
                    report.note("reissued", "server start %d: index %d sequence %d" %
                                (run_number, index, seq))
                sums.add(checksum)
                passed[index] = max(seq, passed.get(index, seq))
                model[index] = (seq, checksum)
                mine.append((index, seq, checksum))
            elif kind == "T":
                _, index, seq = r
                report.torn_rejected += 1
                passed[index] = max(seq, passed.get(index, seq))
                model.pop(index, None)
            elif kind == "F":
                # A frame record: the server took the actor's commit (and a
                # learner may be given the record), but the memory holds no
                # transition there.
                _, index, seq, checksum = r
                ingested.setdefault((index, seq), set()).add(checksum)
                report.records_held += 1
                passed[index] = max(seq, passed.get(index, seq))
                model.pop(index, None)
            elif kind in ("E", "X"):
                # Evicted, or forwarded once (the hybrid placement): it left
                # the memory.
                _, index, seq = r
                if model.get(index, (None,))[0] == seq:
                    del model[index]
        ingested_by.append(mine)
    # A server followed by another start lost what it ingested after the cut
    # the next start restored (all it ingested when that cut is older than
    # its start), unless the next start restored it or a later one ingested
    # it again (from the restored ring). Ingests between a cut and the end
    # of its write are not in the file: lost here, not unexpected. The last
    # server stopped at the end of the run (or is checked for a clean exit
    # elsewhere).
    for k in range(len(server_runs) - 1):
        key = restored_cut[k + 1]
        position = cuts[key]["position"] if key is not None and key[0] == k else 0
        later = set().union(*(set(m) for m in ingested_by[k + 1:]))
        report.lost_since_checkpoint += sum(
            1 for e in set(ingested_by[k][position:]) if e not in back_by[k + 1] and e not in later)
    report.transitions_committed += len({e for m in ingested_by for e in m})
    _check_actor_commits(server_runs, actor_runs, ingested, report)
    return ingested


def _check_learner(learner_runs, ingested, report):
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


def _start_number(path):
    m = re.search(r"\.(\d+)\.vlog$", path)
    return int(m.group(1)) if m else -1


def check_run(run_dir):
    """Checks the logs tools/chaos/chaos.py leaves in run_dir: server.<n>.vlog
    (n: the server start, from 0), learner.<n>.vlog and actor.<a>.<n>.vlog;
    with several sites, each site's server and actor logs in run_dir/site-<k>
    and the learner's in run_dir."""
    site_dirs = sorted(glob.glob(os.path.join(run_dir, "site-*")),
                       key=lambda d: int(d.rsplit("-", 1)[1]))
    bad = []
    sites = []
    for d in site_dirs or [run_dir]:
        servers = sorted(glob.glob(os.path.join(d, "server.*.vlog")), key=_start_number)
        actors = sorted(glob.glob(os.path.join(d, "actor.*.vlog")))
        sites.append(([read_records(p, bad) for p in servers],
                      [read_records(p, bad) for p in actors]))
    learners = sorted(glob.glob(os.path.join(run_dir, "learner.*.vlog")), key=_start_number)
    learner_runs = [read_records(p, bad) for p in learners]
    return check_sites(sites, learner_runs, bad)


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
