#!/usr/bin/env bash
# Runs dreplay across network namespaces on this machine, as if on separate
# hosts: a buffer node (replay_server), a learner and N actors, each in its
# own namespace with its own address, joined by veth pairs to a bridge in a
# "switch" namespace. The addresses exist only inside those namespaces, so no
# traffic of the run leaves them. Needs root (ip netns, ip link, tc).
#
#   sudo tools/launch/netns_cluster.sh --actors 2 --train_steps 500 --out_dir /tmp/nc
#   sudo tools/launch/netns_cluster.sh --learner_rate 200mbit --link 5000:0 --duration_s 60
#   sudo tools/launch/netns_cluster.sh --bench_only          # verbs_bench across two hosts
#   sudo tools/launch/netns_cluster.sh --bench_only --bench_tool replay_bench \
#        --bench_flag --actors=0 --bench_flag --link=10km-25g   # replay_bench across two hosts
#   sudo tools/launch/netns_cluster.sh --sites 2 --actors 3 --train_steps 500   # edge sites
#
# Topology (addresses in --subnet, default 10.77.0.0/24):
#   buffer  .1  eth0 --- p-buffer \
#   learner .2  eth0 --- p-learner -- br0 (namespace "switch")
#   actor-i .1i eth0 --- p-actor<i> /
#   buffer<k> .(2+k) eth0 --- p-buffer<k>   (--sites N: sites 1..N-1)
#
# Edge sites (--sites N, 1 to 8): N buffer nodes, each in its own namespace
# (site 0's is "buffer"), actor i writing to site i mod N, and the learner
# over all of them (learner --servers; pass --learner_flag
# --shard_policy=... to choose how it samples, docs/edge-sites.md). Each site
# has its own server log, port and metrics (server-<k>.*), and its counters
# are checked on their own (counters-site-<k>.txt).
# --learner_rate shapes the learner's link in both directions with a token
# bucket (tc tbf on the learner's eth0 and on p-learner); the delay comes from
# the soft provider's link model (--link on the learner, DELAY_US:GBPS; use
# DELAY_US:0 so the bucket alone sets the bandwidth), since tc netem may not
# exist in this kernel.
#
# What it runs: the server listens on the buffer namespace's address (port
# chosen by the OS, --port_file) with Prometheus metrics on the same address;
# the learner and the actors connect to it from their namespaces. When the
# learner ends (--train_steps or --duration_s), the actors are stopped, the
# server's metrics are scraped once ingest has caught up (server_metrics.prom)
# and the server is stopped. With --bench (or --bench_only), `verbs_bench
# --server` runs in the buffer namespace and `verbs_bench --connect` in the
# learner's, over the shaped link (bench.json); with --bench_tool
# replay_bench, `replay_bench --server` and `replay_bench --connect`, both
# with every --bench_flag (the two ends must describe one layout).
#
# Output (--out_dir, default a new directory in /tmp): server.log,
# learner.log, actor-<i>.log, metrics.jsonl (the learner's --metrics_out),
# server_metrics.prom, topology.txt (namespaces, addresses, qdiscs),
# bench-server.log, bench.json, counters.txt (KEY=VALUE: what the script
# checked, see check_counters).
#
# Exit status: 0 when the run completed and the counters add up, 1 on any
# failure, 2 on a usage error, 130 after Ctrl-C. Every process started here
# is stopped and every namespace made here is deleted on exit, failure, Ctrl-C
# and SIGTERM. Namespaces are named dreplay-<pid>-<n>-<host>, unique per run;
# --clean_stale deletes those of runs whose script is no longer alive.
set -uo pipefail
# Daemons and network tools live in sbin, which a test's PATH may lack.
export PATH=$PATH:/usr/sbin:/sbin

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PLAN=$(cd "$(dirname "$0")" && pwd)/launch_plan.py
PYTHON=${DREPLAY_PYTHON:-python3}

