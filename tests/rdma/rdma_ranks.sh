#!/usr/bin/env bash
# rdma_ranks.sh - pretend servers over RDMA inside one guest with rxe0 (tests/rdma/guest.sh run):
# one npu-launch per server, each in a UTS namespace of its own with a hostname of its own
# (`unshare -u`), which is enough for this library to tell servers apart (the host hash is the
# hostname, the boot id and the network namespace) while every rank reaches rxe0 over the one
# dummy device (two rxe devices in two network namespaces do not talk in 6.1: issue 57). The
# links between servers are forced onto RDMA (HCCL_NET=rdma), so a rank that cannot use it fails
# instead of falling back to TCP. Passes when every launcher exits 0.
#
#   guest.sh run BUILD -- bash tests/rdma/rdma_ranks.sh BUILD SERVERS DEVICES -- PROGRAM ARGS
#
# Each launcher's output goes to $GUEST_OUT/server<k> (or /tmp) and is printed at the end, with
# `rdma resource show` while the job ran and after it ended (no QP, CQ or MR left behind).
set -u
build=${1:?usage: rdma_ranks.sh BUILD SERVERS DEVICES -- PROGRAM ARGS}
servers=${2:?servers}
devs=${3:?devices per server}
shift 3
[ "${1:-}" = "--" ] && shift
bin=$(cd "$build" && pwd)/bin
out=${GUEST_OUT:-/tmp}
addr=${GUEST_ADDR:-127.0.0.1}
port=$((29500 + RANDOM % 1000))
devlist=$(seq -s, 0 $((devs - 1)))
before=$(rdma resource show 2>&1)
pids=()
for ((k = 0; k < servers; k++)); do
  HCCL_NET=${HCCL_NET:-rdma} HCCL_IF_IP=$addr HCCL_CONNECT_TIMEOUT=${HCCL_CONNECT_TIMEOUT:-60} \
    HCCL_EXEC_TIMEOUT=${HCCL_EXEC_TIMEOUT:-120} \
    unshare -u sh -c 'hostname "$0"; exec "$@"' "rdma-server$k" \
    timeout -k 5 "${RDMA_RANKS_TIMEOUT:-240}" "$bin/npu-launch" --nnodes "$servers" \
    --node-rank "$k" --master-addr "$addr" --master-port "$port" --device-list "$devlist" \
    -- "$@" >"$out/server$k" 2>&1 &
  pids+=($!)
done
sleep "${RDMA_RANKS_PEEK:-3}"
during=$(rdma resource show qp 2>&1 | grep -c "qpn" || true)
bad=0
for k in "${!pids[@]}"; do
  st=0
  wait "${pids[$k]}" || st=$?
  echo "=== server $k exited $st"
  sed 's/^/  /' "$out/server$k"
  [ $st = 0 ] || bad=$((bad + 1))
done
after=$(rdma resource show 2>&1)
echo "=== rdma resource show, before the job:"
echo "$before" | sed 's/^/  /'
echo "=== queue pairs listed ${RDMA_RANKS_PEEK:-3} s into the job: $during"
echo "=== rdma resource show, after it:"
echo "$after" | sed 's/^/  /'
[ "$before" = "$after" ] || { echo "FAIL: resources left behind"; bad=$((bad + 1)); }
exit $bad
