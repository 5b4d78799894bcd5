#!/bin/bash
# The second stage of tools/rxe_vm/rxe_vm.sh's VM, run by the host's bash as PID 1
# after switch_root: loads rdma_rxe and its dependencies from the unpacked
# kernel tree, creates rxe0 on a dummy netdev (GID 0 is the dummy's link-local
# IPv6 address; no packet leaves the VM), then runs the job's command in the
# checkout and records its exit status in /run/job/rc. Output goes to the
# serial console, which the host prints.
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
job=/run/job
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
# shellcheck source=/dev/null
. "$job/env.sh"   # KERNEL_TREE, KERNEL_VERSION, CHECKOUT, VM_NAME, OUT_SHARED
exec >/dev/console 2>&1
finish() {
  echo "$1" > "$job/rc"
  sync
  echo o > /proc/sysrq-trigger
  read -r -t 5 _ </dev/console  # a builtin: the shared root may be gone
  exit "$1"   # PID 1 exiting panics the kernel, and QEMU (-no-reboot) stops
}
mkdir -p /dev/shm /dev/pts /tmp/home
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t devpts devpts /dev/pts
share() {  # TAG MOUNTPOINT [ro]
  mkdir -p "$2" && mount -t 9p -o "trans=virtio,version=9p2000.L,msize=512000${3:+,$3}" "$1" "$2"
}
# A checkout under /tmp or /run is covered by their tmpfs: mount it again.
case "$CHECKOUT" in
  /tmp|/tmp/*|/run|/run/*) share checkout "$CHECKOUT" ro,cache=loose || finish 125 ;;
esac
mkdir -p /run/out
if [ "$OUT_SHARED" = 1 ]; then share out /run/out || finish 125; fi
for m in crc32_generic udp_tunnel ip6_udp_tunnel ib_core ib_uverbs rdma_rxe dummy veth; do
  if ! modprobe -d "$KERNEL_TREE" -S "$KERNEL_VERSION" "$m"; then
    echo "rxe_vm: cannot load $m"
    finish 125
  fi
done
ip link set lo up
ip link add d0 type dummy && ip link set d0 up &&
  rdma link add rxe0 type rxe netdev d0 || { echo "rxe_vm: cannot create rxe0"; finish 125; }
# The link-local GID appears once IPv6 has configured d0's address.
for _ in $(seq 100); do
  gid=$(cat /sys/class/infiniband/rxe0/ports/1/gids/0 2>/dev/null)
  [ -n "$gid" ] && [ "$gid" != "0000:0000:0000:0000:0000:0000:0000:0000" ] && break
  sleep 0.1
done
if [ -z "$gid" ] || [ "$gid" = "0000:0000:0000:0000:0000:0000:0000:0000" ]; then
  echo "rxe_vm: rxe0 has no GID after 10 s"
  finish 125
fi
echo "rxe_vm: $VM_NAME: kernel $(uname -r), rxe0 on d0, gid[0] $gid"
ulimit -l unlimited
export HOME=/tmp/home
export OUT=/run/out TMPDIR=/tmp
cd "$CHECKOUT" || finish 125
bash "$job/command.sh"
finish $?
