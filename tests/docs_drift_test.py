"""Docs that cannot drift: every name the docs put in backticks exists.

Reads README.md, docs/*.md and protocol/README.md and checks the inline code
spans (`...`) that look like code, not prose:

  - a flag (`--name`, `--name=value`, or the flags of a command span that
    starts with one of our programs) must be defined somewhere: a DEFINE_* in
    the C++ sources, an add_argument in a Python file, or a case pattern of a
    shell script;
  - a path whose first folder is one of the repository's (`tools/chaos/chaos.py`,
    `verbs/soft/`, `bazel-bin/tools/bench/verbs_bench`) must name a file, a folder
    or a Bazel target; a bare file name with a source extension (`config.h`)
    must end some file's path;
  - a Bazel label (`//verbs/soft:link_model_test`, `//python:all`) must name a
    package and one of its targets or files;
  - a code identifier (`CheckpointWriter`, `ingest_cursor`, `kLayoutVersion`,
    `ReplayMemory::InsertRun`, `SetRange()`) must occur in some source file
    (anything but Markdown and this test).

All-capital words (constants of other libraries, placeholders such as
`HOST:PORT`), single lowercase words (flag values: `auto`, `soft`) and spans
with spaces that are not a call or a command of ours are prose, not checked.
Names of other projects that the docs quote are listed in EXTERNAL below.

It also checks that every "layout version N" in the docs is the code's
kLayoutVersion, and that protocol/README.md's version history ends at it.

The test reads the source tree itself (found through this file's real path),
so it is tagged `external` in tests/BUILD: its result is never cached.

    bazel test //tests:docs_drift_test
    /usr/bin/python3 tests/docs_drift_test.py        # from the repository root
"""

import os
import re
import sys
import unittest

# Names from other projects and tools that the docs quote in backticks.
EXTERNAL = {
    # libibverbs, rdma-core and the kernel
    "ibv_devices", "ibv_devinfo", "ibv_wc_status_str", "ibv_wc_status", "rdma_rxe",
    "link_layer", "gid_attrs", "max_rd_atomic", "max_inline_data", "retry_cnt", "rc_pingpong",
    # libc, OpenSSL, Prometheus, Slurm, Python
    "sched_yield", "sendmsg", "memcpy", "fdatasync", "RAND_bytes", "CRYPTO_memcmp",
    "histogram_quantile", "scrape_configs", "static_configs", "job_name", "from_numpy",
    "rate", "state_dict", "load_state_dict", "PYTHONPATH", "SLURM_CONF",
}

# Flags of other programs that the docs show (bazel, sbatch, squeue).
EXTERNAL_FLAGS = {"config", "me", "nodelist", "switches", "nocache_test_results"}

# Files whose text makes the corpus of names (Markdown excluded: the docs
# must not vouch for themselves).
SOURCE_EXTENSIONS = (".cc", ".h", ".py", ".sh", ".sbatch", ".proto", ".bzl", ".BUILD")
SOURCE_NAMES = ("BUILD", "WORKSPACE", ".bazelrc", ".clang-format")
# A bare file name with one of these extensions is checked as a path.
PATH_EXTENSIONS = (".h", ".cc", ".py", ".sh", ".md", ".png", ".bzl", ".proto", ".sbatch")
# Not read: git's own files, bazel's output links, the experiment's raw runs.
SKIPPED_DIRS = {".git", os.path.join("docs", "experiment", "runs")}

SPAN = re.compile(r"(?<!`)`([^`]+)`(?!`)")
FENCE = re.compile(r"^\s*```")
FLAG = re.compile(r"^--([a-z][a-z0-9_]*)(?:=.*)?$")
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
CODE_WORD = re.compile(r"[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*(?:\(\))?")
CALL = re.compile(r"^([A-Za-z_][\w:.]*)\((.*)\)$")
LABEL = re.compile(r"^//([\w/.-]*)(?::([\w.+-]+|\.\.\.|all))?$|^//([\w/-]+)/\.\.\.$")
LAYOUT_CLAIM = re.compile(r"layout version (\d+)", re.IGNORECASE)
HISTORY_ENTRY = re.compile(r"^- (\d+): ", re.MULTILINE)


def find_root():
    """The repository root: where this file really lives, one folder up."""
    root = os.environ.get("DREPLAY_ROOT")
    if not root:
        root = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    if not os.path.isfile(os.path.join(root, "WORKSPACE")):
        raise RuntimeError(
            "cannot find the source tree from %s (no WORKSPACE at %s); set DREPLAY_ROOT"
            % (__file__, root))
    return root


