#!/usr/bin/env bash
# The test command's part on a real kernel Soft-RoCE device. tools/test.sh
# runs it inside the VM (tools/rxe_vm/rxe_vm.sh) after `bazel test` has built
# everything; it runs the built binaries directly:
#   - the rdma-tagged tests (a test that skips here counts as failed: the
#     device is there);
#   - a registration over RLIMIT_MEMLOCK refused with what to raise;
#   - a link flap (d0 down and up) that replay_server survives without a
#     restart;
#   - the adversarial and security tests on --provider=ibverbs, where keys are real type-2
#     memory windows and the device refuses the misuse;
#   - an end-to-end run on --provider=ibverbs: a server, two actors and a
#     learner, in both placements and with the learner cache
#     (tools/rxe_vm/e2e_check.py);
#   - verbs_bench WRITE, READ and atomics, on ibverbs and on the soft
#     provider side by side (figures in $OUT/verbs_bench.jsonl);
#   - a short replay_bench on ibverbs.
# Each step is one test: "rxe: PASS name (Ns)" or "rxe: FAIL name (Ns)" with
# the end of its log; the last line is "rxe: N passed, N failed". Logs go to
# $OUT. Arguments: the rdma-tagged test binaries, relative to bazel-bin.
set -uo pipefail

bin=bazel-bin
out="${OUT:-/tmp/rxe_suite}"
mkdir -p "$out"
passed=0
failed=0

# step NAME COMMAND...: runs COMMAND with its output in $out/NAME.log.
step() {
  local name="$1"
  shift
  local log="$out/$name.log" start=$SECONDS
  "$@" >"$log" 2>&1
  local rc=$?
  if [ "$rc" -eq 0 ] && grep -q '^\[  SKIPPED \]' "$log"; then
    echo "rxe: $name skipped a test on a host that has the device" >>"$log"
    rc=1
  fi
  if [ "$rc" -eq 0 ]; then
    passed=$((passed + 1))
    echo "rxe: PASS $name ($((SECONDS - start)) s)"
  else
    failed=$((failed + 1))
    echo "rxe: FAIL $name ($((SECONDS - start)) s, exit status $rc); the end of $log:"
    tail -n 30 "$log" | sed 's/^/    /'
  fi
}

# gtest binaries that find their data files relative to their runfiles.
in_runfiles() {
  local binary="$1"
  shift
  (cd "$bin/$binary.runfiles/dreplay" && TEST_TMPDIR=$(mktemp -d) "./$binary" "$@")
}

for test in "$@"; do
  step "$(basename "$test")" in_runfiles "$test"
done

# The tests that attack the server, on the device's memory windows.
on_ibverbs() {
  (export DREPLAY_TEST_PROVIDER=ibverbs && in_runfiles "$1")
}
step adversarial_test_ibverbs on_ibverbs tests/adversarial_test
step security_test_ibverbs on_ibverbs tests/security_test

# Without CAP_IPC_LOCK and with a small RLIMIT_MEMLOCK, a registration is
# refused with what to raise, not with a bare "Cannot allocate memory".
memlock_refusal() {
  local output
  output=$(setpriv --bounding-set=-ipc_lock -- bash -c \
    "ulimit -l 64 && exec $bin/tools/bench/verbs_bench --provider=ibverbs --duration_s=0.2" 2>&1)
  echo "$output"
  [[ "$output" == *RLIMIT_MEMLOCK*"ulimit -l unlimited"* ]]
}
step memlock_refusal memlock_refusal

# wait_for SECONDS COMMAND...: until COMMAND succeeds, at most SECONDS.
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.1
  done
}
port_is() { grep -q "$1" /sys/class/infiniband/rxe0/ports/1/state; }
has_gid() { [ "$(cat /sys/class/infiniband/rxe0/ports/1/gids/0)" != "$zero_gid" ]; }
zero_gid=0000:0000:0000:0000:0000:0000:0000:0000

# A link flap: a replay_server sees the port go down and come back, and a
# monitor that connects afterwards is served (the server WRITEs heartbeats to
# it) without a restart.
link_flap() {
  local dir
  dir=$(mktemp -d)
  (umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/token")
  "$bin/replay_server/replay_server" --provider=ibverbs --listen=127.0.0.1:0 \
    --auth_token_file="$dir/token" --port_file="$dir/port" --capacity=4096 \
    --heartbeat_interval_s=0.1 >"$dir/log" 2>&1 &
  local server=$!
  local ok=1
  wait_for 30 test -s "$dir/port" || ok=0
  local top=("$bin/tools/replay_top" --provider=ibverbs --auth_token_file="$dir/token"
    --server="127.0.0.1:$(cat "$dir/port")"
    --once --interval_s=1)
  [ "$ok" = 1 ] && "${top[@]}" || ok=0
  ip link set d0 down && wait_for 10 port_is DOWN || ok=0
  ip link set d0 up && wait_for 20 port_is ACTIVE && wait_for 20 has_gid || ok=0
  [ "$ok" = 1 ] && "${top[@]}" || ok=0
  kill "$server" && wait "$server"
  cat "$dir/log"
  grep -q "port went down" "$dir/log" || { echo "the server saw no PORT_ERR"; ok=0; }
  [ "$ok" = 1 ]
}
step link_flap link_flap

step e2e_ibverbs python3 tools/rxe_vm/e2e_check.py --bin_dir "$bin" --out_dir "$out/e2e"

bench() {  # NAME PROVIDER verbs_bench flags...
  local provider="$2"
  shift 2
  "$bin/tools/bench/verbs_bench" --provider="$provider" --duration_s=2 --warmup_s=0.5 --json "$@" |
    tee -a "$out/verbs_bench.jsonl" | grep -q '"ops_per_s"'
}
for provider in ibverbs soft; do
  step "verbs_bench_write_$provider" bench write "$provider" --op=write --size=64 --batch=16 --depth=64
  step "verbs_bench_read_$provider" bench read "$provider" --op=read --size=32768 --depth=16
  step "verbs_bench_fetch_add_$provider" bench fetch_add "$provider" --op=fetch_add --depth=16
  step "verbs_bench_compare_swap_$provider" bench compare_swap "$provider" --op=compare_swap --depth=16
done

step replay_bench_ibverbs "$bin/tools/bench/replay_bench" --provider=ibverbs --duration_s=3 --json

echo "rxe: ${passed} passed, ${failed} failed"
[ "$failed" -eq 0 ]
