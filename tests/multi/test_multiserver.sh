#!/usr/bin/env bash
# test_multiserver.sh - jobs that span servers, run as a user runs them: one npu-launch per
# server (network namespaces joined by a bridge, tests/multi/netns.sh), the ranks of a server
# on device links, the servers over the TCP transport. Each case runs the nccl-tests-style
# programs with -c 1 (every result checked) and passes when every server's launcher exits 0,
# rank 0 prints "# Out of bounds values : 0 OK" and lists every rank of the job.
#
#   bash tests/multi/test_multiserver.sh BUILD_DIR
#
# Cases: the issue's own (2 servers x 4 devices, allreduce_perf -d all -o all); 2x1, 2x2,
# 4x2 and 3x2 (6 ranks: halving-doubling between servers folds a count that is not a power of
# two); 2x3 and servers of 3 + 2 (each rank started with a launcher's variables), every
# program; npu-launch itself on servers of 3 + 2 and 1 + 3 + 2 devices (the launchers meet and
# number the ranks), and on 3 servers of which one never comes; the two-level allreduce on HcclMemAlloc buffers (zero-copy inside each server, as the
# trace says) and on malloc buffers (staged inside each server of 4, as the trace says); the
# two-level allreduce forced with ring and halving-doubling between servers, and a flat ring;
# every other collective program that was built; npu-launch --max-restarts across both servers
# (ddp_train resumes from its checkpoint). A server's rank killed in the middle of a run must
# stop every server's launcher with an error within seconds. The plain 2 x 1 allreduce
# bench/multiserver.sh compares with (bench/tcp_plain.c). Skipped (exit 77, which ctest reports
# as skipped) where network namespaces cannot be made.
set -u
build=${1:?usage: test_multiserver.sh BUILD_DIR}
bin=$build/bin
here=$(cd "$(dirname "$0")" && pwd)
. "$here/netns.sh"
work=$(mktemp -d /tmp/hccl-multi.XXXXXX)
failures=0
cases=0

netns_up 4
rc=$?
if [ $rc = 77 ]; then
  echo "SKIP: network namespaces cannot be made here"
  exit 77
fi
[ $rc = 0 ] || { echo "FAIL: could not set up the pretend servers"; exit 1; }
trap 'netns_down; rm -rf "$work"' EXIT
port=$((29000 + NETNS_ID % 1000))