class Tree:
    """What the checks look names up in: paths, targets, flags, source text."""

    def __init__(self, root):
        self.root = root
        self.paths = set()      # every file and folder, relative, with "/" for folders
        self.files = []
        self.targets = {}       # package -> target names
        self.flags = set()
        text = []
        me = os.path.realpath(__file__)
        for dirpath, dirnames, filenames in os.walk(root):
            rel_dir = os.path.relpath(dirpath, root)
            dirnames[:] = sorted(
                d for d in dirnames
                if os.path.normpath(os.path.join(rel_dir, d)) not in SKIPPED_DIRS
                and not d.startswith("bazel-"))
            if rel_dir != ".":
                self.paths.add(rel_dir + "/")
            for name in filenames:
                rel = os.path.normpath(os.path.join(rel_dir, name))
                self.paths.add(rel)
                self.files.append(rel)
                full = os.path.join(dirpath, name)
                if os.path.realpath(full) == me:
                    continue
                if name.endswith(SOURCE_EXTENSIONS) or name in SOURCE_NAMES:
                    with open(full, encoding="utf-8", errors="replace") as f:
                        body = f.read()
                    text.append(body)
                    self._read_flags(name, body)
                    if name == "BUILD":
                        package = "" if rel_dir == "." else os.path.normpath(rel_dir)
                        self.targets[package] = set(
                            re.findall(r'\bname\s*=\s*"([^"]+)"', body))
        self.text = "\n".join(text)

    def _read_flags(self, name, body):
        if name.endswith((".cc", ".h")):
            self.flags.update(re.findall(r"\bDEFINE_\w+\(\s*(\w+)\s*,", body))
        elif name.endswith(".py"):
            for call in re.findall(r"add_argument\(([^)]*)", body):
                self.flags.update(re.findall(r"""["']--([\w-]+)["']""", call))
        elif name.endswith((".sh", ".sbatch")):
            # case patterns: `--a|--b) ...` and `--a=*) ...`
            for pattern in re.findall(r"^\s*([-\w|=*\"']+)\)", body, re.MULTILINE):
                self.flags.update(re.findall(r"--([a-z][\w-]*)", pattern))

    def has_identifier(self, name):
        """A whole word of the sources; a metric's name may lack its prefix."""
        pattern = (r"(?<![\w])(?:dreplay_(?:server|learner|actor)_)?" + re.escape(name)
                   + r"(?![\w])")
        return re.search(pattern, self.text) is not None

    def has_target(self, package, name):
        package = package.strip("/")
        if package not in self.targets:
            return False
        if name in ("all", "...", "*"):
            return True
        return (name in self.targets[package]
                or os.path.join(package, name) in self.paths)

    def has_path(self, path):
        """A file, a folder, a Bazel target, or the end of a file's path."""
        path = path.rstrip("/")
        if path in self.paths or path + "/" in self.paths:
            return True
        package, _, name = path.rpartition("/")
        if self.has_target(package, name):
            return True
        return any(p.endswith("/" + path) for p in self.files)


def looks_like_identifier(part):
    """Code, not prose: snake_case with an underscore, CamelCase with two humps,
    or a kConstant; never all capitals."""
    if not IDENTIFIER.match(part) or part.upper() == part:
        return False
    if "_" in part.strip("_"):
        return any(c.islower() for c in part)
    if re.match(r"^k[A-Z][A-Za-z0-9]+$", part):
        return True
    return re.match(r"^[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*$", part) is not None


def spans(markdown):
    """(line number, span text) of the inline code spans outside fenced blocks
    and outside a version history (a paragraph that opens with "Version
    history:", whose entries name what earlier versions had). A span may
    run across a line break; its whitespace is collapsed."""
    kept = []
    in_fence = in_history = False
    for line in markdown.splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
            kept.append("")
            continue
        if line.startswith("Version history:"):
            in_history = True
        elif not line.strip():
            in_history = False
        kept.append("" if in_fence or in_history else line)
    text = "\n".join(kept)
    for m in SPAN.finditer(text):
        if "\n\n" not in m.group(1):
            yield text.count("\n", 0, m.start()) + 1, " ".join(m.group(1).split())


def shell_lines(markdown, languages=("", "sh", "bash", "console")):
    """(line number, logical line) of the fenced blocks in `languages`:
    continuation lines joined, comments dropped, blanks skipped."""
    in_shell = in_fence = False
    pending, start = "", 0
    for number, line in enumerate(markdown.splitlines(), 1):
        m = FENCE.match(line)
        if m:
            language = line.strip()[3:].strip()
            in_fence = not in_fence
            in_shell = in_fence and language in languages
            continue
        if not in_shell:
            continue
        if not pending:
            start = number
        pending += " " + line.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1]
            continue
        text = " ".join(re.sub(r"(^|\s)#.*$", "", pending).split())
        pending = ""
        if text:
            yield start, text


