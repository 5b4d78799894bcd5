#!/usr/bin/env bash
# A throw-away Slurm cluster on this machine, as root, for trying and testing
# tools/launch/slurm/ without a real cluster: munged, slurmctld and one slurmd per
# virtual node (dn0, dn1, ...), all on 127.0.0.1, with a generated munge key
# and slurm.conf in DIR. Nothing outside DIR is written.
#
#   sudo tools/launch/slurm/local_cluster.sh start DIR [--nodes N] [--cpus C] [--gpu]
#   export SLURM_CONF=DIR/slurm.conf           # then sbatch, squeue, ... as usual
#   sudo tools/launch/slurm/local_cluster.sh stop DIR
#
# Why several virtual nodes: Slurm's backfill scheduler, the only one that
# starts heterogeneous jobs, reserves whole nodes, so the components of one
# heterogeneous job never share a node; each of dreplay's three components
# (buffer node, actors, learner) needs its own. Each slurmd declares C CPUs
# (SlurmdParameters=config_overrides: more than the machine has is fine).
# With --gpu the last node also declares one GPU (a stand-in, /dev/null, for
# scheduling only: Slurm sets CUDA_VISIBLE_DEVICES in the task) and a larger
# weight, so that jobs without a GPU are placed on the other nodes first.
#
# start: waits until every node is idle (exit 0), or stops what it started
# and exits 1 with the daemons' last log lines. stop: cancels the cluster's
# jobs, then stops the daemons whose pid files are in DIR (SIGTERM, then
# SIGKILL) and leaves DIR (logs) in place. Needs munge, slurmctld, slurmd and
# slurm-client (Debian's slurm-wlm; tools/install_deps.sh).
set -uo pipefail
# Daemons and network tools live in sbin, which a test's PATH may lack.
export PATH=$PATH:/usr/sbin:/sbin

START_TIMEOUT_S=60
STOP_GRACE_S=10

die() {
  echo "local_cluster: $*" >&2
  exit 2
}

[ $# -ge 2 ] || die "usage: local_cluster.sh start|stop DIR [--nodes N] [--cpus C] [--gpu]"
action=$1
dir=$2
shift 2
NODES=3
CPUS=4
GPU=0
while [ $# -gt 0 ]; do
  case "$1" in
    --gpu) GPU=1 ;;
    --nodes) NODES=${2:-}; shift ;;
    --cpus) CPUS=${2:-}; shift ;;
    *) die "unknown option: $1" ;;
  esac
  shift
done
[[ "$NODES" =~ ^[1-9][0-9]?$ ]] || die "--nodes must be in [1, 99], got '$NODES'"
[[ "$CPUS" =~ ^[1-9][0-9]*$ ]] || die "--cpus must be a positive integer, got '$CPUS'"

# stop_pidfile FILE: SIGTERM to the daemon whose pid FILE holds, SIGKILL
# after STOP_GRACE_S.
stop_pidfile() {
  local pid deadline
  [ -s "$1" ] || return 0
  pid=$(cat "$1")
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  kill -TERM "$pid" 2>/dev/null || { rm -f "$1"; return 0; }
  deadline=$((SECONDS + STOP_GRACE_S))
  while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "local_cluster: pid $pid ($1) did not stop: SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null
  fi
  rm -f "$1"
}

stop_cluster() {
  if [ -f "$dir/slurm.conf" ] && [ -s "$dir/slurmctld.pid" ]; then
    SLURM_CONF=$dir/slurm.conf timeout 10 scancel --full --quiet --user=root 2>/dev/null
  fi
  local f
  for f in "$dir"/slurmd-*.pid; do [ -e "$f" ] && stop_pidfile "$f"; done
  stop_pidfile "$dir/slurmctld.pid"
  stop_pidfile "$dir/munge/munged.pid"
}

if [ "$action" = stop ]; then
  [ -d "$dir" ] || die "no directory $dir"
  stop_cluster
  exit 0
fi
[ "$action" = start ] || die "unknown action '$action' (start or stop)"
[ "$(id -u)" -eq 0 ] || die "needs root (the daemons run as root here)"
for b in munged munge slurmctld slurmd sinfo scancel; do
  command -v "$b" >/dev/null || die "$b not found: install munge and slurm-wlm (tools/install_deps.sh)"
done

mkdir -p "$dir" || die "cannot make $dir"
dir=$(cd "$dir" && pwd)
if [ -s "$dir/slurmctld.pid" ] && kill -0 "$(cat "$dir/slurmctld.pid")" 2>/dev/null; then
  die "a cluster already runs in $dir (stop it first)"
fi
# munged insists that every directory above its socket be searchable by all
# and that its key be readable by its user only.
chmod 711 "$dir"
d=$(dirname "$dir")
while [ "$d" != / ]; do
  [ -n "$(find "$d" -maxdepth 0 -perm -o+x)" ] ||
    die "munged needs every directory above its socket searchable by all: chmod o+x $d, or" \
      "use a directory under /tmp"
  d=$(dirname "$d")
done
mkdir -p "$dir/munge" "$dir/state" "$dir/log"
chmod 711 "$dir/munge"
for ((i = 0; i < NODES; i++)); do mkdir -p "$dir/spool/dn$i"; done
if [ ! -s "$dir/munge/munge.key" ]; then
  head -c 1024 /dev/urandom >"$dir/munge/munge.key"
