#!/usr/bin/env bash
# multiserver.sh - allreduce across pretend servers (network namespaces joined by veth pairs
# and a bridge, tests/multi/netns.sh), one launcher per server, in one run: libhccl's
# two-level allreduce (the cost model's choice) on malloc buffers and on HcclMemAlloc buffers
# (allreduce_perf -R 1: the steps inside each server run zero-copy), libhccl forced to one flat
# ring over every rank (HCCL_ALGO=ring), and through torch.distributed
# (bench/torch_allreduce_perf.py) gloo over the same link (GLOO_SOCKET_IFNAME=eth0) and
# torch_hccl (whose allocator gives tensors HcclMemAlloc memory, as a user's job gets). fp32
# sum, in place (the call every library has: torch's allreduce is in place, and its
# out-of-place twin in torch_allreduce_perf.py adds a copy), 64 MiB over 5 calls and 4 KiB
# over 200, median of REPEATS runs (round by round: each round runs every library once);
# busbw as nccl-tests defines it; then the transport alone
# (sendrecv_perf at 2 x 1: both directions, no reduction; its out-of-place columns).
# The link itself is measured in the same run, before the libraries: two iperf3 (Debian's;
# "apt-get install iperf3"), one TCP stream each way at once for 3 s, median of
# REPEATS; its per-direction rate is the bound of a 2 x 1 allreduce's busbw (each rank sends
# and receives S bytes in total while busbw counts S), and the table gives each busbw as a
# share of it; the last line says how busy iperf3 kept the machine's cores meanwhile (the
# pretend link is the cores' own copying, which an allreduce shares with its reduction).
# Beside it a reference for the allreduce itself, bench/tcp_plain.c (built here with cc): two
# processes, one thread each and no library, run a 2 x 1 fp32 sum allreduce of 64 MiB the
# plainest way over one TCP connection (send the half you do not own, add the other's copy of
# yours 1 MiB at a time as it comes and send it back, receive the other sum in place), 10
# rounds, median round, median of REPEATS; and its exchange alone (64 MiB each way at once).
# They move what a 2 x 1 allreduce moves, from and into buffers as large as the allreduce's.
# Then every anchor of bench/compare.sh across the same servers, in the same rounds, in a
# second table with the best named: Open MPI (bench/mpi_allreduce_perf.c under mpirun), MPICH
# (the same built against MPICH, under its mpiexec.hydra) and oneCCL
# (bench/ccl_allreduce_perf.cpp under Intel MPI's mpiexec), each launcher given the servers'
# addresses as its hosts and, as its ssh, a script that enters the server's namespace with a
# host name of its own (srv0, srv1: MPI libraries tell servers apart by host name); TCP on the
# servers' eth0. Open MPI runs with --bind-to none: its default for a 2-rank job binds each
# server's rank to core 0, the same core on pretend servers. Debian's MPICH is ch4:ucx, and
# UCX, left to itself, moved data between pretend servers through shared memory (they share a
# kernel: 2 x 1, 4 KiB in 3.5 us and 64 MiB at 1.55 GB/s, its figures on one server), so UCX
# gets TCP only (UCX_TLS=tcp,self: 24.6 us, 0.94 GB/s). That also takes UCX's shared memory
# from the ranks of one server, which keep MPICH's own for small messages (one server, 2 ranks:
# 64 MiB 1.24 -> 0.81 GB/s, 4 KiB 12.9 -> 13.2 us), so its 2 x 2 and 2 x 4 columns understate
# what it does between real servers. DeepSpeed's shared-memory
# allreduce runs only when every rank is on one machine; its row gives the error it stops with.
# bench/anchors.sh installs the anchors as compare.sh does (ANCHORS_DIR, default
# BUILD_DIR/anchors; ANCHORS_INSTALL=0 to only use what is there).
#
# usage: bash bench/multiserver.sh BUILD_DIR [REPEATS]   (root; prints two Markdown tables)
set -u
case "${1:-}" in
-h | --help) awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
-*) echo "multiserver.sh: unknown option '$1'; see bash bench/multiserver.sh --help" >&2; exit 2 ;;
esac
build=${1:?usage: multiserver.sh BUILD_DIR [REPEATS]}
repeats=${2:-3}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../tests/multi/netns.sh"
netns_up 2 || { echo "network namespaces cannot be made here" >&2; exit 1; }
work=$(mktemp -d /tmp/hccl-msbench.XXXXXX)
trap 'netns_down; rm -rf "$work"' EXIT
port=$((31000 + NETNS_ID % 1000))

