#!/usr/bin/env bash
# One dreplay process of a Slurm job, on its compute node: started by
# tools/launch/slurm/dreplay.sbatch through srun, it adds what only the node knows to
# the binary's flags and execs it (so srun's signals reach the binary).
#
#   task.sh server  JOB_DIR BINARY [FLAGS...]   the buffer node (one per task)
#   task.sh actor   JOB_DIR BINARY [FLAGS...]   one actor per srun task
#   task.sh learner JOB_DIR BINARY [FLAGS...]
#
# server: listens on this node's address (DREPLAY_IFACE's IPv4 address when
#   set, e.g. the RoCE NIC's netdev; else the first IPv4 address the node's
#   hostname resolves to) on DREPLAY_PORT (default 0: the OS picks one), and
#   serves Prometheus metrics on the same address, port DREPLAY_METRICS_PORT
#   (default 0). It writes JOB_DIR/server.host (the address)
#   before it starts; the server itself writes JOB_DIR/server.port and
#   JOB_DIR/server.metrics_port once it listens. With several buffer node
#   tasks (edge sites) the files are server-RANK.host and so on.
#   With JOB_DIR/servers.txt (edge sites: one address per line), actor RANK
#   writes to line RANK mod their number (--server).
# actor: --actor_index is the task's rank in its step (SLURM_PROCID) and
#   --num_actors the step's task count (SLURM_NTASKS); its token is its own
#   credential, JOB_DIR/credentials/actor-RANK.credential.
# Every task appends "ROLE RANK SLURMD_NODENAME HOSTNAME GPUS" to
# JOB_DIR/nodes.txt (GPUS: CUDA_VISIBLE_DEVICES as Slurm set it, or -).
set -euo pipefail

die() {
  echo "task.sh: $*" >&2
  exit 1
}

[ $# -ge 3 ] || die "usage: task.sh server|actor|learner JOB_DIR BINARY [FLAGS...]"
role=$1
job_dir=$2
shift 2
[ -d "$job_dir" ] || die "no job directory $job_dir (is it on a file system every node shares?)"
[ -x "$1" ] || die "$1 is not an executable on $(hostname) (build dreplay on a shared file system)"
rank=${SLURM_PROCID:-0}
echo "$role $rank ${SLURMD_NODENAME:-?} $(hostname) ${CUDA_VISIBLE_DEVICES:--}" \
  >>"$job_dir/nodes.txt"

node_address() {
  local addr=""
  if [ -n "${DREPLAY_IFACE:-}" ]; then
    addr=$(ip -4 -o addr show dev "$DREPLAY_IFACE" 2>/dev/null | awk '{print $4}' | cut -d/ -f1 |
      head -n 1)
    [ -n "$addr" ] || die "interface $DREPLAY_IFACE has no IPv4 address on $(hostname)"
  else
    addr=$(getent ahostsv4 "$(hostname)" | awk 'NR == 1 {print $1}')
    [ -n "$addr" ] || die "$(hostname) resolves to no IPv4 address; give --iface"
  fi
  echo "$addr"
}

case "$role" in
  server)
    name=server
    [ "${SLURM_NTASKS:-1}" -eq 1 ] || name=server-$rank
    addr=$(node_address)
    case "$addr" in
      127.*) echo "task.sh: the buffer node listens on $addr, which only this node reaches;" \
        "give --iface when the job spans several hosts" >&2 ;;
    esac
    echo "$addr" >"$job_dir/$name.host.tmp"
    mv "$job_dir/$name.host.tmp" "$job_dir/$name.host"
    exec "$@" --listen="$addr:${DREPLAY_PORT:-0}" --port_file="$job_dir/$name.port" \
      --metrics_listen="$addr:${DREPLAY_METRICS_PORT:-0}" \
      --metrics_port_file="$job_dir/$name.metrics_port"
    ;;
  actor)
    credential=$job_dir/credentials/actor-$rank.credential
    [ -f "$credential" ] || die "no credential $credential for actor $rank"
    site=()
    if [ -s "$job_dir/servers.txt" ]; then
      mapfile -t servers <"$job_dir/servers.txt"
      site=(--server="${servers[$((rank % ${#servers[@]}))]}")
    fi
    exec "$@" "${site[@]}" --actor_index="$rank" --num_actors="${SLURM_NTASKS:-1}" \
      --auth_token_file="$credential"
    ;;
  learner)
    exec "$@"
    ;;
  *)
    die "unknown role '$role' (server, actor or learner)"
    ;;
esac