fi
chmod 400 "$dir/munge/munge.key"

fail_start() {
  echo "local_cluster: $*" >&2
  local f
  for f in "$dir/munge/munged.log" "$dir"/log/*.log; do
    [ -e "$f" ] || continue
    echo "--- $f" >&2
    grep -vE 'pmix|PMIx|MPI' "$f" | tail -n 8 >&2
  done
  stop_cluster
  exit 1
}

munged --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
  --pid-file="$dir/munge/munged.pid" --seed-file="$dir/munge/munged.seed" \
  --log-file="$dir/munge/munged.log" || fail_start "munged did not start"

# Free TCP ports for slurmctld and each slurmd, outside the kernel's
# ephemeral range: a port the OS hands out for "any port" (an outgoing
# connection, a bind to port 0) could be taken by another process between
# this check and the daemon's bind, but the OS never hands out these.
read -r -a ports < <(python3 -c '
import random, socket, sys
with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
    eph_low, eph_high = (int(x) for x in f.read().split())
outside = [p for p in range(10000, 65536) if not eph_low <= p <= eph_high]
picked, socks = [], []
for port in random.sample(outside, min(2000, len(outside))):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        s.close()
        continue
    socks.append(s)
    picked.append(port)
    if len(picked) == int(sys.argv[1]):
        break
if len(picked) < int(sys.argv[1]):
    sys.exit(1)
print(" ".join(str(p) for p in picked))' $((NODES + 1))) ||
  fail_start "no free ports"
host=$(hostname -s)
{
  echo "# Generated by tools/launch/slurm/local_cluster.sh: a cluster on this machine only."
  echo "ClusterName=dreplaylocal"
  echo "SlurmctldHost=$host(127.0.0.1)"
  echo "SlurmctldPort=${ports[0]}"
  echo "SlurmUser=root"
  echo "SlurmdUser=root"
  echo "AuthType=auth/munge"
  echo "AuthInfo=socket=$dir/munge/munge.socket"
  echo "CredType=cred/munge"
  echo "StateSaveLocation=$dir/state"
  echo "SlurmdSpoolDir=$dir/spool/%n"
  echo "SlurmctldPidFile=$dir/slurmctld.pid"
  echo "SlurmdPidFile=$dir/slurmd-%n.pid"
  echo "SlurmctldLogFile=$dir/log/slurmctld.log"
  echo "SlurmdLogFile=$dir/log/slurmd-%n.log"
  echo "ProctrackType=proctrack/linuxproc"
  echo "TaskPlugin=task/none"
  echo "SelectType=select/cons_tres"
  echo "SelectTypeParameters=CR_CPU"
  echo "DefMemPerCPU=64"
  echo "SchedulerType=sched/backfill"
  echo "SchedulerParameters=bf_interval=1,bf_hetjob_immediate,sched_min_interval=0"
  echo "ReturnToService=2"
  echo "MpiDefault=none"
  echo "JobAcctGatherType=jobacct_gather/none"
  echo "AccountingStorageType=accounting_storage/none"
  echo "JobCompType=jobcomp/none"
  echo "MailProg=/bin/true"
  echo "SlurmdParameters=config_overrides"
  echo "KillWait=5"
  [ "$GPU" -eq 0 ] || echo "GresTypes=gpu"
  for ((i = 0; i < NODES; i++)); do
    gres=""
    [ "$GPU" -eq 0 ] || [ "$i" -ne $((NODES - 1)) ] || gres=" Gres=gpu:1 Weight=10"
    echo "NodeName=dn$i NodeHostname=$host NodeAddr=127.0.0.1 Port=${ports[$((i + 1))]}" \
      "CPUs=$CPUS RealMemory=$((CPUS * 256)) State=UNKNOWN$gres"
  done
  echo "PartitionName=local Nodes=ALL Default=YES MaxTime=60 DefaultTime=10 State=UP"
} >"$dir/slurm.conf"
export SLURM_CONF=$dir/slurm.conf
# slurmd reads gres.conf next to slurm.conf.
if [ "$GPU" -eq 1 ]; then
  echo "NodeName=dn$((NODES - 1)) Name=gpu File=/dev/null" >"$dir/gres.conf"
else
  rm -f "$dir/gres.conf"
fi

slurmctld -f "$SLURM_CONF" || fail_start "slurmctld did not start"
for ((i = 0; i < NODES; i++)); do
  slurmd -f "$SLURM_CONF" -N "dn$i" || fail_start "slurmd dn$i did not start"
done
deadline=$((SECONDS + START_TIMEOUT_S))
while :; do
  idle=$(sinfo -h -N -o '%N %T' 2>/dev/null | awk '$2 == "idle"' | wc -l)
  [ "$idle" -lt "$NODES" ] || break
  [ "$SECONDS" -lt "$deadline" ] || fail_start "the nodes were not idle within ${START_TIMEOUT_S}s:
$(sinfo -N 2>&1)"
  sleep 0.5
done
echo "local_cluster: $NODES nodes idle; export SLURM_CONF=$SLURM_CONF" >&2
