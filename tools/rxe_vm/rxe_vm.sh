#!/usr/bin/env bash
# Runs a command on a real kernel Soft-RoCE device: boots Debian's own kernel
# in a QEMU VM (software emulation: no KVM needed), creates rxe0 (the rdma_rxe
# module on a dummy netdev), and runs the command in this checkout there,
# with the host's own binaries and libraries (the host's / is the VM's root,
# read-only over virtio-9p). No packet leaves the VM.
#
#   tools/rxe_vm/rxe_vm.sh -- ibv_devinfo -v
#   tools/rxe_vm/rxe_vm.sh --timeout=600 -- bazel-bin/verbs/ibverbs_provider_test
#   tools/rxe_vm/rxe_vm.sh --prepare      # only download and cache the kernel
#
# Inside the VM: the working directory is the checkout, /tmp and /run are
# tmpfs, $OUT is a folder shared read-write with the host (--out=DIR, else a
# temporary one), RLIMIT_MEMLOCK is unlimited, and `rxe0` is the only RDMA
# device, with GID 0 the dummy netdev's link-local IPv6 address.
#
# The kernel (the newest linux-image-6.1.0-*-amd64 that linux-image-amd64
# depends on, or --kernel=PACKAGE) is downloaded with apt-get, unpacked with
# dpkg-deb (never installed) and cached, with the initramfs, under
# ${XDG_CACHE_HOME:-~/.cache}/dreplay/rxe_vm/.
#
# Exit status: the command's; 77 when the VM cannot run here (the reason is
# the last line on stderr: no root, no QEMU, no kernel package); 124 when the
# VM ran past --timeout; 125 when the VM started but gave no result.
set -uo pipefail

readonly EXIT_CANNOT_RUN=77
readonly EXIT_TIMEOUT=124
readonly EXIT_NO_RESULT=125

top=$(cd "$(dirname "$0")/../.." && pwd)
here="$top/tools/rxe_vm"
memory_mib=3072
cpus=2
timeout_s=900
kernel_package=""
out_dir=""
prepare_only=0

usage() {
  sed -n '2,/^set -uo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
  cat <<'TEXT'
Options:
  --memory=MIB     the VM's memory (default 3072)
  --cpus=N         the VM's CPUs, emulated in threads (default 2)
  --timeout=S      stop the VM after S seconds (default 900)
  --kernel=PKG     the kernel package, e.g. linux-image-6.1.0-57-amd64
  --out=DIR        the host folder that is $OUT in the VM
  --prepare        download and cache the kernel and initramfs, then exit
TEXT
}

cannot_run() {
  echo "rxe_vm: cannot run: $*" >&2
  exit "$EXIT_CANNOT_RUN"
}

positive_int() {
  [[ "$2" =~ ^[1-9][0-9]*$ ]] || { echo "rxe_vm: $1 must be a positive integer, got '$2'" >&2; exit 2; }
}

while [ $# -gt 0 ]; do
  case "$1" in
    --memory=*) memory_mib="${1#*=}"; positive_int --memory "$memory_mib" ;;
    --cpus=*) cpus="${1#*=}"; positive_int --cpus "$cpus" ;;
    --timeout=*) timeout_s="${1#*=}"; positive_int --timeout "$timeout_s" ;;
    --kernel=*) kernel_package="${1#*=}" ;;
    --out=*) out_dir="${1#*=}" ;;
    --prepare) prepare_only=1 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) echo "rxe_vm: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ "$prepare_only" -eq 0 ] && [ $# -eq 0 ]; then
  echo "rxe_vm: no command given (see --help)" >&2
  exit 2
fi

[ "$(id -u)" -eq 0 ] || cannot_run "needs root (the VM shares the host's / as its root)"
if ! command -v qemu-system-x86_64 >/dev/null || ! command -v busybox >/dev/null; then
  "$top/tools/install_deps.sh" >&2 || cannot_run "tools/install_deps.sh failed"
fi
command -v qemu-system-x86_64 >/dev/null || cannot_run "qemu-system-x86_64 is missing"
# (The list is read whole: grep -q stopping early would fail the pipe.)
[ -x /bin/busybox ] && [[ $'\n'"$(busybox --list 2>/dev/null)"$'\n' == *$'\n'switch_root$'\n'* ]] ||
  cannot_run "/bin/busybox (busybox-static) with switch_root is missing"
[ "$(uname -m)" = x86_64 ] || cannot_run "the VM is for x86_64 hosts, this is $(uname -m)"

cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/dreplay/rxe_vm"
mkdir -p "$cache_root" || cannot_run "cannot create $cache_root"

