"""tools/dependency_rules.py: each rule fires on a graph that breaks it, and
a graph shaped like dreplay's passes."""

import unittest

from tools import dependency_rules as rules

# A small graph with the layering of the real one.
CLEAN = {
    "//verbs:verbs": {"//verbs/soft:soft", "//common:mutex", "@system//:absl"},
    "//verbs/soft:soft": {"//common:mutex"},
    "//protocol:layout": {"//common:status_macros", "@system//:xxhash"},
    "//replay:replay_memory": {"//replay:sum_tree"},
    "//replay:sum_tree": set(),
    "//client:session": {"//protocol:layout", "//verbs:verbs"},
    "//replay_server:server": {"//protocol:layout", "//replay:replay_memory", "//verbs:verbs"},
    "//rl:dqn": {"@system//:torch"},
    "//actor_client:experience_writer": {"//client:session"},
    "//learner_client:batch_reader": {"//client:session"},
    "//learner_client:learner": {"//learner_client:batch_reader", "//rl:dqn", "@system//:torch"},
    "//client:session_test": {"//replay_server:server", "//testing:in_process_service"},
    "//testing:in_process_service": {"//replay_server:server", "//client:session"},
    "//common:mutex": {"@system//:absl"},
    "//common:status_macros": set(),
    "//python:bindings": {"//actor_client:experience_writer", "//learner_client:batch_reader",
                          "//rl:environments"},
    "//rl:environments": {"//common:status_macros"},
    "//tools:replay_top": {"//client:session", "//replay_server:server"},
    "//tools/bench:replay_bench": {"//client:session", "//replay_server:server"},
    "//tools/launch:metrics_lines": set(),
    "//tools/experiment:experiment_lib": {"//tools/launch:metrics_lines"},
}
EXEMPT = {"//client:session_test", "//testing:in_process_service"}
BINARIES = {"//learner_client:learner", "//tools:replay_top", "//tools/bench:replay_bench"}


def broken(extra_edges):
    edges = {k: set(v) for k, v in CLEAN.items()}
    for src, dep in extra_edges:
        edges.setdefault(src, set()).add(dep)
        edges.setdefault(dep, set())
    return rules.violations(edges, EXEMPT, BINARIES)