# one NAME DEVS ENV SIZE ITERS -- PROGRAM ARGS: prints "time_us busbw" of the in-place columns
# of rank 0's line (the out-of-place ones when $cols is "6 8"), or "n/a n/a".
cols="10 12"
one() {
  local name=$1 devs=$2 envs=$3 size=$4 iters=$5 k pids=()
  shift 6
  port=$((port + 1))
  for k in 0 1; do
    # shellcheck disable=SC2086
    netns_exec "$k" env $envs PYTHONPATH="$build/python" GLOO_SOCKET_IFNAME=eth0 \
      timeout 600 "$build/bin/npu-launch" --nnodes 2 --node-rank "$k" \
      --master-addr "$(netns_addr 0)" --master-port "$port" --device-list "$devs" -- \
      "$@" -b "$size" -e "$size" -n "$iters" -w 1 -d float -o sum -c 1 >"$work/$name.$k" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"
  awk -v c="$cols" 'BEGIN {split(c, k, " ")}
    $1 ~ /^[0-9]+$/ && $3 == "float" {print $k[1], $k[2]; found=1} END {if (!found) print "n/a n/a"}' \
    "$work/$name.0"
}

median() { sort -g | awk '{v[NR]=$1} END {print NR ? v[int((NR+1)/2)] : "n/a"}'; }

# add NAME DEVS ENV SIZE ITERS -- PROGRAM: one run, its "time busbw" appended to NAME.SIZE.all.
add() {
  local name=$1 size=$4
  one "$@" >>"$work/$name.$size.all"
}

# med NAME SIZE: the median time and busbw of NAME's runs at SIZE.
med() {
  echo "$(cut -d' ' -f1 "$work/$1.$2.all" | median) $(cut -d' ' -f2 "$work/$1.$2.all" | median)"
}

# The machine's busy share (%) between two readings of /proc/stat's cpu line ($1, $2).
busy() {
  awk -v a="$1" -v b="$2" 'BEGIN {n = split(a, x, " "); split(b, y, " "); t = 0
    for (i = 2; i <= n; i++) t += y[i] - x[i]
    idle = (y[5] - x[5]) + (y[6] - x[6]); printf "%.0f", (t > 0 ? 100 * (t - idle) / t : 0)}'
}

# link: two iperf3 at once, server 0 to server 1 and server 1 to server 0, REPEATS times;
# prints the median of the slower direction's rate in GB/s and the median share of the
# machine's cores busy meanwhile (on pretend servers the link is the cores' own copying), or
# n/a n/a (the reason on stderr). Not one `iperf3 --bidir`: Debian's iperf3 (3.12) runs both
# directions on one thread, which starved one of them (4.4 and 0.5 GB/s on 2026-11-26, against
# 3.8-4.7 each way with a process for each).
link() {
  local r s0 s1 k
  if ! command -v iperf3 >/dev/null; then
    echo "multiserver.sh: iperf3 is not installed (apt-get install iperf3): no link rate" >&2
    echo n/a n/a
    return
  fi
  for ((r = 0; r < repeats; r++)); do
    port=$((port + 2))
    for k in 0 1; do
      netns_exec $((1 - k)) timeout 30 iperf3 -s -1 -B "$(netns_addr $((1 - k)))" -p $((port + k)) >/dev/null 2>&1 &
    done
    sleep 0.5
    s0=$(head -1 /proc/stat)
    for k in 0 1; do
      netns_exec "$k" timeout 30 iperf3 -c "$(netns_addr $((1 - k)))" -p $((port + k)) -t 3 -J >"$work/iperf.$k" 2>&1 &
    done
    wait
    s1=$(head -1 /proc/stat)
    "${PYTHON:-python3}" -c 'import json, sys
rates = [json.load(open(f))["end"]["sum_received"]["bits_per_second"] for f in sys.argv[2:]]
print("%.2f" % (min(rates) / 8e9), sys.argv[1])' "$(busy "$s0" "$s1")" "$work/iperf.0" "$work/iperf.1" 2>/dev/null
  done >"$work/link.all"
  echo "$(cut -d' ' -f1 "$work/link.all" | median) $(cut -d' ' -f2 "$work/link.all" | median)"
}

