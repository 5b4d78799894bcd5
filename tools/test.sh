#!/usr/bin/env bash
# The README's test command: installs what is missing, then builds and runs
# dreplay's whole test suite with Bazel. Extra arguments go to `bazel test`
# (for example: tools/test.sh --config=asan).
set -euo pipefail
cd "$(dirname "$0")/.."

tools/install_deps.sh

# Keep CI under its time budget on a 2-core machine: two jobs, and tests that
# start several processes run one at a time (they are tagged "exclusive").
bazel test --jobs=2 --local_test_jobs=2 "$@" //...
