#!/usr/bin/env bash
# Installs every system package dreplay needs to build, test and run, from
# Debian's package registry. Idempotent: when everything is present it only
# checks (about a second) and changes nothing.
#
#   sudo tools/install_deps.sh        # or as root
set -euo pipefail

PACKAGES=(
  # Build
  bazel-bootstrap g++ gcc clang libclang-rt-14-dev clang-format
  # RDMA (rdma-core): libibverbs, librdmacm, the user-space providers
  # (rxe for Soft-RoCE, mlx5 for RoCE NICs) and the rdma/ibv_* tools.
  libibverbs-dev librdmacm-dev ibverbs-providers ibverbs-utils rdma-core iproute2
  # Libraries
  libabsl-dev libgflags-dev libgoogle-glog-dev libgtest-dev libgmock-dev
  libbenchmark-dev libtorch-dev libxxhash-dev
  # Frames compressed on the long link (replay/frame_codec.h)
  libzstd-dev liblz4-dev
  # Metrics: the HTTP server of the /metrics endpoints, and promtool, which
  # the tests run to check the exposition text.
  libmicrohttpd-dev prometheus
  # Authentication: HMAC-SHA256, the CSPRNG and constant-time compare of the
  # handshake's challenge-response (libcrypto).
  libssl-dev
  # Experiments: plots
  python3 python3-matplotlib python3-scipy
  # Clusters: Slurm and its authentication (tools/launch/slurm/, and the single-machine
  # cluster tests/slurm_test starts); tc for tools/launch/netns_cluster.sh's shaping
  # comes with iproute2 above.
  slurm-wlm munge
  # The Python package (python/): pybind11 bindings built against the system
  # Python's headers, NumPy arrays, its pytest tests, and PyTorch for the
  # tensors, the params helpers and the examples' learner and actor.
  python3-dev pybind11-dev python3-numpy python3-pytest python3-torch
  # tools/bench/peer_bench's other systems: Redis (the server it starts, and
  # hiredis), gRPC's C++ library, protobuf, and the code generators its
  # proto goes through.
  redis-server libhiredis-dev libgrpc++-dev libprotobuf-dev protobuf-compiler
  protobuf-compiler-grpc
  # tools/rxe_vm.sh: a QEMU VM (software emulation, no KVM) running Debian's
  # own kernel with the rdma_rxe module, so the ibverbs path runs on a real
  # kernel verbs stack; a busybox initramfs boots it.
  qemu-system-x86 busybox-static cpio kmod
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install_deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "install_deps: missing: ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "install_deps: installing needs root; run: sudo $0" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install_deps: installed ${#missing[@]} packages"