# ---- options ---------------------------------------------------------------
ACTORS=2
SITES=1
OUT_DIR=""
BIN_DIR=${DREPLAY_BIN_DIR:-}
PROVIDER=soft
LINK=10km-25g
LEARNER_RATE=""
LEARNER_BURST=64kb
SUBNET=10.77.0
TRAIN_STEPS=0
DURATION_S=20
# The run's hyper-parameters and sizes: the launch plan's (tools/launch/launch_plan.py)
# defaults, with what is given here.
PLAN_ARGS=()
BENCH=0
BENCH_ONLY=0
BENCH_TOOL=verbs_bench
# verbs_bench's defaults; --bench_flag adds to them (the last of a flag wins).
VERBS_BENCH_DEFAULTS=(--op=read --size=16384 --depth=8 --duration_s=1 --warmup_s=0.2)
BENCH_ARGS=()
SERVER_FLAGS=()
ACTOR_FLAGS=()
LEARNER_FLAGS=()
START_TIMEOUT_S=30
STOP_GRACE_S=5
# How long past --duration_s the learner may take (start, final evaluation).
LEARNER_SLACK_S=60

usage() {
  sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
  cat <<EOF
Options:
  --actors N            actor namespaces and processes (default $ACTORS)
  --sites N             edge sites: buffer nodes, actor i at site i mod N (1 to 8; default $SITES)
  --out_dir DIR         logs and results (default: a new directory in /tmp)
  --bin_dir DIR         built binaries (default: bazel-out/k8-opt/bin, else bazel-bin)
  --provider P          RDMA provider of every process (default $PROVIDER)
  --link SPEC           learner's emulated link, soft provider (default $LINK)
  --learner_rate RATE   tc tbf rate on the learner's link, e.g. 200mbit (default: none)
  --learner_burst SIZE  tc tbf burst (default $LEARNER_BURST)
  --subnet A.B.C        the /24 the namespaces use (default $SUBNET)
  --train_steps N       learner stops after N train steps (default: none)
  --duration_s S        learner stops after S seconds (default $DURATION_S; 0: none)
  --actor_rate R        env steps/s per actor (0: unlimited)
  --env NAME --seed N --batch_size N --capacity N --min_replay N
                        the run's plan (defaults: tools/launch/launch_plan.py --help)
  --server_flag F, --actor_flag F, --learner_flag F   extra flags (repeatable)
  --bench               also run verbs_bench between the buffer and learner namespaces
  --bench_only          only that
  --bench_tool T        verbs_bench (default) or replay_bench
  --bench_flag F        extra flag (repeatable): verbs_bench --connect's, or both
                        replay_bench ends'
  --clean_stale         delete namespaces left by dead runs of this script, then exit
EOF
}

die_usage() {
  echo "netns_cluster: $1" >&2
  exit 2
}

log() { echo "netns_cluster: $*" >&2; }

CLEAN_STALE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --bench|--bench_only|--clean_stale|-h|--help) ;;
    --*=*) set -- "${1%%=*}" "${1#*=}" "${@:2}" ;;
    *) [ $# -ge 2 ] || die_usage "$1 needs a value" ;;
  esac
  case "$1" in
    --actors) ACTORS=$2; shift ;;
    --sites) SITES=$2; shift ;;
    --out_dir) OUT_DIR=$2; shift ;;
    --bin_dir) BIN_DIR=$2; shift ;;
    --provider) PROVIDER=$2; shift ;;
    --link) LINK=$2; shift ;;
    --learner_rate) LEARNER_RATE=$2; shift ;;
    --learner_burst) LEARNER_BURST=$2; shift ;;
    --subnet) SUBNET=$2; shift ;;
    --train_steps) TRAIN_STEPS=$2; shift ;;
    --duration_s) DURATION_S=$2; shift ;;
    --actor_rate|--env|--seed|--batch_size|--capacity|--min_replay) PLAN_ARGS+=("$1=$2"); shift ;;
    --server_flag) SERVER_FLAGS+=("$2"); shift ;;
    --actor_flag) ACTOR_FLAGS+=("$2"); shift ;;
    --learner_flag) LEARNER_FLAGS+=("$2"); shift ;;
    --bench) BENCH=1 ;;
    --bench_only) BENCH=1; BENCH_ONLY=1 ;;
    --bench_flag) BENCH_ARGS+=("$2"); shift ;;
    --bench_tool) BENCH_TOOL=$2; shift ;;
    --clean_stale) CLEAN_STALE=1 ;;
    -h|--help) usage; exit 0 ;;
    *) die_usage "unknown argument: $1 (see --help)" ;;
  esac
  shift