# plain KIND: bench/tcp_plain.c's KIND (allreduce or exchange) between server 0 and server 1,
# REPEATS times; prints the median of the slower side's rate in GB/s, or n/a (why on stderr).
plain() {
  local kind=$1 r
  if [ ! -x "$work/tcp_plain" ] && ! cc -O3 -march=native -o "$work/tcp_plain" "$here/tcp_plain.c" 2>"$work/tcp_plain.build"; then
    echo "multiserver.sh: bench/tcp_plain.c did not build (cc): $(tail -1 "$work/tcp_plain.build")" >&2
    echo n/a
    return
  fi
  for ((r = 0; r < repeats; r++)); do
    port=$((port + 1))
    netns_exec 0 timeout 120 "$work/tcp_plain" serve "$(netns_addr 0)" "$port" 67108864 10 "$kind" >"$work/plain.0" 2>&1 &
    netns_exec 1 timeout 120 "$work/tcp_plain" connect "$(netns_addr 0)" "$port" 67108864 10 "$kind" >"$work/plain.1" 2>&1
    wait
    sed -n "s/^tcp_plain $kind bytes=[0-9]* gbs=//p" "$work/plain.0" "$work/plain.1" | sort -g | head -1
  done >"$work/plain.all"
  median <"$work/plain.all"
}

perf="$build/bin/allreduce_perf"
py=${PYTHON:-$(cat "$build/python/INTERPRETER" 2>/dev/null || command -v python3)}

# --- Anchors (bench/anchors.sh), started across the servers.
BIN=$build/bin HERE=$here PY=$py RESULTS_DIR=$work RUN_TIMEOUT=120
ANCHORS_DIR=${ANCHORS_DIR:-$build/anchors} ANCHORS_INSTALL=${ANCHORS_INSTALL:-1}
ONECCL_VERSION=${ONECCL_VERSION:-2021.15.2} DEEPSPEED_VERSION=${DEEPSPEED_VERSION:-0.19.8}
HAVE_GLOO=0
"$py" -c "import torch" 2>/dev/null && HAVE_GLOO=1
# shellcheck source=bench/anchors.sh
. "$here/anchors.sh"
OMPI_WHY=
if [ ! -x "$BIN/mpi_allreduce_perf" ] || ! command -v mpirun >/dev/null; then
  OMPI_WHY="Open MPI not installed (mpirun, or mpi_allreduce_perf not built)"
fi
{ setup_mpich; setup_oneccl; setup_deepspeed; } >&2
# The launchers' ssh: netns-rsh [ssh options] HOST COMMAND... runs COMMAND in HOST's server.
agent=$work/netns-rsh
{
  echo '#!/bin/sh'
  echo 'while [ "${1#-}" != "$1" ]; do shift; done'
  echo 'host=$1'
  echo 'shift'
  for k in 0 1; do
    echo "[ \"\$host\" = $(netns_addr $k) ] && exec ip netns exec ${NETNS_PREFIX}_$k unshare --uts sh -c \"hostname srv$k; \$*\""
  done
  echo 'echo "netns-rsh: no pretend server $host" >&2; exit 1'
} >"$agent"
chmod +x "$agent"

