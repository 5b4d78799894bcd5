#!/usr/bin/env python3
"""Checks dreplay's dependency rules on the Bazel target graph.

The folders are layers; these rules keep them so (docs/architecture.md):

  verbs/           depends on nothing of ours but common/
  protocol/        depends on nothing of ours but common/ (and never on torch)
  replay/          not on verbs/, client/, replay_server/, the role clients,
                   rl/ or torch: transport-free
  replay_server/   not on client/, actor_client/, learner_client/ or rl/
  rl/              not on verbs/, protocol/, client/ or replay_server/
  actor_client/ and learner_client/ not on each other
  python/          not on replay_server/: the bindings are clients
  torch            only rl/ and binaries name it directly

Dependencies are followed transitively. Tests and test-only libraries
(testing/) may depend on anything and are not checked as sources.

    tools/dependency_rules.py            # queries Bazel, prints violations
    tools/dependency_rules.py --help

Exit status: 0 when every rule holds, 1 when one is broken, 2 when Bazel
could not be queried.
"""

import argparse
import re
import subprocess
import sys

TORCH = "@system//:torch"

# (source folder, forbidden folders, why). "*" forbids every folder of ours
# except those listed in ALLOWED.
RULES = [
    ("verbs", "*", "the RDMA layer stands alone"),
    ("protocol", "*", "the wire contract stands alone"),
    ("protocol", TORCH, "the wire contract stands alone"),
    ("replay", ("verbs", "client", "replay_server", "actor_client", "learner_client", "rl"),
     "the replay memory is transport-free"),
    ("replay", TORCH, "the replay memory is transport-free"),
    ("replay_server", ("client", "actor_client", "learner_client", "rl"),
     "the buffer node knows no client and no learning code"),
    ("rl", ("verbs", "protocol", "client", "replay_server"),
     "learning code knows no transport"),
    ("actor_client", ("learner_client",), "roles do not depend on each other"),
    ("learner_client", ("actor_client",), "roles do not depend on each other"),
    ("python", ("replay_server",), "the Python bindings are clients, not a server"),
]
ALLOWED = {"verbs": ("verbs", "common"), "protocol": ("protocol", "common")}


def folder(label):
    """'//verbs/soft:x' -> 'verbs'; None for external labels."""
    m = re.match(r"^//([^:/]+)", label)
    return m.group(1) if m else None


def closure(edges, start):
    seen, stack = set(), [start]
    while stack:
        for dep in edges.get(stack.pop(), ()):
            if dep not in seen:
                seen.add(dep)
                stack.append(dep)
    return seen


def forbidden(src_folder, dep):
    """The rule `dep` breaks for a target in `src_folder`, or None."""
    dep_folder = folder(dep)
    for src, banned, why in RULES:
        if src != src_folder:
            continue
        if banned == TORCH:
            if dep == TORCH:
                return why
        elif banned == "*":
            if dep_folder is not None and dep_folder not in ALLOWED[src]:
                return why
        elif dep_folder in banned:
            return why
    return None


def violations(edges, rules_exempt, binaries=()):
    """Lists (target, dependency, why) for every broken rule.

    edges: label -> iterable of direct dependency labels.
    rules_exempt: labels not checked as sources (tests, test-only targets).
    binaries: labels that may name torch directly.
    """
    found = []
    for target in sorted(edges):
        if target in rules_exempt or folder(target) is None:
            continue
        src = folder(target)
        for dep in sorted(closure(edges, target)):
            why = forbidden(src, dep)
            if why:
                found.append((target, dep, why))
        if (src != "rl" and target not in binaries and TORCH in edges.get(target, ())):
            found.append((target, TORCH, "torch stays inside rl/ and the binaries"))
    return found


def parse_graph(text):
    edges = {}
    for line in text.splitlines():
        m = re.match(r'^\s*"([^"]+)"\s*->\s*"([^"]+)"', line)
        if m:
            edges.setdefault(m.group(1), set()).add(m.group(2))
            continue
        m = re.match(r'^\s*"([^"]+)"\s*$', line)
        if m:
            edges.setdefault(m.group(1), set())
    return edges


def bazel_query(expr, output="label"):
    return subprocess.run(
        ["bazel", "query", "--noimplicit_deps", "--output=" + output, expr],
        check=True, capture_output=True, text=True).stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.parse_args()
    try:
        edges = parse_graph(bazel_query("deps(//..., 1)", "graph"))
        exempt = set(bazel_query("kind('.*_test', //...) + attr(testonly, 1, //...)").split())
        binaries = set(bazel_query("kind('cc_binary|py_binary', //...)").split())
    except (OSError, subprocess.CalledProcessError) as e:
        print("dependency_rules: cannot query Bazel: %s" % (getattr(e, "stderr", "") or e),
              file=sys.stderr)
        return 2
    found = violations(edges, exempt, binaries)
    for target, dep, why in found:
        print("dependency_rules: %s depends on %s: %s" % (target, dep, why))
    checked = sum(1 for t in edges if folder(t) and t not in exempt)
    print("dependency_rules: %d targets checked, %d violations" % (checked, len(found)))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