done

is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }
is_uint "$ACTORS" && [ "$ACTORS" -ge 1 ] && [ "$ACTORS" -le 200 ] ||
  die_usage "--actors must be in [1, 200], got '$ACTORS'"
is_uint "$SITES" && [ "$SITES" -ge 1 ] && [ "$SITES" -le 8 ] ||
  die_usage "--sites must be in [1, 8], got '$SITES'"
[ "$ACTORS" -ge "$SITES" ] || die_usage "--sites $SITES needs at least as many --actors"
is_uint "$TRAIN_STEPS" || die_usage "--train_steps must be an integer >= 0, got '$TRAIN_STEPS'"
[[ "$DURATION_S" =~ ^[0-9]+([.][0-9]+)?$ ]] ||
  die_usage "--duration_s must be a number >= 0, got '$DURATION_S'"
[[ "$SUBNET" =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] ||
  die_usage "--subnet must be A.B.C (a /24), got '$SUBNET'"
if [ "$BENCH_ONLY" -eq 0 ] && [ "$TRAIN_STEPS" -eq 0 ] && [ "$DURATION_S" = 0 ]; then
  die_usage "give --train_steps or --duration_s (the learner needs a budget)"
fi

# The namespaces of this run: dreplay-<pid>-<n>-<host>; n tells apart runs of
# a recycled pid whose namespaces were left behind by a SIGKILL.
RUN_ID="$$-$(date +%s%N | tail -c 7)"

clean_stale() {
  local ns pid
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^dreplay-[0-9]*-'); do
    pid=${ns#dreplay-}
    pid=${pid%%-*}
    if ! kill -0 "$pid" 2>/dev/null; then
      kill_namespace_pids "$ns"
      ip netns del "$ns" 2>/dev/null && log "deleted stale namespace $ns"
    fi
  done
}

# SIGKILL to what still runs in a namespace this script made (its own
# children, or theirs).
kill_namespace_pids() {
  local p
  for p in $(ip netns pids "$1" 2>/dev/null); do
    kill -KILL "$p" 2>/dev/null
  done
}

if [ "$(id -u)" -ne 0 ]; then
  log "needs root (network namespaces, veth, tc); run: sudo $0 $*"
  exit 1
fi
if ! ip netns list >/dev/null 2>&1; then
  log "'ip netns' is not available (install iproute2)"
  exit 1
fi
if [ "$CLEAN_STALE" -eq 1 ]; then
  clean_stale
  exit 0
fi

if [ -z "$BIN_DIR" ]; then
  if [ -d "$ROOT/bazel-out/k8-opt/bin" ]; then BIN_DIR=$ROOT/bazel-out/k8-opt/bin; else BIN_DIR=$ROOT/bazel-bin; fi
fi
SERVER_BIN=$BIN_DIR/replay_server/replay_server
ACTOR_BIN=$BIN_DIR/actor_client/actor
LEARNER_BIN=$BIN_DIR/learner_client/learner
CREDENTIALS_BIN=$BIN_DIR/replay_server/actor_credentials
case "$BENCH_TOOL" in
  verbs_bench) BENCH_ARGS=("${VERBS_BENCH_DEFAULTS[@]}" "${BENCH_ARGS[@]}") ;;
  replay_bench) ;;
  *) die_usage "--bench_tool $BENCH_TOOL: expected verbs_bench or replay_bench" ;;
esac
BENCH_BIN=$BIN_DIR/tools/bench/$BENCH_TOOL
need=("$BENCH_BIN")
[ "$BENCH_ONLY" -eq 1 ] || need=("$SERVER_BIN" "$ACTOR_BIN" "$LEARNER_BIN" "$CREDENTIALS_BIN")
[ "$BENCH" -eq 0 ] || [ "$BENCH_ONLY" -eq 1 ] || need+=("$BENCH_BIN")
for b in "${need[@]}"; do
  if [ ! -x "$b" ]; then
    log "$b not found: bazel build //replay_server:replay_server //actor_client:actor" \
      "//learner_client:learner //replay_server:actor_credentials //tools/bench:$BENCH_TOOL," \
      "or give --bin_dir"
    exit 1
  fi