def shell_commands(markdown):
    """(line number, command) of the commands in fenced sh/bash blocks (and
    blocks without a language): shell_lines split at |, && and ;."""
    for start, text in shell_lines(markdown):
        for command in re.split(r"\|\||&&|[|;]", text):
            if command.strip():
                yield start, " ".join(command.split())


class Checker:
    def __init__(self, tree):
        self.tree = tree
        self.top = {p.rstrip("/") for p in tree.paths if "/" not in p.rstrip("/")}
        self.programs = {n for names in tree.targets.values() for n in names}
        self.programs.update(os.path.basename(f) for f in tree.files
                             if f.endswith((".py", ".sh")))

    def problems(self, span):
        """What is wrong with one span (a list of sentences; empty when fine)."""
        span = span.replace("\\|", "|")
        tokens = span.split()
        if tokens and re.match(r"^(/usr/bin/)?python3$", tokens[0]):
            tokens = tokens[1:]
        if len(tokens) > 1:
            call = CALL.match(span)
            if call:
                return self.check_word(call.group(1) + "()")
            if self.is_command(tokens):
                return self.check_command(tokens)
            # An expression or a sentence: its code-like words.
            out = []
            for word in CODE_WORD.findall(span):
                out += self.check_word(word)
            return out
        return self.check_word(span) if tokens else []

    def is_command(self, tokens):
        first = tokens[1] if tokens[0] == "sudo" and len(tokens) > 1 else tokens[0]
        if first.startswith("--") or first in ("bazel", "sudo"):
            return True
        return (first.split("/")[-1] in self.programs
                or (self.is_our_path(first) and "/" in first))

    def check_command(self, tokens):
        out = []
        for t in tokens:
            if t.startswith("//"):
                out += self.check_label(t)
        first = tokens[0]
        if first == "sudo" and len(tokens) > 1:
            first, tokens = tokens[1], tokens[1:]
        if first.startswith("--"):
            return out + self.check_flag(first)
        if first == "bazel":
            return out
        out += self.check_word(first)
        for t in tokens[1:]:
            if t == "--":
                break
            if t.startswith("--"):
                out += self.check_flag(t)
        return out

    def check_word(self, word):
        word = re.sub(r"^\$\w+/", "bazel-bin/", word)   # $B/tools/replay_top
        if word.startswith("//"):
            return self.check_label(word)
        word = word.rstrip(".,;:")
        if not word or "<" in word or "*" in word or "..." in word:
            return []
        if word.startswith("--"):
            return self.check_flag(word)
        if word.startswith(("/", "@", "http", "~", "$")):
            return []
        if "/" in word:
            return self.check_path(word) if self.is_our_path(word) else []
        if word.endswith(PATH_EXTENSIONS) and re.match(r"^[\w.-]+$", word):
            return self.check_path(word)
        call = re.search(r"\(.*\)$", word) is not None
        word = re.sub(r"\(.*\)$", "", word)      # Foo() or Foo(args)
        word = re.sub(r"\{.*\}$", "", word)      # metric{label=...}
        word = re.sub(r"\[.*\]$", "", word)
        qualified = "::" in word
        parts = re.split(r"::|\.|->", word)
        out = []
        for i, part in enumerate(parts):
            # Every part of a::b, and the name called in f(), is code whatever its shape.
            code = looks_like_identifier(part) or (
                IDENTIFIER.match(part) and len(part) > 1
                and (qualified or (call and i == len(parts) - 1)))
            if code and part not in EXTERNAL and not self.tree.has_identifier(part):
                out.append("`%s` is in no source file" % part)
        return out

    def is_our_path(self, word):
        first = word.split("/")[0]
        return first in self.top or first in ("bazel-bin", "bazel-out")

    def check_path(self, word):
        path = word
        if path.startswith("bazel-out/"):
            return []                      # configuration folders: bazel's
        if path.startswith("bazel-bin/"):
            path = path[len("bazel-bin/"):]
        if self.tree.has_path(path):
            return []
        if path.endswith("_test") and self.tree.has_path(path + ".py"):
            return []
        return ["path `%s` exists nowhere in the tree" % word]

    def check_label(self, label):
        m = LABEL.match(label)
        if not m:
            return ["label `%s` is malformed" % label]
        if m.group(3) is not None:
            package, name = m.group(3), "..."
        else:
            package, name = m.group(1), m.group(2)
            if name is None:
                name = package.split("/")[-1] if package else ""
        if package.endswith("/...") or package == "...":
            package, name = package[:-len("...")].rstrip("/"), "..."
        if package not in self.tree.targets:
            return ["label `%s`: no package %s" % (label, package or "//")]
        if not self.tree.has_target(package, name):
            return ["label `%s`: no target %s in %s/BUILD" % (label, name, package)]
        return []

    def check_flag(self, word):
        m = FLAG.match(word.rstrip(".,;:"))
        if not m:
            return []
        name = m.group(1)
        if name in self.tree.flags or name in EXTERNAL_FLAGS:
            return []
        return ["flag `--%s` is defined nowhere (DEFINE_*, add_argument, a script's case)"
                % name]