class DependencyRulesTest(unittest.TestCase):

    def test_a_graph_that_keeps_the_layers_passes(self):
        self.assertEqual(broken([]), [])

    def test_each_forbidden_edge_is_reported_with_its_target(self):
        cases = [
            ("//verbs:verbs", "//protocol:layout"),
            ("//verbs/soft:soft", "//replay:sum_tree"),
            ("//protocol:layout", "//verbs:verbs"),
            ("//protocol:layout", "//client:session"),
            ("//protocol:layout", "@system//:torch"),
            ("//replay:sum_tree", "//verbs:verbs"),
            ("//replay:sum_tree", "//client:session"),
            ("//replay:sum_tree", "@system//:torch"),
            ("//replay_server:server", "//client:session"),
            ("//replay_server:server", "//actor_client:experience_writer"),
            ("//replay_server:server", "//learner_client:batch_reader"),
            ("//replay_server:server", "//rl:dqn"),
            ("//rl:dqn", "//verbs:verbs"),
            ("//rl:dqn", "//replay:sum_tree"),
            ("//rl:dqn", "//client:session"),
            ("//rl:dqn", "//replay_server:server"),
            ("//actor_client:experience_writer", "//learner_client:batch_reader"),
            ("//learner_client:batch_reader", "//actor_client:experience_writer"),
            ("//common:mutex", "//verbs:verbs"),
            ("//common:status_macros", "//protocol:layout"),
            ("//replay:sum_tree", "//protocol:layout"),
            ("//replay:sum_tree", "//rl:dqn"),
            ("//rl:environments", "//replay:sum_tree"),
            ("//client:session", "//replay:sum_tree"),
            ("//client:session", "//replay_server:server"),
            ("//client:session", "//rl:environments"),
            ("//actor_client:experience_writer", "//replay_server:server"),
            ("//learner_client:batch_reader", "//replay_server:server"),
            ("//python:bindings", "//replay_server:server"),
            ("//python:bindings", "//testing:in_process_service"),
            ("//verbs:verbs", "//client:session"),
        ]
        for src, dep in cases:
            with self.subTest(src=src, dep=dep):
                found = broken([(src, dep)])
                self.assertIn(src, [t for t, _, _ in found])

    def test_dependencies_are_followed_transitively(self):
        # replay_server -> replay -> client: the server reaches client/.
        found = broken([("//replay:sum_tree", "//client:session")])
        self.assertIn(("//replay_server:server", "//client:session"),
                      [(t, d) for t, d, _ in found])

    def test_torch_is_named_directly_only_by_rl_and_binaries(self):
        found = broken([("//learner_client:batch_reader", "@system//:torch")])
        self.assertIn(("//learner_client:batch_reader", "@system//:torch"),
                      [(t, d) for t, d, _ in found])
        self.assertEqual(broken([("//learner_client:learner", "@system//:torch")]), [])

    def test_only_rl_the_roles_and_tools_reach_torch(self):
        # The bindings use rl/'s torch-free parts; reaching torch through rl/ fails.
        found = broken([("//python:bindings", "//rl:dqn")])
        self.assertIn(("//python:bindings", "@system//:torch"), [(t, d) for t, d, _ in found])
        self.assertEqual(broken([("//actor_client:actor_loop", "//rl:dqn"),
                                 ("//tools:replay_top", "//rl:dqn")]), [])

    def test_a_folder_without_a_rule_is_reported(self):
        found = broken([("//newfolder:thing", "//common:mutex")])
        self.assertEqual([t for t, _, _ in found], ["//newfolder:thing"])
        self.assertIn("has no rule", found[0][2])

    def test_every_folder_of_the_tree_has_a_rule(self):
        import os
        root = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
        folders = {d for d in os.listdir(root)
                   if os.path.isfile(os.path.join(root, d, "BUILD"))}
        self.assertEqual(sorted(folders - set(rules.ALLOWED)), [])
        # Each package under tools/ has a rule of its own.
        tools = {"tools/" + d for d in os.listdir(os.path.join(root, "tools"))
                 if os.path.isfile(os.path.join(root, "tools", d, "BUILD"))}
        self.assertEqual(sorted(tools - set(rules.ALLOWED)), [])

    def test_a_subfolder_with_its_own_rule_is_a_folder(self):
        self.assertEqual(rules.folder("//tools/bench:replay_bench"), "tools/bench")
        self.assertEqual(rules.folder("//tools:replay_top"), "tools")
        self.assertEqual(rules.folder("//verbs/soft:soft"), "verbs")
        self.assertEqual(rules.folder("//replay_server/checkpoint:checkpoint"), "replay_server")
        self.assertIsNone(rules.folder("@system//:torch"))

    def test_tools_may_depend_on_anything(self):
        self.assertEqual(broken([("//tools:replay_top", "//learner_client:batch_reader")]), [])
        self.assertEqual(broken([("//tools/bench:replay_bench", "//rl:dqn"),
                                 ("//tools/launch:metrics_lines", "//tools:replay_top"),
                                 ("//tools/experiment:experiment_lib", "//rl:dqn")]), [])

    def test_tests_and_test_helpers_may_depend_on_anything(self):
        self.assertEqual(broken([("//client:session_test", "//rl:dqn"),
                                 ("//testing:in_process_service", "//rl:dqn")]), [])

    def test_parses_bazel_graph_output(self):
        text = ('digraph mygraph {\n  node [shape=box];\n  "//a:x"\n'
                '  "//a:x" -> "//b:y"\n  "//b:y"\n}\n')
        self.assertEqual(rules.parse_graph(text), {"//a:x": {"//b:y"}, "//b:y": set()})


if __name__ == "__main__":
    unittest.main()
