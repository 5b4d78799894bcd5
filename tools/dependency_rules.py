#!/usr/bin/env python3
"""Checks dreplay's dependency rules on the Bazel target graph.

The folders are layers. Each folder has an allow-list: the folders of ours
its targets may depend on, directly or transitively (docs/architecture.md,
the "may depend on" column). A folder with no entry fails, so a new folder
gets a rule when it gets targets:

  common/          nothing of ours
  verbs/           common/
  protocol/        common/
  replay/          common/: transport-free, no protocol, no learning code
  rl/              common/, protocol/: learning code knows no transport; it
                   encodes transitions in the wire contract's layout
  replay_server/   common/, verbs/, protocol/, replay/
  client/          common/, verbs/, protocol/
  actor_client/    client/ and what it may use, rl/
  learner_client/  client/ and what it may use, replay/, rl/
  python/          the clients and what they may use, rl/ (no server)
  third_party/     nothing of ours
  testing/, tests/, tools/, examples/   anything

A subfolder with a rule of its own (tools/bench/, tools/chaos/,
tools/experiment/, tools/launch/: anything) is a folder by itself; any other
subfolder belongs to its top folder (verbs/soft/ is verbs/).

torch: only rl/ and binaries name it directly, and only rl/, the role
clients and the anything-folders may reach it at all (the Python bindings
use rl/'s torch-free parts).

Tests and test-only libraries (testing/) may depend on anything and are
not checked as sources.

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
ANY = "*"

_CLIENT = ("common", "verbs", "protocol", "client")
# folder -> (folders of ours it may depend on besides itself, or ANY; why).
ALLOWED = {
    "common": ((), "common/ is the bottom layer"),
    "verbs": (("common",), "the RDMA layer stands alone"),
    "protocol": (("common",), "the wire contract stands alone"),
    "replay": (("common",), "the replay memory is transport-free"),
    "rl": (("common", "protocol"),
           "learning code knows no transport; it encodes transitions in protocol/'s layout"),
    "replay_server": (("common", "verbs", "protocol", "replay"),
                      "the buffer node knows no client and no learning code"),
    "client": (("common", "verbs", "protocol"), "the client session knows no role"),
    "actor_client": (_CLIENT + ("rl",), "the actor knows no other role and no server"),
    "learner_client": (_CLIENT + ("replay", "rl"),
                       "the learner knows no other role and no server"),
    "python": (_CLIENT + ("actor_client", "learner_client", "replay", "rl"),
               "the Python bindings are clients, not a server"),
    "third_party": ((), "third_party/ describes system libraries only"),
    "testing": (ANY, "test helpers may use anything"),
    "tests": (ANY, "tests may use anything"),
    "tools": (ANY, "tools may use anything"),
    "tools/bench": (ANY, "the benchmarks may use anything"),
    "tools/chaos": (ANY, "the chaos soak may use anything"),
    "tools/experiment": (ANY, "the experiment may use anything"),
    "tools/launch": (ANY, "the launchers may use anything"),
    "examples": (ANY, "examples may use anything"),
}
# Folders whose targets may reach torch (through rl/ or as binaries).
TORCH_REACHABLE = ("rl", "actor_client", "learner_client", "testing", "tests", "tools",
                   "tools/bench", "tools/chaos", "tools/experiment", "tools/launch", "examples")


def folder(label):
    """'//verbs/soft:x' -> 'verbs'; '//tools/bench:x' -> 'tools/bench' (a
    subfolder with a rule of its own); None for external labels."""
    m = re.match(r"^//([^:/]+(?:/[^:/]+)*)", label)
    if not m:
        return None
    parts = m.group(1).split("/")
    for n in range(len(parts), 1, -1):
        if "/".join(parts[:n]) in ALLOWED:
            return "/".join(parts[:n])
    return parts[0]


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
    if dep == TORCH:
        if src_folder not in TORCH_REACHABLE:
            return "torch stays out of %s/ (only rl/, the role clients and tools reach it)" % (
                src_folder)
        return None
    dep_folder = folder(dep)
    if dep_folder is None or dep_folder == src_folder:
        return None
    allowed, why = ALLOWED[src_folder]
    if allowed == ANY or dep_folder in allowed:
        return None
    return why


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
        if src not in ALLOWED:
            found.append((target, "//%s" % src,
                          "folder %s/ has no rule: give it an allow-list in "
                          "tools/dependency_rules.py and docs/architecture.md" % src))
            continue
        for dep in sorted(closure(edges, target)):
            why = forbidden(src, dep)
            if why:
                found.append((target, dep, why))
        if (src != "rl" and target not in binaries and TORCH in edges.get(target, ())):
            found.append((target, TORCH, "torch is named directly only by rl/ and binaries"))
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
