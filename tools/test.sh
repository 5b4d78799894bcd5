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
# The ibverbs path on a real kernel Soft-RoCE device (rdma_rxe), in a VM
# under software emulation (tools/rxe_vm/): the rdma-tagged tests, the
# adversarial tests on real memory windows, an end-to-end run, verbs_bench
# and replay_bench, each counted as one test. Where the VM cannot run, that
# is a skip with its reason, not a pass.
skipped=0
if [ "$rc" -ne 0 ]; then
  echo "rxe: not run: the build or the tests above failed"
  skipped=$((skipped + 1))
else
  rdma_tests=$(bazel query 'attr(tags, "\brdma\b", tests(//...))' 2>/dev/null |
    sed -e 's#^//##' -e 's#:#/#')
  vm_out=$(mktemp -d)
  vm_log="$vm_out/console.log"
  echo "rxe: running the ibverbs suite on kernel Soft-RoCE in a VM (logs: $vm_out)"
  # shellcheck disable=SC2086
  tools/rxe_vm/rxe_vm.sh --timeout=900 --out="$vm_out" -- tools/rxe_vm/suite.sh $rdma_tests \
    2>&1 | tee "$vm_log"
  vm_rc=${PIPESTATUS[0]}
  counts=$(grep -E '^rxe: [0-9]+ passed, [0-9]+ failed$' "$vm_log" | tail -n 1)
  if [ "$vm_rc" -eq 77 ]; then
    echo "rxe: skipped: $(grep '^rxe_vm: cannot run:' "$vm_log" | tail -n 1 | cut -d: -f3-)"
    skipped=$((skipped + 1))
  elif [ -n "$counts" ]; then
    passed=$((passed + $(echo "$counts" | awk '{print $2}')))
    failed=$((failed + $(echo "$counts" | awk '{print $4}')))
    [ "$vm_rc" -eq 0 ] || rc=1
  else
    echo "rxe: FAIL: the VM gave no result (exit status $vm_rc)"
    failed=$((failed + 1))
    rc=1
  fi
fi

echo
echo "tests: ${passed} passed, ${failed} failed, ${skipped} skipped"
exit "$rc"
