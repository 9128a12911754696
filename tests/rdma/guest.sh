#!/usr/bin/env bash
# guest.sh - servers with RDMA for the tests: qemu guests (TCG, no KVM needed) running Debian's
# own kernel with rdma_rxe, the kernel's software RoCE v2 device, over this machine's own root
# file system (issue 57). A guest mounts the host's / read-only over 9p and runs a host command
# in a chroot of it, so it sees this build tree and the host's tools (ibv_*, rdma, ip) as they
# are; nothing is installed into an image. Run or sourced:
#
#   guest.sh check                    # 0 when all is here, else 77 and one line: what to install
#   guest.sh prepare BUILD            # kernel and initramfs into BUILD/rdma-guest/ (cached)
#   guest.sh run BUILD [-t S] -- cmd args...    # one guest; cmd runs there, its status back
#   guest.sh pair BUILD [-t S] -- cmd args...   # two guests joined by a wire; cmd runs in both
#
#   . tests/rdma/guest.sh; guest_run BUILD -- cmd ...; guest_pair BUILD -- cmd ...
#
# In a guest, cmd runs as root in the directory it was started from, with the caller's
# exported environment (HOME=/tmp, as the host's / is read-only there) and:
#   GUEST_ID     0 (run), 0 or 1 (pair)        GUEST_COUNT  1 or 2
#   GUEST_ADDR   this guest's IPv4 address     GUEST_PEER   the other guest's (pair), else ""
#   GUEST_DEV    the netdev under rxe0         GUEST_OUT    a folder written through to the host
# The guest has rxe0 (`rdma link add rxe0 type rxe netdev $GUEST_DEV`; GID index 1 is the IPv4
# address, RoCE v2): in `run` over a dummy device at 10.233.1.1/24, in `pair` over eth0 at
# 10.233.0.1 and 10.233.0.2/24, a virtio-net pair joined by qemu's socket netdev on the host's
# loopback. Those addresses live only inside the guests: no guest has a device to the outside
# (-nic none), and the wire's listening end is bound to 127.0.0.1. Writable in a guest: /tmp,
# /run, /var/tmp, /dev/shm (memory of its own; the build and source trees stay visible, read-only,
# when they lie under the host's /tmp, as a clone there does) and GUEST_OUT (BUILD/rdma-guest/run.*/gK, kept
# when the command fails, else removed).
#
# cmd's output is printed after the guest stops (each line with "[gK] " in `pair`), then one
# line with the times: boot (kernel start to the guest script, by the guest's clock), then rxe0
# and cmd together. The status is cmd's; in `pair` the first non-zero of guest 0's and 1's. A
# guest that does not finish within -t seconds (GUEST_TIMEOUT, default 300) is killed, its
# console's tail printed and 124 returned; one that stops without a status gives 125. qemu's
# monitor of guest K listens on BUILD/rdma-guest/run.*/gK/monitor.sock while it runs
# (`set_link n0 off` there cuts the wire: eth0 loses its carrier, rxe0's port goes DOWN).
#
# Needs, and only checks for (exit 77 naming the packages): qemu-system-x86 rdma-core
# ibverbs-utils libibverbs-dev busybox-static cpio kmod, and apt-get's lists (`apt-get update`)
# to download the kernel package (linux-image-amd64's, unpacked with dpkg-deb -x: not installed).
# GUEST_SMP (2) and GUEST_MEM (2048, MiB) size each guest. Under TCG a guest takes both cores
# of a 2-core machine: keep runs short.

GUEST_PACKAGES="qemu-system-x86 rdma-core ibverbs-utils libibverbs-dev busybox-static cpio kmod"
GUEST_NET=${GUEST_NET:-10.233}
GUEST_SELF=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")