LINK = re.compile(r"\]\(([^)\s]+)\)")


def heading_anchors(markdown):
    """The anchors GitHub makes of a page's headings."""
    out = set()
    in_fence = False
    for line in markdown.splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
        m = None if in_fence else re.match(r"^#{1,6}\s+(.*?)\s*#*$", line)
        if m:
            text = re.sub(r"[`*]", "", m.group(1)).strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return out


def links(markdown):
    """(line number, target) of the relative links of a page."""
    in_fence = False
    for number, line in enumerate(markdown.splitlines(), 1):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if not in_fence:
            for m in LINK.finditer(line):
                if not re.match(r"^[a-z]+:", m.group(1)):
                    yield number, m.group(1)


def doc_files(root):
    out = ["README.md", "protocol/README.md"]
    out += sorted(os.path.join("docs", f) for f in os.listdir(os.path.join(root, "docs"))
                  if f.endswith(".md"))
    return out


def layout_version(root):
    with open(os.path.join(root, "protocol", "config.h")) as f:
        m = re.search(r"kLayoutVersion\s*=\s*(\d+)", f.read())
    if not m:
        raise RuntimeError("no kLayoutVersion in protocol/config.h")
    return int(m.group(1))


class DocsDriftTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = find_root()
        cls.tree = Tree(cls.root)
        cls.checker = Checker(cls.tree)

    def read(self, rel):
        with open(os.path.join(self.root, rel), encoding="utf-8") as f:
            return f.read()

    def test_every_name_in_backticks_exists(self):
        found = []
        for rel in doc_files(self.root):
            for line, span in spans(self.read(rel)):
                for problem in self.checker.problems(span):
                    found.append("%s:%d: %s" % (rel, line, problem))
        self.assertEqual(found, [], "\n" + "\n".join(found))

    def test_every_flag_of_a_documented_command_exists(self):
        found = []
        for rel in doc_files(self.root):
            for line, command in shell_commands(self.read(rel)):
                tokens = command.split()
                if re.match(r"^\w+=", tokens[0]):      # B=bazel-out/...
                    continue
                if self.checker.is_command(tokens):
                    for problem in self.checker.check_command(tokens):
                        found.append("%s:%d: %s" % (rel, line, problem))
        self.assertEqual(found, [], "\n" + "\n".join(found))

    def test_every_relative_link_and_anchor_resolves(self):
        found = []
        for rel in doc_files(self.root):
            for line, target in links(self.read(rel)):
                path, _, anchor = target.partition("#")
                full = os.path.normpath(os.path.join(os.path.dirname(rel), path)) if path else rel
                if not os.path.exists(os.path.join(self.root, full)):
                    found.append("%s:%d: link to %s: no such file" % (rel, line, target))
                elif anchor and full.endswith(".md") and anchor not in heading_anchors(
                        self.read(full)):
                    found.append("%s:%d: link to %s: no such heading" % (rel, line, target))
        self.assertEqual(found, [], "\n" + "\n".join(found))

    def test_stated_layout_version_is_the_code_s(self):
        version = layout_version(self.root)
        found = []
        for rel in doc_files(self.root):
            text = self.read(rel)
            for m in LAYOUT_CLAIM.finditer(text):
                if int(m.group(1)) != version:
                    line = text.count("\n", 0, m.start()) + 1
                    found.append("%s:%d: says layout version %s; kLayoutVersion is %d"
                                 % (rel, line, m.group(1), version))
        self.assertEqual(found, [], "\n" + "\n".join(found))

    def test_protocol_history_ends_at_the_code_s_version(self):
        history = [int(n) for n in HISTORY_ENTRY.findall(self.read("protocol/README.md"))]
        self.assertTrue(history, "protocol/README.md has no version history")
        self.assertEqual(max(history), layout_version(self.root),
                         "protocol/README.md's version history does not end at kLayoutVersion")


