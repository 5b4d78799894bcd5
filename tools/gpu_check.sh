#!/bin/bash
# Can dreplay feed a GPU learner as fast as the GPU trains? Builds what it
# needs, then runs tools/gpu_check.py (at most about 5 minutes; see its
# --help). --smoke checks the tool on the CPU device of a machine without a
# GPU.
#
#   tools/gpu_check.sh [--json]
#   tools/gpu_check.sh --smoke
set -euo pipefail
cd "$(dirname "$0")/.."
bazel build -c opt //python:dreplay //replay_server:replay_server //actor_client:actor >&2
PYTHONPATH=bazel-bin/python/lib exec /usr/bin/python3 tools/gpu_check.py "$@"