done

[ -n "$OUT_DIR" ] || OUT_DIR=$(mktemp -d /tmp/dreplay-netns-XXXXXX)
mkdir -p "$OUT_DIR" || exit 1
OUT_DIR=$(cd "$OUT_DIR" && pwd)

# ---- teardown ----------------------------------------------------------------
NAMESPACES=()   # made by this run, deleted on exit
PIDS=()         # started by this run (name:pid), stopped on exit
declare -A PID_OF

stop_pids() {  # stop_pids NAME...: SIGTERM, then SIGKILL after STOP_GRACE_S
  local name pid live deadline
  live=()
  for name in "$@"; do
    pid=${PID_OF[$name]:-}
    [ -n "$pid" ] || continue
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null
      live+=("$name")
    fi
  done
  deadline=$((SECONDS + STOP_GRACE_S))
  for name in "${live[@]}"; do
    pid=${PID_OF[$name]}
    while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      log "$name (pid $pid) did not stop within ${STOP_GRACE_S}s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null
    fi
  done
  for name in "${live[@]}"; do
    wait "${PID_OF[$name]}" 2>/dev/null
  done
}

cleanup() {
  local rc=$?
  trap '' INT TERM
  local names=()
  for entry in "${PIDS[@]}"; do names+=("${entry%%:*}"); done
  [ "${#names[@]}" -eq 0 ] || stop_pids "${names[@]}"
  local ns
  for ns in "${NAMESPACES[@]}"; do
    kill_namespace_pids "$ns"
    ip netns del "$ns" 2>/dev/null || log "could not delete namespace $ns"
  done
  [ "${#NAMESPACES[@]}" -eq 0 ] || log "removed ${#NAMESPACES[@]} namespaces"
  exit "$rc"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT
trap 'log "terminated"; exit 143' TERM

fail() {
  log "error: $*"
  exit 1
}

# ---- topology ----------------------------------------------------------------
ns_name() { echo "dreplay-${RUN_ID}-$1"; }
SWITCH=$(ns_name switch)

add_namespace() {
  ip netns add "$1" || fail "ip netns add $1 failed"
  NAMESPACES+=("$1")
  ip -n "$1" link set lo up || fail "lo up in $1 failed"
}

# add_host HOST ADDRESS: a namespace for HOST with eth0 = ADDRESS/24, its
# veth peer p-HOST on the switch's bridge. Neither end of the pair ever
# appears in the root namespace, so no name there can collide.
declare -A ADDR_OF
declare -A SERVER_ADDRESS_OF METRICS_ADDRESS_OF
add_host() {
  local host=$1 addr=$2 ns
  ns=$(ns_name "$host")
  add_namespace "$ns"
  ip link add eth0 netns "$ns" type veth peer name "p-$host" netns "$SWITCH" ||
    fail "veth for $host failed"
  ip -n "$SWITCH" link set "p-$host" master br0 up || fail "bridge port p-$host failed"
  ip -n "$ns" addr add "$addr/24" dev eth0 || fail "address $addr on $host failed"
  ip -n "$ns" link set eth0 up || fail "eth0 up on $host failed"
  ADDR_OF[$host]=$addr
}

shape_learner_link() {
  [ -n "$LEARNER_RATE" ] || return 0
  local ns
  ns=$(ns_name learner)
  # Both directions: learner -> buffer leaves the learner's eth0, buffer ->
  # learner (the batches) leaves the switch's port towards the learner.
  tc -n "$ns" qdisc add dev eth0 root tbf rate "$LEARNER_RATE" burst "$LEARNER_BURST" \
    latency 100ms || fail "tc tbf on the learner's eth0 failed (rate $LEARNER_RATE)"
  tc -n "$SWITCH" qdisc add dev p-learner root tbf rate "$LEARNER_RATE" \
    burst "$LEARNER_BURST" latency 100ms || fail "tc tbf on p-learner failed"
}

make_topology() {
  add_namespace "$SWITCH"
  ip -n "$SWITCH" link add br0 type bridge || fail "bridge failed"
  ip -n "$SWITCH" link set br0 up || fail "bridge up failed"
  add_host buffer "$SUBNET.1"
  add_host learner "$SUBNET.2"
  if [ "$BENCH_ONLY" -eq 0 ]; then
    local i k
    for ((k = 1; k < SITES; k++)); do add_host "buffer$k" "$SUBNET.$((2 + k))"; done
    for ((i = 0; i < ACTORS; i++)); do add_host "actor$i" "$SUBNET.$((10 + i))"; done
  fi
  shape_learner_link
  {
    echo "run $RUN_ID, subnet $SUBNET.0/24, bridge br0 in $SWITCH"
    local h
    for h in "${!ADDR_OF[@]}"; do echo "$h $(ns_name "$h") ${ADDR_OF[$h]}"; done | sort
    echo "learner link: rate ${LEARNER_RATE:-unshaped}, soft link model ${LINK}"
    tc -n "$(ns_name learner)" qdisc show dev eth0
    tc -n "$SWITCH" qdisc show dev p-learner
  } >"$OUT_DIR/topology.txt"
  log "namespaces up (${#NAMESPACES[@]}); topology in $OUT_DIR/topology.txt"
}

# in_host HOST NAME LOG ARGV...: starts ARGV in HOST's namespace, in the
# background, logging to LOG. `ip netns exec` execs ARGV, so the pid is the
# binary's.
in_host() {
  local host=$1 name=$2 logfile=$3
  shift 3
  echo "$*" >"$logfile"
  ip netns exec "$(ns_name "$host")" "$@" >>"$logfile" 2>&1 </dev/null &
  PID_OF[$name]=$!
  PIDS+=("$name:$!")
}

alive() { kill -0 "${PID_OF[$1]}" 2>/dev/null; }

# wait_for_file FILE WHO TIMEOUT_S: until FILE is non-empty, WHO still alive.
wait_for_file() {
  local file=$1 who=$2 deadline=$((SECONDS + $3))
  while [ ! -s "$file" ]; do
    alive "$who" || fail "$who exited before writing $file:
$(tail -n 15 "$OUT_DIR/$who.log" 2>/dev/null)"
    [ "$SECONDS" -lt "$deadline" ] || fail "$who did not write $file within $3 s"
    sleep 0.05
  done
}

# ---- verbs_bench (or replay_bench) between two namespaces ----------------------
run_bench() {
  local buffer_addr=${ADDR_OF[buffer]} port sink_port="" deadline baseline=0 a
  local server_flags=() client_flags=()
  if [ "$BENCH_TOOL" = replay_bench ]; then
    # Both ends describe the same server (layout, provider, link release).
    server_flags=("${BENCH_ARGS[@]}")
  else
    server_flags=(--server_clients=1)
    # --baseline=tcp: the TCP stream crosses the same link as the benchmark,
    # to a sink the server runs in the buffer namespace.
    for a in "${BENCH_ARGS[@]}"; do [ "$a" != "--baseline=tcp" ] || baseline=1; done
    [ "$baseline" -eq 0 ] || server_flags+=(--baseline=tcp)
  fi
  in_host buffer bench-server "$OUT_DIR/bench-server.log" "$BENCH_BIN" --server \
    --host="$buffer_addr" --port=0 --provider="$PROVIDER" "${server_flags[@]}"
  deadline=$((SECONDS + START_TIMEOUT_S))
  port=""
  while [ -z "$port" ]; do
    port=$(sed -n 's/.*server.*listening on [0-9.]*:\([0-9]*\).*/\1/p' "$OUT_DIR/bench-server.log")
    [ -n "$port" ] && break
    alive bench-server || fail "$BENCH_TOOL --server exited:
$(tail -n 15 "$OUT_DIR/bench-server.log")"
    [ "$SECONDS" -lt "$deadline" ] || fail "$BENCH_TOOL --server did not listen"
    sleep 0.05
  done
  if [ "$baseline" -eq 1 ]; then
    sink_port=$(sed -n 's/.*tcp sink on [0-9.]*:\([0-9]*\).*/\1/p' "$OUT_DIR/bench-server.log")
    [ -n "$sink_port" ] || fail "verbs_bench --server printed no TCP sink"
    client_flags+=(--tcp_sink="$buffer_addr:$sink_port")
  fi
  log "$BENCH_TOOL: learner -> $buffer_addr:$port ${BENCH_ARGS[*]} ${client_flags[*]}"
  if ! ip netns exec "$(ns_name learner)" "$BENCH_BIN" --connect="$buffer_addr:$port" \
    --provider="$PROVIDER" --json "${BENCH_ARGS[@]}" "${client_flags[@]}" >"$OUT_DIR/bench.json" \
    2>"$OUT_DIR/bench-client.log" </dev/null; then
    fail "$BENCH_TOOL --connect failed:
$(tail -n 15 "$OUT_DIR/bench-client.log")"
  fi
  stop_pids bench-server
  log "$BENCH_TOOL: $(cat "$OUT_DIR/bench.json")"
}

# ---- training ------------------------------------------------------------------
# make_credentials DIR: a fresh token for this run in DIR/token, and each
# actor's own credential in DIR/actor-<i>.credential (all mode 0600), so
# that no actor can claim another's id.
make_credentials() {
  local dir=$1
  (umask 077 && mkdir -p "$dir" &&
    head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/token") ||
    fail "cannot write a token in $dir"
  "$CREDENTIALS_BIN" --token_file="$dir/token" --actors="$ACTORS" --out_dir="$dir" \
    >"$OUT_DIR/credentials.log" 2>&1 || fail "actor_credentials failed:
$(tail -n 5 "$OUT_DIR/credentials.log")"
}

# make_plan: the components' flags from the launch plan, into SERVER_ARGS,
# LEARNER_ARGS and ACTOR_ARGS (the plan's files are in OUT_DIR/plan).
make_plan() {
  local budget=()
  [ "$TRAIN_STEPS" -eq 0 ] || budget+=(--train_steps="$TRAIN_STEPS")
  [ "$DURATION_S" = 0 ] || budget+=(--duration_s="$DURATION_S")
  "$PYTHON" "$PLAN" --bin_dir="$BIN_DIR" --write="$OUT_DIR/plan" --actors="$ACTORS" \
    --provider="$PROVIDER" --link="$LINK" --replay_placement=buffer --eval_episodes=5 \
    --eval_interval_s=10 --progress_interval_s=2 --probe_size=256 "${budget[@]}" \
    "${PLAN_ARGS[@]}" 2>"$OUT_DIR/plan.log" || fail "the launch plan failed:
$(cat "$OUT_DIR/plan.log")"
  mapfile -t SERVER_ARGS <"$OUT_DIR/plan/server.args"
  mapfile -t LEARNER_ARGS <"$OUT_DIR/plan/learner.args"
  mapfile -t ACTOR_ARGS <"$OUT_DIR/plan/actor.args"
}

# site_host K / site_name K: site K's namespace host and its server's name
# (one site: "buffer" and "server", as before).
site_host() { if [ "$1" -eq 0 ]; then echo buffer; else echo "buffer$1"; fi; }
site_name() { if [ "$SITES" -eq 1 ]; then echo server; else echo "server-$1"; fi; }

# start_server K: site K's replay server; sets SERVER_ADDRESS_OF[K] and
# METRICS_ADDRESS_OF[K].
start_server() {
  local k=$1 host name addr
  host=$(site_host "$k")
  name=$(site_name "$k")
  addr=${ADDR_OF[$host]}
  in_host "$host" "$name" "$OUT_DIR/$name.log" "$SERVER_BIN" "${SERVER_ARGS[@]}" \
    --listen="$addr:0" --port_file="$OUT_DIR/$name.port" \
    --metrics_listen="$addr:0" --metrics_port_file="$OUT_DIR/$name.metrics_port" \
    --stats_interval_s=2 --auth_token_file="$OUT_DIR/credentials/token" "${SERVER_FLAGS[@]}"
  wait_for_file "$OUT_DIR/$name.port" "$name" "$START_TIMEOUT_S"
  wait_for_file "$OUT_DIR/$name.metrics_port" "$name" "$START_TIMEOUT_S"
  SERVER_ADDRESS_OF[$k]=$addr:$(cat "$OUT_DIR/$name.port")
  METRICS_ADDRESS_OF[$k]=$addr:$(cat "$OUT_DIR/$name.metrics_port")
  log "replay server $name listening on ${SERVER_ADDRESS_OF[$k]} (metrics on ${METRICS_ADDRESS_OF[$k]})"
}

run_training() {
  local credentials=$OUT_DIR/credentials
  make_credentials "$credentials"
  make_plan

  local k servers=() names=() learner_target
  for ((k = 0; k < SITES; k++)); do
    start_server "$k"
    servers+=("${SERVER_ADDRESS_OF[$k]}")
    names+=("$(site_name "$k")")
  done
  if [ "$SITES" -eq 1 ]; then
    learner_target=--server=${servers[0]}
  else
    learner_target=--servers=$(IFS=,; echo "${servers[*]}")
  fi
  in_host learner learner "$OUT_DIR/learner.log" "$LEARNER_BIN" "${LEARNER_ARGS[@]}" \
    "$learner_target" --auth_token_file="$credentials/token" \
    --metrics_out="$OUT_DIR/metrics.jsonl" "${LEARNER_FLAGS[@]}"
  local i actors=()
  for ((i = 0; i < ACTORS; i++)); do
    in_host "actor$i" "actor-$i" "$OUT_DIR/actor-$i.log" "$ACTOR_BIN" "${ACTOR_ARGS[@]}" \
      --server="${SERVER_ADDRESS_OF[$((i % SITES))]}" \
      --auth_token_file="$credentials/actor-$i.credential" \
      --actor_index=$i --num_actors="$ACTORS" "${ACTOR_FLAGS[@]}"
    actors+=("actor-$i")
  done
  log "learner and $ACTORS actors started ($SITES site(s)); logs in $OUT_DIR"

  local limit=0
  [ "$DURATION_S" = 0 ] || limit=$((${DURATION_S%.*} + LEARNER_SLACK_S))
  local start=$SECONDS name
  while alive learner; do
    for name in "${names[@]}" "${actors[@]}"; do
      alive "$name" || fail "$name exited while the learner ran:
$(tail -n 15 "$OUT_DIR/$name.log")"
    done
    if [ "$limit" -gt 0 ] && [ $((SECONDS - start)) -gt "$limit" ]; then
      fail "the learner did not finish within ${limit} s"
    fi
    sleep 0.2
  done
  wait "${PID_OF[learner]}"
  local learner_rc=$?
  [ "$learner_rc" -eq 0 ] || fail "learner exited with code $learner_rc:
$(tail -n 15 "$OUT_DIR/learner.log")"
  log "learner done; stopping the actors"
  stop_pids "${actors[@]}"
  check_counters
  stop_pids "${names[@]}"
}

# The counters across hosts (tools/launch/cluster_counters.py): what the actors
# committed is what the server inserted or dropped as overrun or torn; the
# learner trained and its priority updates reached the server. The server's
# metrics are fetched from the learner's namespace.
check_counters() {
  local k
  for ((k = 0; k < SITES; k++)); do
    ip netns exec "$(ns_name learner)" "$PYTHON" "$ROOT/tools/launch/cluster_counters.py" \
      --out_dir="$OUT_DIR" --actors="$ACTORS" --sites="$SITES" --site="$k" \
      --metrics_url="http://${METRICS_ADDRESS_OF[$k]}/metrics" \
      >&2 || fail "the counters of site $k do not add up (see above and $OUT_DIR)"
  done
}

make_topology
[ "$BENCH" -eq 0 ] || run_bench
[ "$BENCH_ONLY" -eq 1 ] || run_training
log "done; results in $OUT_DIR"
exit 0
