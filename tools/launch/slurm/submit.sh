#!/usr/bin/env bash
# Submits dreplay as a heterogeneous Slurm job (tools/launch/slurm/dreplay.sbatch):
# the buffer node, N actors and the learner, each component with its own
# resources. Run from the dreplay checkout, on a file system the compute
# nodes share, after `bazel build //replay_server:replay_server
# //actor_client:actor //learner_client:learner`.
#
#   tools/launch/slurm/submit.sh --actors 8 --learner_gres gpu:1 --time 01:00:00 \
#       -- --duration_s 1800 --iface ens1f0np0
#
# Options (before --; everything after -- goes to dreplay.sbatch, see its
# header: the learner's budget, --provider, --iface, --link, ...):
#   --actors N            actor tasks (default 4)
#   --buffer_nodes K      edge sites: K buffer node tasks (default 1); actor r
#                         writes to buffer node r mod K, the learner reads all
#                         of them (learner --servers, docs/edge-sites.md)
#   --actor_cpus N        CPUs per actor task (default 1)
#   --buffer_cpus N       CPUs of the buffer node's task (default 2)
#   --learner_cpus N      CPUs of the learner's task (default 4)
#   --learner_gres GRES   e.g. gpu:1 (default: none)
#   --partition P         for every component (default: the cluster's default)
#   --time T              the job's time limit (default 00:30:00)
#   --buffer_opt O, --actors_opt O, --learner_opt O
#                         one more sbatch option for that component (repeatable),
#                         e.g. --buffer_opt=--nodelist=rack1-n01 --actors_opt=--switches=1
#   --output FILE         the batch script's own output (default dreplay-%j.out)
#   --wait                wait for the job to end; exit with its status
#   --dry_run             print the sbatch command line instead of running it
# Prints the job id (sbatch --parsable); the job directory is
# SUBMIT_DIR/dreplay-JOBID unless --job_dir is given after --.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
ACTORS=4
BUFFER_NODES=1
ACTOR_CPUS=1
BUFFER_CPUS=2
LEARNER_CPUS=4
LEARNER_GRES=""
PARTITION=""
TIME=00:30:00
OUTPUT=dreplay-%j.out
BUFFER_OPTS=()
ACTORS_OPTS=()
LEARNER_OPTS=()
WAIT=0
DRY_RUN=0

die() {
  echo "submit.sh: $*" >&2
  exit 2
}
is_count() { [[ "$1" =~ ^[1-9][0-9]*$ ]]; }

while [ $# -gt 0 ]; do
  case "$1" in
    --) shift; break ;;
    --wait|--dry_run) ;;
    --*=*) set -- "${1%%=*}" "${1#*=}" "${@:2}" ;;
    *) [ $# -ge 2 ] || die "$1 needs a value" ;;
  esac
  case "$1" in
    --actors) ACTORS=$2; shift ;;
    --buffer_nodes) BUFFER_NODES=$2; shift ;;
    --actor_cpus) ACTOR_CPUS=$2; shift ;;
    --buffer_cpus) BUFFER_CPUS=$2; shift ;;
    --learner_cpus) LEARNER_CPUS=$2; shift ;;
    --learner_gres) LEARNER_GRES=$2; shift ;;
    --partition) PARTITION=$2; shift ;;
    --time) TIME=$2; shift ;;
    --buffer_opt) BUFFER_OPTS+=("$2"); shift ;;
    --actors_opt) ACTORS_OPTS+=("$2"); shift ;;
    --learner_opt) LEARNER_OPTS+=("$2"); shift ;;
    --output) OUTPUT=$2; shift ;;
    --wait) WAIT=1 ;;
    --dry_run) DRY_RUN=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option: $1 (dreplay's own arguments go after --)" ;;
  esac
  shift
done
for v in ACTORS BUFFER_NODES ACTOR_CPUS BUFFER_CPUS LEARNER_CPUS; do
  is_count "${!v}" || die "--$(echo "$v" | tr 'A-Z' 'a-z') must be a positive integer, got '${!v}'"
done

[ "$ACTORS" -ge "$BUFFER_NODES" ] || die "--buffer_nodes $BUFFER_NODES needs at least as many --actors"
common=(--time="$TIME")
[ -z "$PARTITION" ] || common+=(--partition="$PARTITION")
buffer=(--ntasks="$BUFFER_NODES" --cpus-per-task="$BUFFER_CPUS" "${common[@]}" "${BUFFER_OPTS[@]}")
actors=(--ntasks="$ACTORS" --cpus-per-task="$ACTOR_CPUS" "${common[@]}" "${ACTORS_OPTS[@]}")
learner=(--ntasks=1 --cpus-per-task="$LEARNER_CPUS" "${common[@]}" "${LEARNER_OPTS[@]}")
[ -z "$LEARNER_GRES" ] || learner+=(--gres="$LEARNER_GRES")
# shellcheck disable=SC2054  # the comma belongs to --export's value
head=(--parsable --job-name=dreplay --output="$OUTPUT"
  --export=ALL,DREPLAY_ROOT="$ROOT")
[ "$WAIT" -eq 0 ] || head+=(--wait)
cmd=(sbatch "${head[@]}" "${buffer[@]}" : "${actors[@]}" : "${learner[@]}"
  "$ROOT/tools/launch/slurm/dreplay.sbatch" --root "$ROOT" "$@")
if [ "$DRY_RUN" -eq 1 ]; then
  printf '%q ' "${cmd[@]}"
  echo
  exit 0
fi
command -v sbatch >/dev/null || die "sbatch not found (install slurm-client, or run on a login node)"
exec "${cmd[@]}"