# Modules the initramfs loads, in this order, with what modprobe says each needs before it:
# virtio and 9p to mount the host's root, virtio_net (and its failover) for the wire, dummy,
# then rxe. crc32_generic first: rxe asks the crypto API for "crc32" when a link is added, and
# the chroot has no module tree of the guest's kernel to load it from ("rdma link add" then
# fails with "No such file or directory").
GUEST_MODULES="virtio_pci 9pnet_virtio 9p virtio_net dummy crc32_generic udp_tunnel
ip6_udp_tunnel ib_core ib_uverbs rdma_rxe"

guest_log() { echo "guest.sh: $*" >&2; }

# guest_check: 0 when every package is installed, else 77 and one line naming the missing ones.
guest_check() {
  local p missing=()
  for p in $GUEST_PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "SKIP: RDMA guests need: apt-get install --no-install-recommends ${missing[*]}" \
      "(or: bash scripts/quickstart.sh test)"
    return 77
  fi
  local c
  for c in qemu-system-x86_64 busybox cpio depmod modprobe dpkg-deb apt-get timeout flock ss; do
    command -v "$c" >/dev/null || { echo "SKIP: RDMA guests need $c on PATH"; return 77; }
  done
}

# guest_prepare BUILD: the kernel (downloaded and unpacked once into BUILD/rdma-guest/) and the
# initramfs (made again each time: about a second). 0, 77 when the kernel cannot be had here,
# 1 on another failure. Safe against a concurrent caller (flock).
guest_prepare() {
  local dir=${1:?guest_prepare BUILD}/rdma-guest
  mkdir -p "$dir" && dir=$(cd "$dir" && pwd) || return 1
  (
    flock 9 || exit 1
    cd "$dir" || exit 1
    if [ ! -s kver ] || [ ! -d "kernel/lib/modules/$(cat kver)" ]; then
      local pkg
      pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/ { print $2; exit }')
      [ -n "$pkg" ] || pkg=$(apt-cache pkgnames linux-image-6.1 2>/dev/null | grep -E '^linux-image-6\.1[.0-9-]*-amd64$' | sort -V | tail -1)
      if [ -z "$pkg" ]; then
        echo "SKIP: no linux-image-amd64 in apt's lists: run apt-get update"
        exit 77
      fi
      rm -rf kernel ./*.deb
      if ! timeout 300 apt-get download -q "$pkg" >/dev/null 2>&1; then
        echo "SKIP: apt-get download $pkg failed (no network to Debian's mirror, or run apt-get update)"
        exit 77
      fi
      dpkg-deb -x "$pkg"_*.deb kernel || exit 1
      local k
      k=$(ls kernel/lib/modules)
      depmod -b kernel "$k" || exit 1
      echo "$k" >kver
    fi
    guest_initramfs "$dir" "$(cat kver)"
  ) 9>"$dir/.lock"
}

# guest_initramfs DIR KVER: DIR/initrd.gz, busybox and GUEST_MODULES with their dependencies.
guest_initramfs() {
  local dir=$1 k=$2 tmp m ko args
  tmp=$(mktemp -d "$dir/initramfs.XXXXXX") || return 1
  mkdir -p "$tmp"/{bin,dev,proc,sys,root,lib/modules} || return 1
  cp "$(command -v busybox)" "$tmp/bin/busybox" || return 1
  # modprobe's plan, one "insmod PATH ARGS" line per module, each once, in dependency order.
  # shellcheck disable=SC2086
  for m in $GUEST_MODULES; do
    modprobe -d "$dir/kernel" -S "$k" --show-depends "$m" || { rm -rf "$tmp"; return 1; }
  done | awk '$1 == "insmod" && !seen[$2]++' | while read -r _ ko args; do
    cp "$ko" "$tmp/lib/modules/" && echo "$(basename "$ko") $args" >>"$tmp/modules"
  done
  guest_init >"$tmp/init" && chmod 755 "$tmp/init" || return 1
  (cd "$tmp" && find . | cpio -o -H newc --quiet | gzip -1) >"$dir/initrd.gz.new" &&
    mv "$dir/initrd.gz.new" "$dir/initrd.gz"
  local rc=$?
  rm -rf "$tmp"
  return $rc
}

# The initramfs's /init (busybox sh, PID 1): modules, the host's / read-only at /root, the
# kernel file systems and memory ones over it, this run's folder (hccl.run=, shared as tag
# "out") writable at the same path, then the run's guest-run.sh in a chroot; power off after.
guest_init() {
  cat <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
while read -r ko args; do
  insmod "/lib/modules/$ko" $args || echo "init: insmod $ko failed"
done </modules
run=
keep=
for a in $(cat /proc/cmdline); do
  case $a in
    hccl.run=*) run=${a#hccl.run=} ;;
    hccl.keep=*) keep=${a#hccl.keep=} ;;
  esac
done
r=/root
if mount -t 9p -o ro,trans=virtio,version=9p2000.L,msize=512000,cache=loose hostroot $r; then
  mount -t proc proc $r/proc
  mount -t sysfs sys $r/sys
  mount -t devtmpfs dev $r/dev
  mkdir -p $r/dev/pts $r/dev/shm
  mount -t devpts devpts $r/dev/pts
  # The host's folders under /tmp the command needs (hccl.keep=, colon-separated: a clone or
  # build tree there) stay visible through the guest's own /tmp, read-only as the rest.
  mkdir -p /hosttmp && mount -o bind $r/tmp /hosttmp
  for m in /dev/shm /tmp /run /var/tmp; do mount -t tmpfs -o mode=1777 tmpfs $r$m; done
  for d in $(echo "$keep" | tr : ' '); do
    mkdir -p "$r$d" && mount -o bind "/hosttmp${d#/tmp}" "$r$d" || echo "init: cannot show $d"
  done
  mkdir -p "$r$run"
  if mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 out "$r$run"; then
    chroot $r /bin/bash "$run/guest-run.sh" </dev/null
  else
    echo "init: could not mount the run folder $run"
  fi
  sync
  umount "$r$run"
else
  echo "init: could not mount the host's root (9p tag hostroot)"
fi
poweroff -f
EOF
}

# guest_script OUT ID COUNT ADDR PEER DEV -- cmd args: OUT/guest-run.sh, what the chroot runs:
# the network and rxe0, then cmd; its status to OUT/rc, its output to OUT/log.
guest_script() {
  local out=$1 id=$2 count=$3 addr=$4 peer=$5 dev=$6
  shift 7
  env -0 >"$out/env" || return 1
  {
    echo "# made by tests/rdma/guest.sh for one guest run"
    echo "out=$(printf %q "$out")"
    cat <<'EOF'
exec >"$out/log" 2>&1
while IFS= read -r -d '' kv; do
  case ${kv%%=*} in PWD | OLDPWD | SHLVL | _ | HOME | TMPDIR | *[!A-Za-z0-9_]*) ;; *) export "$kv" ;; esac
done <"$out/env"
export HOME=/tmp
EOF
    printf 'export GUEST_ID=%s GUEST_COUNT=%s GUEST_ADDR=%s GUEST_PEER=%s GUEST_DEV=%s GUEST_OUT=%q\n' \
      "$id" "$count" "$addr" "$peer" "$dev" "$out"
    echo "hostname hccl-guest$id"
    cat <<'EOF'
booted=$(cut -d' ' -f1 /proc/uptime)
setup() {
  ip link set lo up || return 1
  if [ "$GUEST_DEV" = dummy0 ]; then ip link add dummy0 type dummy || return 1; fi
  ip addr add "$GUEST_ADDR/24" dev "$GUEST_DEV" && ip link set "$GUEST_DEV" up &&
    rdma link add rxe0 type rxe netdev "$GUEST_DEV"
}
if setup; then
EOF
    printf '  cd %q 2>/dev/null || cd /\n' "$PWD"
    printf '  %s\n' "$(printf '%q ' "$@")"
    cat <<'EOF'
  rc=$?
else
  echo "guest.sh: setting up $GUEST_DEV and rxe0 failed in the guest"
  rc=1
fi
echo "$booted $(cut -d' ' -f1 /proc/uptime)" >"$out/times"
echo "$rc" >"$out/rc"
EOF
  } >"$out/guest-run.sh"
}

# guest_qemu DIR OUT TIMEOUT NET...: boots one guest in the background (its pid in
# GUEST_QEMU_PID), console to OUT/console.log, monitor on OUT/monitor.sock; NET are qemu's
# network arguments. no_timer_check: on a loaded host the emulated guest's kernel can fail its
# IO-APIC timer check and panic at boot ("IO-APIC + timer doesn't work!", seen 2026-12-06 with
# the suite running beside it); the check is for broken hardware, not for an emulated board.
guest_qemu() {
  local dir=$1 out=$2 t=$3 keep="" p
  shift 3
  # What lies under the host's /tmp (a clone there: CI's, a user's) is shown in the guest too.
  for p in "$dir/.." "$(dirname "$GUEST_SELF")/../.." "$PWD"; do
    p=$(cd "$p" && pwd -P)
    case $p in /tmp/*) keep="$keep${keep:+:}$p" ;; esac
  done
  timeout -k 10 "$t" qemu-system-x86_64 -accel tcg,thread=multi -cpu max \
    -smp "${GUEST_SMP:-2}" -m "${GUEST_MEM:-2048}" -nographic -no-reboot \
    -serial "file:$out/console.log" -monitor "unix:$out/monitor.sock,server=on,wait=off" \
    -kernel "$dir/kernel/boot/vmlinuz-$(cat "$dir/kver")" -initrd "$dir/initrd.gz" \
    -append "console=ttyS0 quiet loglevel=3 panic=-1 no_timer_check hccl.run=$out${keep:+ hccl.keep=$keep}" \
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
    -virtfs "local,path=$out,mount_tag=out,security_model=none,multidevs=remap" \
    "$@" </dev/null >"$out/qemu.log" 2>&1 &
  GUEST_QEMU_PID=$!
}

# guest_result OUT QEMU_STATUS PREFIX: prints the guest's output and times; returns its status.
guest_result() {
  local out=$1 qrc=$2 prefix=$3 b e
  [ -f "$out/log" ] && sed "s/^/$prefix/" "$out/log"
  if [ ! -s "$out/rc" ]; then
    if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
      guest_log "${prefix}guest killed after its time limit; its console's last lines:"
      qrc=124
    else
      guest_log "${prefix}guest stopped without a status (qemu $qrc); its console's last lines:"
      qrc=125
    fi
    tail -n 15 "$out/console.log" "$out/qemu.log" 2>/dev/null | sed "s/^/$prefix  /" >&2
    return $qrc
  fi
  read -r b e <"$out/times"
  guest_log "${prefix}guest booted in $b s, rxe0 and the command took $(awk -v b="$b" -v e="$e" 'BEGIN { printf "%.1f", e - b }') s, status $(cat "$out/rc")"
  return "$(cat "$out/rc")"
}

# guest_args BUILD ARGS...: reads [-t S] -- cmd...; sets GUEST_T and GUEST_CMD.
guest_args() {
  GUEST_T=${GUEST_TIMEOUT:-300}
  shift
  while [ $# -gt 0 ]; do
    case $1 in
    -t) GUEST_T=$2; shift 2 ;;
    --) shift; break ;;
    *) guest_log "unknown argument '$1' (usage: guest.sh run|pair BUILD [-t S] -- cmd args...)"; return 2 ;;
    esac
  done
  [ $# -gt 0 ] || { guest_log "no command given after --"; return 2; }
  GUEST_CMD=("$@")
}

# guest_run BUILD [-t S] -- cmd args...: cmd in one guest with rxe0 over dummy0; cmd's status,
# 77 when guests cannot run here, 124/125 when the guest did not finish.
guest_run() {
  local build=${1:?guest_run BUILD -- cmd}
  guest_args "$@" || return
  guest_check && guest_prepare "$build" || return
  local dir=$build/rdma-guest run rc
  dir=$(cd "$dir" && pwd)
  run=$(mktemp -d "$dir/run.XXXXXX") && mkdir "$run/g0" || return 1
  guest_script "$run/g0" 0 1 "$GUEST_NET.1.1" "" dummy0 -- "${GUEST_CMD[@]}" || return 1
  guest_qemu "$dir" "$run/g0" "$GUEST_T" -nic none
  wait "$GUEST_QEMU_PID"
  guest_result "$run/g0" $? ""
  rc=$?
  [ $rc = 0 ] && rm -rf "$run"
  [ $rc = 0 ] || guest_log "kept $run"
  return $rc
}

# guest_pair BUILD [-t S] -- cmd args...: cmd in two guests at once, guest 0 listening for the
# wire on the host's loopback, guest 1 connecting once it listens.
guest_pair() {
  local build=${1:?guest_pair BUILD -- cmd}
  guest_args "$@" || return
  guest_check && guest_prepare "$build" || return
  local dir=$build/rdma-guest run rc0 rc1 port k pid0 pid1
  dir=$(cd "$dir" && pwd)
  run=$(mktemp -d "$dir/run.XXXXXX") && mkdir "$run/g0" "$run/g1" || return 1
  for k in 0 1; do
    guest_script "$run/g$k" "$k" 2 "$GUEST_NET.0.$((k + 1))" "$GUEST_NET.0.$((2 - k))" eth0 -- \
      "${GUEST_CMD[@]}" || return 1
  done
  for port in $((20000 + RANDOM % 12000)) $((20000 + RANDOM % 12000)) $((20000 + RANDOM % 12000)); do
    guest_qemu "$dir" "$run/g0" "$GUEST_T" -nic none \
      -device virtio-net-pci,netdev=n0,mac=52:54:00:33:00:01 -netdev "socket,id=n0,listen=127.0.0.1:$port"
    pid0=$GUEST_QEMU_PID
    for ((k = 0; k < 100; k++)); do
      ss -Htln "sport = :$port" 2>/dev/null | grep -q . && break 2
      kill -0 "$pid0" 2>/dev/null || break
      sleep 0.1
    done
    kill "$pid0" 2>/dev/null
    wait "$pid0"
    guest_log "guest 0 did not listen on 127.0.0.1:$port; trying another port"
    pid0=
  done
  [ -n "$pid0" ] || { guest_log "no port to join the guests: kept $run"; return 1; }
  guest_qemu "$dir" "$run/g1" "$GUEST_T" -nic none \
    -device virtio-net-pci,netdev=n0,mac=52:54:00:33:00:02 -netdev "socket,id=n0,connect=127.0.0.1:$port"
  pid1=$GUEST_QEMU_PID
  wait "$pid0"
  rc0=$?
  wait "$pid1"
  rc1=$?
  guest_result "$run/g0" $rc0 "[g0] "
  rc0=$?
  guest_result "$run/g1" $rc1 "[g1] "
  rc1=$?
  [ $rc0 = 0 ] && [ $rc1 = 0 ] && { rm -rf "$run"; return 0; }
  guest_log "kept $run"
  [ $rc0 = 0 ] && return $rc1
  return $rc0
}

guest_main() {
  local verb=${1:-}
  shift
  case $verb in
  check) guest_check ;;
  prepare) guest_check && guest_prepare "${1:?usage: guest.sh prepare BUILD}" ;;
  run) guest_run "$@" ;;
  pair) guest_pair "$@" ;;
  -h | --help) awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$GUEST_SELF" ;;
  *)
    guest_log "usage: guest.sh check | prepare BUILD | run BUILD [-t S] -- cmd... | pair BUILD [-t S] -- cmd... (see --help)"
    return 2
    ;;
  esac
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -u
  guest_main "$@"
  exit
fi