class CheckerTest(unittest.TestCase):
    """The classifier on made-up spans, against a small made-up tree."""

    @classmethod
    def setUpClass(cls):
        tree = Tree.__new__(Tree)
        tree.root = "/nonexistent"
        tree.paths = {"tools/", "tools/BUILD", "tools/bench/", "tools/bench/BUILD",
                      "tools/chaos/", "tools/chaos/chaos.py", "verbs/", "verbs/soft/",
                      "verbs/soft/BUILD", "verbs/soft/channel.h", "protocol/",
                      "protocol/config.h", "protocol/BUILD"}
        tree.files = [p for p in tree.paths if not p.endswith("/")]
        tree.targets = {"tools": {"replay_top"}, "tools/bench": {"verbs_bench"},
                        "verbs/soft": {"soft"}, "protocol": {"layout"}}
        tree.flags = {"duration_s", "seed", "json", "listen"}
        tree.text = ("class CheckpointWriter; uint64_t ingest_cursor; kLayoutVersion;"
                     " void InsertRun(); class ReplayMemory; CartPole")
        cls.c = Checker(tree)

    def test_finds_names_that_exist(self):
        for span in ["CheckpointWriter", "ingest_cursor", "kLayoutVersion",
                     "ReplayMemory::InsertRun", "InsertRun()", "ReplayMemory::InsertRun(a, b)",
                     "tools/chaos/chaos.py", "verbs/soft/", "bazel-bin/tools/bench/verbs_bench",
                     "tools/replay_top", "config.h", "soft/channel.h", "//verbs/soft",
                     "//tools/bench:verbs_bench", "//verbs/soft/...", "//protocol:all", "--seed",
                     "--duration_s=1800", "tools/chaos/chaos.py --duration_s 120 --seed 7 --json",
                     "$B/tools/replay_top --listen=x"]:
            self.assertEqual(self.c.problems(span), [], span)

    def test_reports_names_that_do_not(self):
        for span in ["TailLine", "tail_seen", "kNoSuchThing", "ReplayMemory::Gone",
                     "n % kNoSuchThing", "Gone()", "q < ingest_cursor + NoSuchWindow(config)",
                     "tools/chaos2.py", "verbs/hard/", "bazel-bin/tools/nothing",
                     "//tools:nothing", "//nowhere:x", "--no_such_flag",
                     "tools/chaos/chaos.py --duration_s 1 --bogus", "gone.h"]:
            self.assertNotEqual(self.c.problems(span), [], span)

    def test_reads_commands_from_shell_blocks(self):
        text = ("```sh\n"
                "tools/chaos/chaos.py --duration_s 120 \\\n"
                "    --seed 7   # --not_a_flag in a comment\n"
                "x --a | tools/chaos/chaos.py --json && echo\n"
                "```\n"
                "```json\n"
                "{\"--no\": 1}\n"
                "```\n")
        self.assertEqual(list(shell_commands(text)),
                         [(2, "tools/chaos/chaos.py --duration_s 120 --seed 7"), (4, "x --a"),
                          (4, "tools/chaos/chaos.py --json"), (4, "echo")])

    def test_finds_spans_across_line_breaks_but_not_in_code_blocks(self):
        text = ("a `Foo` and `bar\nbaz` here\n\n```\n`not_a_span`\n```\n"
                "Version history:\n- 1: `OldName`\n\n`x` ``y``\n")
        self.assertEqual(list(spans(text)), [(1, "Foo"), (1, "bar baz"), (10, "x")])

    def test_makes_github_anchors(self):
        self.assertEqual(heading_anchors("## Verbs, software provider over loopback\n"
                                         "### Same-host transport (soft provider)\n"
                                         "## `replay_server`\n```\n# not a heading\n```\n"),
                         {"verbs-software-provider-over-loopback",
                          "same-host-transport-soft-provider", "replay_server"})

    def test_leaves_prose_alone(self):
        for span in ["auto", "soft", "buffer", "HOST:PORT", "tests: N passed", "DELAY_US:GBPS",
                     "H >= c + L",
                     "10km-25g", "env=CartPole-v1 obs=4", "/sys/class/infiniband/<dev>/ports",
                     "10.77.0.0/24", "dreplay-JOBID/", "actor-<i>.log", "PORT_ACTIVE",
                     "e.code", "[challenge] ", "bazel test --config=rdma", "Resources",
                     "rate(x[1m])", "prometheus.yml", "metrics.jsonl"]:
            self.assertEqual(self.c.problems(span), [], span)


if __name__ == "__main__":
    unittest.main()
