#!/bin/busybox sh
# The initramfs' /init of tools/rxe_vm/rxe_vm.sh's VM (busybox). It loads the
# virtio and 9p modules shipped in the initramfs, mounts the host's / read-only
# over virtio-9p, puts tmpfs on /tmp and /run, mounts the job folder (shared
# read-write) on /run/job, and switch_roots into the host's own userland to
# run /run/job/stage2.sh with the host's bash, which mounts /proc, /sys and
# /dev afresh.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
fail() {
  echo "rxe_vm: init: $*" > /dev/console
  poweroff -f
}
for m in $(cat /modules/order); do
  insmod "/modules/$m" || fail "insmod $m failed"
done
mkdir -p /newroot
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose hostroot /newroot ||
  fail "cannot mount the host's / over 9p"
mount -t tmpfs -o mode=1777 tmpfs /newroot/tmp || fail "tmpfs on /tmp"
mount -t tmpfs -o mode=755 tmpfs /newroot/run || fail "tmpfs on /run"
mkdir -p /newroot/run/job
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 job /newroot/run/job ||
  fail "cannot mount the job folder"
umount /proc /sys /dev
exec switch_root /newroot /bin/bash /run/job/stage2.sh
