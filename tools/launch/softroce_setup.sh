#!/usr/bin/env bash
# Sets up Soft-RoCE (the rdma_rxe kernel module) so that the ibverbs provider
# and the "rdma" tests run on a host without an RDMA NIC.
#
#   sudo tools/launch/softroce_setup.sh                 # rxe0 on the default route's interface
#   sudo tools/launch/softroce_setup.sh eth1            # rxe0 on eth1
#   sudo tools/launch/softroce_setup.sh --name rxe1 eth1
#   sudo tools/launch/softroce_setup.sh --remove        # delete rxe0 again
#
# Idempotent: running it again when the link exists only verifies it. Exit
# status: 0 done, 1 usage or environment problem (not root, missing tools,
# unknown interface), 2 the kernel has no rdma_rxe, 3 the device did not come
# up.
set -euo pipefail

readonly EXIT_USAGE=1
readonly EXIT_NO_RXE=2
readonly EXIT_NOT_UP=3

name="rxe0"
iface=""
remove=0

die() {
  local code="$1"
  shift
  echo "softroce_setup: error: $*" >&2
  exit "$code"
}

usage() {
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --remove) remove=1 ;;
    --name)
      [[ $# -ge 2 ]] || die "$EXIT_USAGE" "--name needs a device name"
      name="$2"
      shift
      ;;
    --name=*) name="${1#--name=}" ;;
    -h | --help)
      usage
      exit 0
      ;;
    -*) die "$EXIT_USAGE" "unknown option $1 (see --help)" ;;
    *)
      [[ -z "$iface" ]] || die "$EXIT_USAGE" "more than one interface given: $iface and $1"
      iface="$1"
      ;;
  esac
  shift
done
[[ "$name" =~ ^[A-Za-z0-9_]+$ ]] || die "$EXIT_USAGE" "bad device name \"$name\""

if [[ "$(id -u)" -ne 0 ]]; then
  die "$EXIT_USAGE" "must run as root (try: sudo $0 $*)"
fi
for tool in rdma ip ibv_devices ibv_devinfo; do
  command -v "$tool" >/dev/null 2>&1 ||
    die "$EXIT_USAGE" "'$tool' not found; install iproute2, rdma-core and ibverbs-utils (tools/install_deps.sh does)"
done

# The netdev an existing rxe link named $name is bound to, or nothing.
link_netdev() {
  rdma link show 2>/dev/null |
    awk -v dev="$name" '$1 == "link" && index($2, dev "/") == 1 {
      for (i = 3; i < NF; i++) if ($i == "netdev") { print $(i + 1); exit }
    }'
}

if [[ "$remove" -eq 1 ]]; then
  if [[ -n "$(link_netdev)" ]]; then
    rdma link delete "$name"
    echo "softroce_setup: removed $name"
  else
    echo "softroce_setup: no Soft-RoCE link named $name; nothing to remove"
  fi
  exit 0
fi

# The interface: the argument, else the one the default route uses.
if [[ -z "$iface" ]]; then
  iface="$(ip -o route show default 2>/dev/null |
    awk '{ for (i = 1; i < NF; i++) if ($i == "dev") { print $(i + 1); exit } }')"
  [[ -n "$iface" ]] || die "$EXIT_USAGE" "no default route; name the interface: $0 IFACE"
fi
[[ -e "/sys/class/net/$iface" ]] || die "$EXIT_USAGE" "network interface \"$iface\" does not exist"

# The module: loaded, built in, or loadable.
if [[ ! -d /sys/module/rdma_rxe ]]; then
  if ! command -v modprobe >/dev/null 2>&1; then
    die "$EXIT_NO_RXE" "rdma_rxe is not loaded and modprobe is missing (install kmod); kernel $(uname -r) may not have Soft-RoCE at all. Without it, use the soft provider (--provider=soft)."
  fi
  if ! err="$(modprobe rdma_rxe 2>&1)"; then
    die "$EXIT_NO_RXE" "kernel $(uname -r) has no rdma_rxe module (modprobe said: ${err:-nothing}). Soft-RoCE needs a kernel built with CONFIG_RDMA_RXE; on this host use the soft provider (--provider=soft) instead."
  fi
  echo "softroce_setup: loaded rdma_rxe"
fi

# The link, unless it exists already.
bound="$(link_netdev)"
if [[ -n "$bound" && "$bound" != "$iface" ]]; then
  die "$EXIT_USAGE" "$name already exists on $bound, not $iface; remove it first: $0 --name $name --remove"
fi
if [[ -z "$bound" ]]; then
  rdma link add "$name" type rxe netdev "$iface" ||
    die "$EXIT_NOT_UP" "'rdma link add $name type rxe netdev $iface' failed"
  echo "softroce_setup: added $name on $iface"
else
  echo "softroce_setup: $name already on $iface"
fi

# Verify: libibverbs sees the device and its port becomes active.
ibv_devices | awk 'NR > 2 { print $1 }' | grep -qx "$name" ||
  die "$EXIT_NOT_UP" "ibv_devices does not list $name (is the rxe provider of rdma-core installed? ibverbs-providers)"
state=""
for _ in $(seq 1 50); do
  state="$(ibv_devinfo -d "$name" -i 1 2>/dev/null | awk '$1 == "state:" { print $2; exit }')"
  [[ "$state" == "PORT_ACTIVE" ]] && break
  sleep 0.1
done
[[ "$state" == "PORT_ACTIVE" ]] ||
  die "$EXIT_NOT_UP" "$name port 1 is ${state:-unknown}, not PORT_ACTIVE (is $iface up?)"

echo "softroce_setup: $name on $iface is ready:"
ibv_devinfo -d "$name" -i 1 | grep -E 'hca_id|transport|state|active_mtu|link_layer' | sed 's/^/  /'
gids="/sys/class/infiniband/$name/ports/1/gids"
if [[ -d "$gids" ]]; then
  echo "  RoCE GIDs (index type address):"
  for path in "$gids"/*; do
    index="${path##*/}"
    gid="$(cat "$path" 2>/dev/null || true)"
    [[ -z "$gid" || "$gid" == "0000:0000:0000:0000:0000:0000:0000:0000" ]] && continue
    type="$(cat "/sys/class/infiniband/$name/ports/1/gid_attrs/types/$index" 2>/dev/null || echo "?")"
    echo "    $index $type $gid"
  done
fi
