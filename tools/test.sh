#!/usr/bin/env bash
# The README's test command: installs what is missing, then builds and runs
# dreplay's whole test suite with Bazel. Extra arguments go to `bazel test`
# (for example: tools/test.sh --config=asan).
#
# Compiled actions come from the disk cache (see .bazelrc), so a second run
# is fast; test results are never taken from a cache: every test runs.
set -uo pipefail
cd "$(dirname "$0")/.."

tools/install_deps.sh || exit 1

log=$(mktemp)
trap 'rm -f "$log"' EXIT
# Two jobs on a 2-core machine; tests that start several processes are tagged
# "exclusive" and run alone.
bazel test --jobs=2 --local_test_jobs=2 --nocache_test_results \
  --test_summary=short "$@" //... 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}

passed=$(grep -cE '^//.* PASSED in' "$log")
failed=$(grep -cE '^//.* (FAILED|TIMEOUT|FLAKY|INCOMPLETE|NO STATUS)( in|$)' "$log")

# Checks outside Bazel, each counted as one test: the layering of
# docs/architecture.md on the real target graph, and the C++ formatting.
for check in "python3 tools/dependency_rules.py" "tools/format.sh --check"; do
  if $check; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    [ "$rc" -ne 0 ] || rc=1
  fi
done
echo
echo "tests: ${passed} passed, ${failed} failed"
exit "$rc"