# anchor NAME L SIZE ITERS: one run of anchor NAME (ompi, mpich, oneccl) with L ranks on each
# server, started from server 0 (as srv0), for at most RUN_TIMEOUT s; "time busbw" of its
# in-place columns appended to NAME.SIZE.all, or "n/a n/a".
anchor() {
  local name=$1 l=$2 size=$3 iters=$4 a0 a1 launch
  a0=$(netns_addr 0) a1=$(netns_addr 1)
  local args="-b $size -e $size -n $iters -w 1 -d float -o sum -c 1"
  case $name in
  ompi) launch="mpirun --allow-run-as-root --oversubscribe --bind-to none --host $a0:$l,$a1:$l -np $((2 * l)) --mca plm_rsh_agent $agent --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 --mca mpi_yield_when_idle 1 $BIN/mpi_allreduce_perf $args" ;;
  mpich) launch="env LD_LIBRARY_PATH=$MPICH_LIB $MPICH_DIR/usr/bin/mpiexec.hydra -launcher ssh -launcher-exec $agent -hosts $a0:$l,$a1:$l -np $((2 * l)) -iface eth0 -genv LD_LIBRARY_PATH $MPICH_LIB -genv UCX_TLS tcp,self -genv UCX_NET_DEVICES eth0 $BIN/mpich_allreduce_perf $args" ;;
  oneccl) launch="env ${ONECCL_ENV[*]} I_MPI_HYDRA_IFACE=eth0 CCL_PERF_KVS_FILE=$work/ccl.kvs.$RANDOM $ONECCL/bin/mpiexec -bootstrap ssh -bootstrap-exec $agent -hosts $a0,$a1 -ppn $l -n $((2 * l)) -genv CCL_KVS_IFACE eth0 -genv FI_TCP_IFACE eth0 $BIN/ccl_allreduce_perf $args" ;;
  esac
  netns_exec 0 unshare --uts sh -c "hostname srv0; timeout $RUN_TIMEOUT $launch" >"$work/$name.$l.$size.out" 2>&1 ||
    echo "(exit code $?: 124 is the $RUN_TIMEOUT s limit)" >>"$work/$name.$l.$size.out"
  awk '$1 ~ /^[0-9]+$/ && $3 == "float" {print $10, $12; found=1; exit} END {if (!found) print "n/a n/a"}' \
    "$work/$name.$l.$size.out" >>"$work/$name.$size.all"
}
torch=("$py" "$here/torch_allreduce_perf.py" --backend gloo)
torch_hccl=("$py" "$here/torch_allreduce_perf.py" --backend hccl)
read -r link_bw link_busy <<<"$(link)"
port=$((port + 100)) # each $(...) below counts its ports in a subshell
plain_bw=$(plain allreduce)
port=$((port + 100))
exchange_bw=$(plain exchange)
port=$((port + 100))
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a+0 > 0 && b+0 > 0) printf "%.2f", a / b; else print "n/a"}'; }
arows=()
echo "| ranks | link (iperf3 each way at once) | 64 MiB allreduce, no library (tcp_plain) | hccl two-level busbw 64 MiB | share of link | two-level / tcp_plain | \`-R 1\` | flat ring | gloo | torch_hccl | two-level / flat | two-level / gloo | \`-R 1\` / gloo | torch_hccl / gloo | hccl time 4 KiB | flat ring | gloo | two-level / gloo |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for devs in 0 0,1 0,1,2,3; do
  n=$(($(tr -cd , <<<"$devs" | wc -c) + 1))
  rm -f "$work"/*.all
  # Round by round, every library in turn, so that the machine's drift over minutes (pretend
  # servers share 2 cores with everything else on the host) weighs on each alike.
  for ((r = 0; r < repeats; r++)); do
    add hier "$devs" "" 64M 5 -- "$perf"
    add hier_r1 "$devs" "" 64M 5 -- "$perf" -R 1
    add flat "$devs" "HCCL_ALGO=ring" 64M 5 -- "$perf"
    add gloo "$devs" "" 64M 5 -- "${torch[@]}"
    add torch_hccl "$devs" "" 64M 5 -- "${torch_hccl[@]}"
    add hier "$devs" "" 4K 200 -- "$perf"
    add flat "$devs" "HCCL_ALGO=ring" 4K 200 -- "$perf"
    add gloo "$devs" "" 4K 200 -- "${torch[@]}"
    for a in ompi:OMPI_WHY mpich:MPICH_WHY oneccl:CCL_WHY; do
      why=${a#*:}
      [ -z "${!why}" ] || continue
      anchor "${a%%:*}" "$n" 64M 5
      anchor "${a%%:*}" "$n" 4K 200
    done
  done
  # DeepSpeed's shm allreduce: its own words on why it does not run across servers.
  ds=n/a
  if [ -z "$DS_WHY" ]; then
    one ds "$devs" "" 4K 20 -- "$DS_VENV/bin/python" "$here/torch_allreduce_perf.py" --backend deepspeed-shm >/dev/null
    ds_line=$(grep -m1 "deepspeed-shm:" "$work/ds.0" | sed 's/^.*deepspeed-shm: //' | tr '|' '/' | cut -c1-160)
    DS_WHY=${ds_line:-$(first_error "$work/ds.0")}
  fi
  for a in ompi mpich oneccl; do
    [ -s "$work/$a.64M.all" ] || echo "n/a n/a" >"$work/$a.64M.all"
    [ -s "$work/$a.4K.all" ] || echo "n/a n/a" >"$work/$a.4K.all"
  done
  read -r _ o_bw <<<"$(med ompi 64M)"
  read -r _ m_bw <<<"$(med mpich 64M)"
  read -r _ c_bw <<<"$(med oneccl 64M)"
  read -r o_t _ <<<"$(med ompi 4K)"
  read -r m_t _ <<<"$(med mpich 4K)"
  read -r c_t _ <<<"$(med oneccl 4K)"
  read -r _ h_bw <<<"$(med hier 64M)"
  read -r _ z_bw <<<"$(med hier_r1 64M)"
  read -r _ f_bw <<<"$(med flat 64M)"
  read -r _ g_bw <<<"$(med gloo 64M)"
  read -r _ t_bw <<<"$(med torch_hccl 64M)"
  read -r h_t _ <<<"$(med hier 4K)"
  read -r f_t _ <<<"$(med flat 4K)"
  read -r g_t _ <<<"$(med gloo 4K)"
  IFS='|' read -r bb bbv <<<"$(best more "Open MPI=$o_bw" "MPICH=$m_bw" "oneCCL=$c_bw" "gloo=$g_bw")"
  IFS='|' read -r bt btv <<<"$(best less "Open MPI=$o_t" "MPICH=$m_t" "oneCCL=$c_t" "gloo=$g_t")"
  arows+=("| 2 x $n | $h_bw | $o_bw | $m_bw | $c_bw | $ds | $g_bw | $bb | $(ratio "$h_bw" "$bbv") | $(ratio "$z_bw" "$bbv") | $h_t | $o_t | $m_t | $c_t | $ds | $g_t | $bt | $(ratio "$h_t" "$btv") |")
  echo "| 2 x $n | $link_bw GB/s | $plain_bw GB/s | $h_bw GB/s | $(ratio "$h_bw" "$link_bw") | $(ratio "$h_bw" "$plain_bw") | $z_bw | $f_bw | $g_bw | $t_bw | $(ratio "$h_bw" "$f_bw") | $(ratio "$h_bw" "$g_bw") | $(ratio "$z_bw" "$g_bw") | $(ratio "$t_bw" "$g_bw") | $h_t us | $f_t | $g_t | $(ratio "$h_t" "$g_t") |"
done
echo
echo "Every anchor across the same servers, in the same rounds (busbw in GB/s at 64 MiB, time in us at 4 KiB; in place; \"best\" is the best anchor):"
echo
echo "| ranks | hccl busbw 64 MiB | Open MPI | MPICH | oneCCL | DeepSpeed shm | gloo | best anchor | hccl / best | \`-R 1\` / best | hccl time 4 KiB | Open MPI | MPICH | oneCCL | DeepSpeed shm | gloo | best anchor | hccl / best |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | :--- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | :--- | ---: |"
printf '%s\n' "${arows[@]}"
echo
for a in "Open MPI:$OMPI_WHY" "MPICH:$MPICH_WHY" "oneCCL:$CCL_WHY" "DeepSpeed shm:$DS_WHY"; do
  [ -z "${a#*:}" ] || echo "${a%%:*} n/a: ${a#*:}"
done
for a in ompi mpich oneccl; do
  for f in "$work"/$a.*.out; do
    [ -f "$f" ] && ! grep -q "float" "$f" && echo "$a failed once ($(basename "$f")): $(first_error "$f")"
  done
done | sort -u | head -6
cols="6 8"
for ((r = 0; r < repeats; r++)); do add sendrecv 0 "" 64M 5 -- "$build/bin/sendrecv_perf"; done
read -r _ sr_bw <<<"$(med sendrecv 64M)"
echo
echo "The transport alone (sendrecv_perf, 2 x 1, 64 MiB each way at once, no reduction): $sr_bw GB/s each way, $(ratio "$sr_bw" "$link_bw") of the link, $(ratio "$sr_bw" "$exchange_bw") of a bare exchange of 64 MiB buffers ($exchange_bw GB/s each way, tcp_plain exchange)."
echo
echo "2 pretend servers (network namespaces, veth + bridge) on one machine of $(nproc) cores; iperf3 kept them $link_busy% busy at the link's rate; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