# The kernel package: as asked, else the one already cached, else the one
# linux-image-amd64 depends on now.
if [ -z "$kernel_package" ]; then
  cached=$(ls -d "$cache_root"/linux-image-*/ready 2>/dev/null | sort -V | tail -n 1)
  if [ -n "$cached" ]; then
    kernel_package=$(basename "$(dirname "$cached")")
  else
    kernel_package=$(apt-cache depends linux-image-amd64 2>/dev/null |
      awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
    if [ -z "$kernel_package" ]; then
      apt-get update -qq >/dev/null 2>&1
      kernel_package=$(apt-cache depends linux-image-amd64 2>/dev/null |
        awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
    fi
    [ -n "$kernel_package" ] || cannot_run "no linux-image-amd64 package in apt's lists"
  fi
fi
[[ "$kernel_package" =~ ^linux-image-[0-9][A-Za-z0-9.+-]*$ ]] ||
  { echo "rxe_vm: --kernel must be a linux-image-* package, got '$kernel_package'" >&2; exit 2; }
kernel_version=${kernel_package#linux-image-}
kernel_version=${kernel_version%-unsigned}
cache="$cache_root/$kernel_package"

# Unpacks the kernel and indexes its modules, once per kernel package.
prepare_kernel() {
  local work="$cache.partial.$$"
  rm -rf "$work" && mkdir -p "$work/deb" || return 1
  echo "rxe_vm: downloading $kernel_package (once; cached in $cache)" >&2
  (cd "$work/deb" && apt-get download "$kernel_package" >/dev/null 2>&1) || {
    echo "rxe_vm: apt-get download $kernel_package failed" >&2
    rm -rf "$work"
    return 1
  }
  dpkg-deb -x "$work"/deb/*.deb "$work/tree" || return 1
  rm -rf "$work/deb"
  depmod -b "$work/tree" "$kernel_version" || return 1
  cp "$work/tree/boot/vmlinuz-$kernel_version" "$work/vmlinuz" || return 1
  # The modules the initramfs loads to reach the host's /, in dependency order.
  local module
  for module in virtio_pci 9pnet_virtio 9p; do
    modprobe -d "$work/tree" -S "$kernel_version" --show-depends "$module" |
      awk '$1 == "insmod" {print $2}' | sed "s#^$work/##"
  done | awk '!seen[$0]++' > "$work/modules.txt"
  [ -s "$work/modules.txt" ] || return 1
  touch "$work/ready"
  rm -rf "$cache" && mv "$work" "$cache"
}

# The initramfs for this init.sh and busybox, named by their digest, so a
# changed init.sh gets its own and a VM that is running keeps its own.
prepare_initramfs() {
  local digest
  digest=$(cat "$here/init.sh" /bin/busybox | sha256sum | cut -c1-16)
  initramfs="$cache/initramfs-$digest.cpio.gz"
  [ -s "$initramfs" ] && return 0
  local work path
  work=$(mktemp -d "$cache/initramfs.XXXXXX") || return 1
  mkdir -p "$work/root/modules" "$work/root/bin" || return 1
  while read -r path; do
    cp "$cache/$path" "$work/root/modules/" || return 1
    basename "$path" >> "$work/root/modules/order"
  done < "$cache/modules.txt"
  (
    cd "$work/root" || exit 1
    mkdir -p dev proc sys newroot
    cp /bin/busybox bin/busybox && cp "$here/init.sh" init && chmod 755 init bin/busybox &&
      find . | cpio -o -H newc --quiet | gzip -1 > "$work/initramfs.cpio.gz"
  ) || return 1
  mv "$work/initramfs.cpio.gz" "$initramfs" && rm -rf "$work"
}

if [ ! -f "$cache/ready" ] || [ ! -s "$cache/modules.txt" ]; then
  prepare_kernel || cannot_run "could not prepare the VM's kernel ($kernel_package)"
fi
prepare_initramfs || cannot_run "could not build the VM's initramfs"
if [ "$prepare_only" -eq 1 ]; then
  echo "rxe_vm: ready: $cache" >&2
  exit 0
fi

job=$(mktemp -d "$cache_root/job.XXXXXX") || cannot_run "cannot create a job folder"
trap 'rm -rf "$job"' EXIT
if [ -n "$out_dir" ]; then
  mkdir -p "$out_dir" || { echo "rxe_vm: cannot create --out=$out_dir" >&2; exit 2; }
  out_dir=$(cd "$out_dir" && pwd)
fi
printf '%q ' "$@" > "$job/command.sh"
echo >> "$job/command.sh"
cp "$here/stage2.sh" "$job/stage2.sh"
{
  printf 'KERNEL_TREE=%q\nKERNEL_VERSION=%q\nCHECKOUT=%q\n' "$cache/tree" "$kernel_version" "$PWD"
  printf 'VM_NAME=%q\nOUT_SHARED=%q\n' "rxe-vm" "$([ -n "$out_dir" ] && echo 1 || echo 0)"
} > "$job/env.sh"

shares=(
  -virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
  -virtfs "local,path=$job,mount_tag=job,security_model=none"
  # The checkout on its own, for one under /tmp or /run, which the VM covers.
  -virtfs "local,path=$PWD,mount_tag=checkout,security_model=none,readonly=on"
)
[ -n "$out_dir" ] && shares+=(-virtfs "local,path=$out_dir,mount_tag=out,security_model=none")

timeout -k 10 "$timeout_s" qemu-system-x86_64 \
  -accel tcg,thread=multi -cpu max -smp "$cpus" -m "$memory_mib" \
  -display none -monitor none -serial stdio -no-reboot -net none \
  -kernel "$cache/vmlinuz" -initrd "$initramfs" \
  -append "console=ttyS0 quiet loglevel=3 panic=-1 rdinit=/init" \
  "${shares[@]}" </dev/null | sed -u 's/\r$//'
qemu_rc=${PIPESTATUS[0]}
if [ "$qemu_rc" -eq 124 ] || [ "$qemu_rc" -eq 137 ]; then
  echo "rxe_vm: the VM ran past --timeout=$timeout_s s and was stopped" >&2
  exit "$EXIT_TIMEOUT"
fi
if [ ! -s "$job/rc" ]; then
  echo "rxe_vm: the VM stopped without a result (QEMU exit status $qemu_rc)" >&2
  exit "$EXIT_NO_RESULT"
fi
exit "$(cat "$job/rc")"
