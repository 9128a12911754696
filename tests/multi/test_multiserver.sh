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
# two); the two-level allreduce forced with ring and halving-doubling between servers, and a
# flat ring; every other collective program that was built. A server's rank killed in the
# middle of a run must stop every server's launcher with an error within seconds. Skipped
# (exit 77, which ctest reports as skipped) where network namespaces cannot be made.
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

# run_job NAME SERVERS DEVICES TIMEOUT ENV -- PROGRAM ARGS: one npu-launch per server, all at
# once; every launcher's output in $work/NAME.<k>; returns the number of launchers that failed.
run_job() {
  local name=$1 servers=$2 devs=$3 limit=$4 envs=$5
  shift 6
  local k pids=() bad=0
  port=$((port + 1))
  for ((k = 0; k < servers; k++)); do
    # shellcheck disable=SC2086
    netns_exec "$k" env $envs HCCL_CONNECT_TIMEOUT=30 HCCL_EXEC_TIMEOUT=60 \
      timeout -k 5 "$limit" "$bin/npu-launch" --nnodes "$servers" --node-rank "$k" \
      --master-addr "$(netns_addr 0)" --master-port "$port" --device-list "$devs" -- "$@" \
      >"$work/$name.$k" 2>&1 &
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

sweep="-b 1 -e 1M -f 32 -c 1 -n 2 -w 1"

# The issue's case: two servers of four devices, every type and op.
check two_by_four 2 0,1,2,3 "" -- "$bin/allreduce_perf" $sweep -d all -o all
# Shapes.
check two_by_one 2 0 "" -- "$bin/allreduce_perf" $sweep -d all -o all
check two_by_two 2 0,1 "" -- "$bin/allreduce_perf" $sweep -d all -o all
check four_by_two 4 0,1 "" -- "$bin/allreduce_perf" $sweep -d all -o all
check three_by_two_hd 3 0,1 "HCCL_ALGO=level0:NA;level1:H-D_R" -- \
  "$bin/allreduce_perf" $sweep -d all -o all
# Algorithms, forced: two-level with ring / halving-doubling between servers, one flat ring.
check hier_ring 2 0,1,2,3 "HCCL_ALGO=level0:NA;level1:ring" -- "$bin/allreduce_perf" $sweep -d float -o all
check hier_hd 4 0,1 "HCCL_ALGO=level0:NA;level1:H-D_R" -- "$bin/allreduce_perf" $sweep -d all -o sum
check flat_ring 2 0,1 "HCCL_ALGO=ring" -- "$bin/allreduce_perf" $sweep -d all -o all
check flat_tree 3 0,1 "HCCL_ALGO=tree" -- "$bin/allreduce_perf" $sweep -d all -o sum
# Every other collective program that was built, across 3 servers x 2 and 2 x 4.
for prog in all_gather_perf reduce_scatter_perf broadcast_perf reduce_perf alltoall_perf sendrecv_perf; do
  [ -x "$bin/$prog" ] || continue
  check "${prog}_3x2" 3 0,1 "" -- "$bin/$prog" -b 1 -e 256K -f 16 -c 1 -n 2 -w 1 -d all -o all
  check "${prog}_2x4" 2 0,1,2,3 "" -- "$bin/$prog" -b 1 -e 256K -f 16 -c 1 -n 2 -w 1 -d all -o all
done

# A rank killed on server 1 mid-run: every server's launcher must fail, well before the
# 60 s HCCL_EXEC_TIMEOUT.
cases=$((cases + 1))
t0=$SECONDS
run_job killed 2 0,1 120 "" -- "$bin/allreduce_perf" -b 64M -e 64M -n 100000 -w 0 -c 0 &
job=$!
victim=""
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
[ -n "$victim" ] && kill -9 "$victim"
t_kill=$SECONDS
wait $job
nfailed=$?
elapsed=$((SECONDS - t_kill))
if [ -n "$victim" ] && [ "$nfailed" = 2 ] && [ "$elapsed" -lt 30 ]; then
  echo "ok   killed: both servers' launchers failed ${elapsed} s after SIGKILL of pid $victim on server 1"
else
  failures=$((failures + 1))
  echo "FAIL killed: victim '$victim', $nfailed of 2 launchers failed, $elapsed s after the kill"
  for k in 0 1; do sed "s/^/  [server $k] /" "$work/killed.$k" | tail -8; done
fi
grep -h "failed\|exited\|closed\|reset" "$work/killed.0" | head -3 | sed 's/^/  server 0 said: /'

echo "$((cases - failures)) passed, $failures failed"
[ "$failures" = 0 ]