# run_job NAME SERVERS DEVICES TIMEOUT ENV [NNODES] -- PROGRAM ARGS: one npu-launch per server,
# all at once, each told --nnodes NNODES (default SERVERS: fewer start a job some server never
# joins). DEVICES is every server's --device-list, or one list a server joined by + (0,1,2+0,1:
# servers of different counts, which the launchers number themselves on --master-port + 1).
# Every launcher's output in $work/NAME.<k>; returns the number of launchers that failed. In ENV,
# %k stands for the server's index.
run_job() {
  local name=$1 servers=$2 devs=$3 limit=$4 envs=$5 nnodes=$2
  shift 5
  [ "$1" = -- ] || { nnodes=$1; shift; }
  shift
  local lists=(${devs//+/ }) k pids=() bad=0
  port=$((port + 2)) # the launchers' store takes --master-port + 1
  for ((k = 0; k < servers; k++)); do
    # shellcheck disable=SC2086
    netns_exec "$k" env HCCL_CONNECT_TIMEOUT=30 HCCL_EXEC_TIMEOUT=60 ${envs//%k/$k} \
      timeout -k 5 "$limit" "$bin/npu-launch" --nnodes "$nnodes" --node-rank "$k" \
      --master-addr "$(netns_addr 0)" --master-port "$port" \
      --device-list "${lists[k]:-${lists[0]}}" -- "$@" >"$work/$name.$k" 2>&1 &
    pids+=($!)
  done
  for k in "${!pids[@]}"; do
    local st=0
    wait "${pids[$k]}" || st=$?
    [ $st = 0 ] || { bad=$((bad + 1)); echo "  server $k exited $st"; }
  done
  return $bad
}

# check NAME SERVERS DEVICES ENV -- PROGRAM ARGS: a job that must succeed with every result right.
check() {
  local name=$1 servers=$2 devs=$3 envs=$4
  shift 5
  local ndev nranks t0=$SECONDS
  ndev=$(($(tr -cd , <<<"$devs" | wc -c) + 1))
  nranks=$((servers * ndev))
  cases=$((cases + 1))
  if run_job "$name" "$servers" "$devs" 300 "$envs" -- "$@" &&
    grep -q "# Out of bounds values : 0 OK" "$work/$name.0" &&
    [ "$(grep -cE '^#  Rank +[0-9]+ ' "$work/$name.0")" = "$nranks" ]; then
    echo "ok   $name: $servers servers x $ndev devices, $nranks ranks ($((SECONDS - t0)) s)"
  else
    failures=$((failures + 1))
    echo "FAIL $name: $servers servers x $ndev devices ($envs $*)"
    for ((k = 0; k < servers; k++)); do sed "s/^/  [server $k] /" "$work/$name.$k" | tail -15; done
  fi
}

# run_uneven NAME LAYOUT TIMEOUT ENV -- PROGRAM ARGS: servers of different counts (LAYOUT 3+2:
# 3 ranks on server 0, 2 on server 1), each rank started with the variables a launcher sets, as
# a script or srun would (launch_uneven below runs npu-launch on such servers); rank r's output
# in $work/NAME.r<r>; returns the number of ranks that failed.
run_uneven() {
  local name=$1 layout=$2 limit=$3 envs=$4
  shift 5
  local counts=(${layout//+/ }) k l r=0 n=0 pids=() bad=0
  for k in "${counts[@]}"; do n=$((n + k)); done
  port=$((port + 1))
  for k in "${!counts[@]}"; do
    for ((l = 0; l < counts[k]; l++)); do
      # shellcheck disable=SC2086
      netns_exec "$k" env HCCL_CONNECT_TIMEOUT=30 HCCL_EXEC_TIMEOUT=60 RANK=$r WORLD_SIZE=$n \
        LOCAL_RANK=$l LOCAL_WORLD_SIZE="${counts[k]}" MASTER_ADDR="$(netns_addr 0)" \
        MASTER_PORT="$port" $envs timeout -k 5 "$limit" "$@" >"$work/$name.r$r" 2>&1 &
      pids+=($!)
      r=$((r + 1))
    done
  done
  for k in "${!pids[@]}"; do
    local st=0
    wait "${pids[$k]}" || st=$?
    [ $st = 0 ] || { bad=$((bad + 1)); echo "  rank $k exited $st"; }
  done
  return $bad
}

# check_uneven NAME LAYOUT ENV -- PROGRAM ARGS: as check, on servers of different counts.
check_uneven() {
  local name=$1 layout=$2 envs=$3
  shift 4
  local n=$((${layout//+/ + })) t0=$SECONDS
  cases=$((cases + 1))
  if run_uneven "$name" "$layout" 300 "$envs" -- "$@" &&
    grep -q "# Out of bounds values : 0 OK" "$work/$name.r0" &&
    [ "$(grep -cE '^#  Rank +[0-9]+ ' "$work/$name.r0")" = "$n" ]; then
    echo "ok   $name: servers of $layout ranks, $n ranks ($((SECONDS - t0)) s)"
  else
    failures=$((failures + 1))
    echo "FAIL $name: servers of $layout ranks ($envs $*)"
    for ((k = 0; k < n; k++)); do sed "s/^/  [rank $k] /" "$work/$name.r$k" | tail -8; done
  fi
}

# lists_of LAYOUT: run_job's DEVICES for servers of LAYOUT's counts (3+2: 0,1,2+0,1).
lists_of() {
  local c out=""
  for c in ${1//+/ }; do out="$out${out:++}$(seq -s, 0 $((c - 1)))"; done
  echo "$out"
}

# launch_uneven NAME LAYOUT -- PROGRAM ARGS: npu-launch on servers of different counts must give
# server k's local rank l the rank (sum of the counts before k) + l, on device l, in a world of
# every count's sum: every launcher exits 0 and says so ("servers met: ranks F-L of world size
# W here"), rank 0's results are right, and it lists each rank with its device.
launch_uneven() {
  local name=$1 layout=$2
  shift 3
  local counts=(${layout//+/ }) n=$((${layout//+/ + })) k l first=0 t0=$SECONDS why=""
  cases=$((cases + 1))
  run_job "$name" "${#counts[@]}" "$(lists_of "$layout")" 120 "" -- "$@" || why="a launcher failed"
  grep -q "# Out of bounds values : 0 OK" "$work/$name.0" || why="${why:-rank 0 found wrong results}"
  for k in "${!counts[@]}"; do
    grep -qF "servers met: ranks $first-$((first + counts[k] - 1)) of world size $n here (server $k of ${#counts[@]}; devices per server $layout)" \
      "$work/$name.$k" || why="${why:-the launcher of server $k did not number ranks $first-$((first + counts[k] - 1)) of $n}"
    for ((l = 0; l < counts[k]; l++)); do
      grep -qE "^#  Rank +$((first + l)) Group +0 Pid +[0-9]+ on +[^ ]+ device +$l\$" "$work/$name.0" ||
        why="${why:-rank 0 lists no rank $((first + l)) on device $l of server $k}"
    done
    first=$((first + counts[k]))
  done
  [ "$(grep -cE '^#  Rank +[0-9]+ ' "$work/$name.0")" = "$n" ] || why="${why:-rank 0 lists other than $n ranks}"
  if [ -z "$why" ]; then
    echo "ok   $name: npu-launch on servers of $layout devices, ranks and world $n right ($((SECONDS - t0)) s)"
  else
    failures=$((failures + 1))
    echo "FAIL $name: npu-launch on servers of $layout devices: $why"
    for k in "${!counts[@]}"; do sed "s/^/  [server $k] /" "$work/$name.$k" | tail -10; done
  fi
}

sweep="-b 1 -e 1M -f 32 -c 1 -n 2 -w 1"
# In a sanitizer's build (SUITE_LEAN=1, from tests/CMakeLists.txt) every type runs with sum
# alone: a collective's path across servers is the same for every op, the ops' kernels are
# test_reduce's and test_coll's there, and every op still runs here in the build without one.
# Under ASan this test took 619 s with every op (2026-12-06), the longest of that pass.
ops=all
[ "${SUITE_LEAN:-0}" = 1 ] && ops=sum

# The issue's case: two servers of four devices, every type and op.
check two_by_four 2 0,1,2,3 "" -- "$bin/allreduce_perf" $sweep -d all -o $ops
# Shapes.
check two_by_one 2 0 "" -- "$bin/allreduce_perf" $sweep -d all -o $ops
check two_by_two 2 0,1 "" -- "$bin/allreduce_perf" $sweep -d all -o $ops
check four_by_two 4 0,1 "" -- "$bin/allreduce_perf" $sweep -d all -o $ops
check three_by_two_hd 3 0,1 "HCCL_ALGO=level0:NA;level1:H-D_R" -- \
  "$bin/allreduce_perf" $sweep -d all -o $ops
# Any count a server: 2 x 3 (the two-level allreduce over servers of three), and servers of
# different counts, 3 + 2 (flat, or through each server's first rank), every program.
check two_by_three 2 0,1,2 "" -- "$bin/allreduce_perf" $sweep -d all -o $ops
check_uneven three_plus_two 3+2 "" -- "$bin/allreduce_perf" $sweep -d all -o $ops
# The same servers under npu-launch, which numbers the ranks itself (servers 0-2, 3-4), and
# 1 + 3 + 2; a short sweep: the collectives across such servers are checked above.
launch_uneven launch_three_plus_two 3+2 -- "$bin/allreduce_perf" -b 1 -e 64K -f 64 -c 1 -n 1 -w 1 -d all -o sum
launch_uneven launch_one_three_two 1+3+2 -- "$bin/allreduce_perf" -b 1 -e 64K -f 64 -c 1 -n 1 -w 1 -d float -o sum
# A server that never comes (3 servers named, 2 started): both launchers fail within
# HCCL_CONNECT_TIMEOUT (2 s here) and a little, before any rank starts, naming server 2 and
# the deadline.
cases=$((cases + 1))
t0=$SECONDS
run_job launch_missing 2 "$(lists_of 3+2)" 60 "HCCL_CONNECT_TIMEOUT=2" 3 -- "$bin/allreduce_perf" -b 1K -e 1K -c 1 -n 1 -w 0 >/dev/null
nfailed=$?
elapsed=$((SECONDS - t0))
if [ "$nfailed" = 2 ] && [ "$elapsed" -le 15 ] &&
  grep -q "server 2 of 3 never said its device count within 2 s" "$work/launch_missing.0" &&
  grep -q "server 0 says: server 2 of 3 never said its device count within 2 s" "$work/launch_missing.1" &&
  ! grep -q "Out of bounds" "$work/launch_missing.0"; then
  echo "ok   launch_missing: server 2 of 3 never came; both launchers failed in $elapsed s, naming it"
else
  failures=$((failures + 1))
  echo "FAIL launch_missing: $nfailed of 2 launchers failed after $elapsed s"
  for k in 0 1; do sed "s/^/  [server $k] /" "$work/launch_missing.$k" | tail -6; done
fi
# Algorithms, forced: two-level with ring / halving-doubling between servers, one flat ring.
check hier_ring 2 0,1,2,3 "HCCL_ALGO=level0:NA;level1:ring" -- "$bin/allreduce_perf" $sweep -d float -o $ops
check hier_hd 4 0,1 "HCCL_ALGO=level0:NA;level1:H-D_R" -- "$bin/allreduce_perf" $sweep -d all -o sum
check flat_ring 2 0,1 "HCCL_ALGO=ring" -- "$bin/allreduce_perf" $sweep -d all -o $ops
check flat_tree 3 0,1 "HCCL_ALGO=tree" -- "$bin/allreduce_perf" $sweep -d all -o sum
# The two-level allreduce on HcclMemAlloc buffers (-R 1): from 64 KiB its steps inside each
# server run zero-copy, as every rank's trace must say; every type and op, 2 x 4 and 3 x 2.
for shape in "2 0,1,2,3 8" "3 0,1 6"; do
  read -r ns devs nr <<<"$shape"
  name=zcopy_${ns}x$(($(tr -cd , <<<"$devs" | wc -c) + 1))
  check "$name" "$ns" "$devs" "HCCL_TRACE_FILE=$work/$name.%r.json" -- "$bin/allreduce_perf" $sweep -R 1 -d all -o $ops
  for ((r = 0; r < nr; r++)); do
    grep -q 'between servers, zero-copy inside servers"' "$work/$name.$r.json" 2>/dev/null && continue
    failures=$((failures + 1))
    echo "FAIL $name: rank $r's trace names no two-level allreduce that ran zero-copy inside its server"
    break
  done
done
# The same on malloc buffers: from 64 KiB the steps inside each server of 4 run staged
# (algo/staged.c), as every rank's trace must say.
check staged_2x4 2 0,1,2,3 "HCCL_TRACE_FILE=$work/staged_2x4.%r.json" -- "$bin/allreduce_perf" $sweep -d all -o $ops
for ((r = 0; r < 8; r++)); do
  grep -q 'between servers, staged inside servers"' "$work/staged_2x4.$r.json" 2>/dev/null && continue
  failures=$((failures + 1))
  echo "FAIL staged_2x4: rank $r's trace names no two-level allreduce that ran staged inside its server"
  break
done
# Every other collective program that was built, across 3 servers x 2 and 2 x 4.
for prog in all_gather_perf reduce_scatter_perf broadcast_perf reduce_perf alltoall_perf sendrecv_perf; do
  [ -x "$bin/$prog" ] || continue
  check "${prog}_3x2" 3 0,1 "" -- "$bin/$prog" -b 1 -e 256K -f 16 -c 1 -n 2 -w 1 -d all -o $ops
  check "${prog}_2x4" 2 0,1,2,3 "" -- "$bin/$prog" -b 1 -e 256K -f 16 -c 1 -n 2 -w 1 -d all -o $ops
  check_uneven "${prog}_3+2" 3+2 "" -- "$bin/$prog" -b 1 -e 256K -f 16 -c 1 -n 2 -w 1 -d all -o $ops
done

# HCCL's whitelist on the TCP listeners: with both servers' addresses listed the job runs; when
# server 1's ranks list only their own server, they refuse server 0's connections, and the job
# fails at init on both servers (within HCCL_CONNECT_TIMEOUT, 5 s here), saying why.
for k in 0 1; do
  printf '{"host_ip": ["%s", "%s"], "device_ip": []}\n' "$(netns_addr 0)" "$(netns_addr 1)" >"$work/wl_ok.$k.json"
done
printf '{"host_ip": ["%s", "%s"], "device_ip": []}\n' "$(netns_addr 0)" "$(netns_addr 1)" >"$work/wl_no.0.json"
printf '{"host_ip": ["%s"], "device_ip": []}\n' "$(netns_addr 1)" >"$work/wl_no.1.json"
check whitelist_ok 2 0 "HCCL_WHITELIST_DISABLE=0 HCCL_WHITELIST_FILE=$work/wl_ok.%k.json" -- \
  "$bin/allreduce_perf" -b 1K -e 1K -c 1 -n 1 -w 0
cases=$((cases + 1))
t0=$SECONDS
if run_job whitelist_no 2 0 60 "HCCL_CONNECT_TIMEOUT=5 HCCL_WHITELIST_DISABLE=0 HCCL_WHITELIST_FILE=$work/wl_no.%k.json" -- \
  "$bin/allreduce_perf" -b 1K -e 1K -c 1 -n 1 -w 0 >/dev/null; then
  failures=$((failures + 1))
  echo "FAIL whitelist_no: a job whose server 1 does not list server 0 ran"
elif grep -q "not in HCCL_WHITELIST_FILE" "$work/whitelist_no.1"; then
  echo "ok   whitelist_no: server 1 refused server 0's connection ($((SECONDS - t0)) s)"
else
  failures=$((failures + 1))
  echo "FAIL whitelist_no: no refusal naming the whitelist"
  for k in 0 1; do sed "s/^/  [server $k] /" "$work/whitelist_no.$k" | tail -6; done
fi

# fault NAME SIGNAL EXEC_TIMEOUT LIMIT SIZE: a rank of server 1 gets SIGNAL two seconds into a
# run of SIZE allreduces; every server's launcher must fail within LIMIT seconds of it. At 4 KiB
# the ranks wait for each message reading their sockets themselves (transport/tcp/tcp_data.c),
# at 64 MiB their I/O threads read.
fault() {
  local name=$1 sig=$2 exec_timeout=$3 limit=$4 size=$5 victim="" pid job nfailed elapsed t_sig
  cases=$((cases + 1))
  run_job "$name" 2 0,1 120 "HCCL_EXEC_TIMEOUT=$exec_timeout" -- \
    "$bin/allreduce_perf" -b "$size" -e "$size" -n 100000000 -w 0 -c 0 &
  job=$!
  # A rank of server 1: a process in its namespace running allreduce_perf (pids are shared
  # between the namespaces, so ask the namespace, not pgrep).
  for _ in $(seq 1 100); do
    for pid in $(ip netns pids "${NETNS_PREFIX}_1" 2>/dev/null); do
      grep -q allreduce_perf "/proc/$pid/comm" 2>/dev/null && { victim=$pid; break; }
    done
    [ -n "$victim" ] && break
    sleep 0.1
  done
  sleep 2
  [ -n "$victim" ] && kill -"$sig" "$victim"
  t_sig=$SECONDS
  wait $job
  nfailed=$?
  elapsed=$((SECONDS - t_sig))
  if [ -n "$victim" ] && [ "$nfailed" = 2 ] && [ "$elapsed" -le "$limit" ]; then
    echo "ok   $name: both servers' launchers failed ${elapsed} s after SIG$sig to pid $victim on server 1"
  else
    failures=$((failures + 1))
    echo "FAIL $name: victim '$victim', $nfailed of 2 launchers failed, $elapsed s after SIG$sig"
  fi
  grep -h "ERROR" "$work/$name.0" | head -2 | cut -c1-300 | sed 's/^/  server 0 said: /'
}

# Killed: seen at once (the connection closes without a BYE), far below HCCL_EXEC_TIMEOUT.
fault killed KILL 60 10 64M
fault killed_4k KILL 60 10 4K
# Frozen: found by HCCL_EXEC_TIMEOUT (5 s here); then server 1's launcher stops its ranks.
fault frozen STOP 5 25 64M
fault frozen_4k STOP 5 25 4K

# Elastic restarts across servers: ddp_train on 2 servers x 2, rank 1 (server 0) exits at step
# 12 on the first start; both launchers (--max-restarts 1) agree through their store on server
# 0, every rank starts again from the step-10 checkpoint, and the job ends at the final loss of
# the same job run without a failure.
restart_job() {
  local name=$1 k pids=() bad=0
  shift
  port=$((port + 2)) # the launchers' store takes --master-port + 1
  for k in 0 1; do
    netns_exec "$k" env HCCL_CONNECT_TIMEOUT=30 HCCL_EXEC_TIMEOUT=30 timeout -k 5 200 \
      "$bin/npu-launch" --max-restarts 1 --nnodes 2 --node-rank "$k" --master-addr "$(netns_addr 0)" \
      --master-port "$port" --device-list 0,1 -- "$@" \
      >"$work/$name.$k" 2>&1 &
    pids+=($!)
  done
  for k in 0 1; do wait "${pids[$k]}" || bad=$((bad + 1)); done
  return $bad
}
cases=$((cases + 1))
t0=$SECONDS
train=("$bin/ddp_train" --steps 16 --global-batch 64)
restart_job plain "${train[@]}"
restart_job resumed "${train[@]}" --checkpoint "$work/ckpt" --checkpoint-every 5 --fail-at-step 12
rc=$?
want=$(sed -n 's/.*final loss \([0-9.]*\).*/\1/p' "$work/plain.0" | head -1)
got=$(sed -n 's/.*final loss \([0-9.]*\).*/\1/p' "$work/resumed.0" | head -1)
if [ "$rc" = 0 ] && [ -n "$want" ] && [ "$got" = "$want" ] &&
  grep -q "starting every rank again: restart 1 of 1" "$work/resumed.1" &&
  grep -q "resuming at step 10" "$work/resumed.0"; then
  echo "ok   restart: rank 1 failed at step 12, both servers started again, final loss $got = $want ($((SECONDS - t0)) s)"
else
  failures=$((failures + 1))
  echo "FAIL restart: exit $rc, final loss '$got' against '$want'"
  for k in 0 1; do sed "s/^/  [server $k] /" "$work/resumed.$k" | tail -12; done
fi

# The same when the other server's ranks would never fail by themselves (they call no
# collective): its launcher learns of the failure from the store and stops them.
cases=$((cases + 1))
t0=$SECONDS
restart_job idle sh -c 'if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then
    [ "$RANK" = 1 ] && exit 3; sleep 100; fi; echo "rank $RANK done in start $TORCHELASTIC_RESTART_COUNT"'
rc=$?
if [ "$rc" = 0 ] && [ $((SECONDS - t0)) -lt 60 ] &&
  grep -q "a rank on another server failed (start 0): stopping this server's ranks" "$work/idle.1" &&
  grep -q "rank 3 done in start 1" "$work/idle.1" && grep -q "rank 0 done in start 1" "$work/idle.0"; then
  echo "ok   restart_idle: server 1's sleeping ranks stopped through the launchers' store, all done in start 1 ($((SECONDS - t0)) s)"
else
  failures=$((failures + 1))
  echo "FAIL restart_idle: exit $rc after $((SECONDS - t0)) s"
  for k in 0 1; do sed "s/^/  [server $k] /" "$work/idle.$k" | tail -8; done
fi

# The plain allreduce bench/multiserver.sh builds (bench/tcp_plain.c): between two servers,
# an exchange and an allreduce of 1 MiB for 3 rounds, every received word checked; both sides
# print a rate and exit 0; an argument out of range is refused with the rule (exit 2) before any
# socket is made.
if ! command -v cc >/dev/null; then
  cases=$((cases + 1))
  echo "ok   tcp_plain: skipped, no C compiler (cc) to build bench/tcp_plain.c"
elif ! cc -O2 -o "$work/tcp_plain" "$here/../../bench/tcp_plain.c" 2>"$work/tcp_plain.build"; then
  cases=$((cases + 1)) failures=$((failures + 1))
  echo "FAIL tcp_plain: bench/tcp_plain.c does not build"
  sed 's/^/  /' "$work/tcp_plain.build" | tail -6
else
  for kind in exchange allreduce; do
    cases=$((cases + 1))
    port=$((port + 1))
    netns_exec 0 timeout 60 "$work/tcp_plain" serve "$(netns_addr 0)" "$port" 1048576 3 "$kind" >"$work/plain.0" 2>&1 &
    fpid=$!
    netns_exec 1 timeout 60 "$work/tcp_plain" connect "$(netns_addr 0)" "$port" 1048576 3 "$kind" >"$work/plain.1" 2>&1
    st1=$? st0=0
    wait "$fpid" || st0=$?
    line="^tcp_plain $kind bytes=1048576 gbs=[0-9]+\.[0-9]+\$"
    if [ $st0 = 0 ] && [ $st1 = 0 ] && grep -qE "$line" "$work/plain.0" && grep -qE "$line" "$work/plain.1"; then
      echo "ok   tcp_plain_$kind: $(cat "$work/plain.0") between two servers, data checked"
    else
      failures=$((failures + 1))
      echo "FAIL tcp_plain_$kind: exits $st0 $st1"
      cat "$work/plain.0" "$work/plain.1" | sed 's/^/  /' | tail -8
    fi
  done
  cases=$((cases + 1))
  "$work/tcp_plain" connect 127.0.0.1 1 1000 >"$work/plain.bad" 2>&1
  stb=$?
  if [ $stb = 2 ] && grep -q "bytes is out of range" "$work/plain.bad"; then
    echo "ok   tcp_plain_bad: bytes=1000 refused (exit 2) with the rule"
  else
    failures=$((failures + 1))
    echo "FAIL tcp_plain_bad: exit $stb"
    sed 's/^/  /' "$work/plain.bad" | tail -4
  fi
fi

echo "$((cases - failures)) passed, $failures failed"
[ "$failures" = 0 ]
