#!/usr/bin/env bash
# rdma_port_down.sh - a port going down in the middle of a run (issue 57): in one guest with rxe0
# (tests/rdma/guest.sh run), two pretend servers x 2 ranks run an allreduce over RDMA that would
# go on for hours; once their queue pairs are up, `ip link set $GUEST_DEV down` takes the dummy
# under rxe0 down. rxe sees NETDEV_DOWN and raises IBV_EVENT_PORT_ERR on every context of rxe0
# (the kernel's rxe_notify -> rxe_port_down), and every send after it fails at once (the route
# through a device that is down is gone: a local QP operation error). Every rank, of both pretend
# servers, since they share the port, must end with an error naming the fault and its own server
# ("network fault between server rdma-serverK and server rdma-serverJ (rank R): rxe0 port 1 of
# server rdma-serverK went down") within HCCL_EXEC_TIMEOUT (40 s) of the cut: not at that
# timeout, and not at a retry count's end either, as the queue pairs keep HCCL's default retry
# count (7, which rxe takes as "retry forever"). The launchers run with --on-failure continue, so
# a rank's error is its own, not its neighbour's SIGTERM. The port is brought up again after.
#
#   (in a guest with rxe0) bash tests/rdma/rdma_port_down.sh BUILD
#   guest.sh run BUILD -- bash tests/rdma/rdma_port_down.sh BUILD
set -u
build=$(cd "${1:?usage: rdma_port_down.sh BUILD}" && pwd)
b=$build/bin
dev=${GUEST_DEV:?run in a guest with rxe0 (tests/rdma/guest.sh run)}
out=${GUEST_OUT:-/tmp}/port_down
limit=40
rm -rf "$out"
mkdir -p "$out"
port=$((29800 + RANDOM % 100))
pids=()
for k in 0 1; do
  HCCL_NET=${HCCL_NET:-rdma} HCCL_IF_IP=$GUEST_ADDR HCCL_EXEC_TIMEOUT=$limit HCCL_CONNECT_TIMEOUT=60 \
    unshare -u sh -c 'hostname "$0"; exec "$@"' "rdma-server$k" \
    timeout -k 5 200 "$b/npu-launch" --nnodes 2 --node-rank $k --master-addr "$GUEST_ADDR" \
    --master-port $port --device-list 0,1 --on-failure continue --log-dir "$out/server$k" -- \
    "$b/allreduce_perf" -b 256K -e 256K -n 1000000 -w 0 -c 0 >"$out/launch$k" 2>&1 &
  pids+=($!)
done
# The cut comes once the job's RC queue pairs are up (a link made on first use, 2 s to settle).
for ((i = 0; i < 120; i++)); do
  rdma resource show qp 2>/dev/null | grep -q "type RC" && break
  sleep 0.5
done
sleep 2
echo "   queue pairs up after ~$((i / 2)) s: $(rdma resource show qp | grep -c 'type RC') RC"
cut=$(date +%s.%N)
ip link set "$dev" down
echo "   ip link set $dev down; rdma link: $(rdma link show rxe0/1 | grep -o '^link [^ ]* state [A-Z]*')"
for p in "${pids[@]}"; do wait "$p"; done
took=$(awk -v a="$cut" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
ip link set "$dev" up
echo "   every launcher ended ${took} s after the cut; $dev up again: $(rdma link show rxe0/1 | grep -o '^link [^ ]* state [A-Z]*')"
fails=0
for k in 0 1; do
  for r in $((2 * k)) $((2 * k + 1)); do
    f=$out/server$k/rank_$r.log
    line=$(grep -h "ERROR" "$f" 2>/dev/null | head -1)
    echo "   rank $r: ${line:-no ERROR line}"
    if ! grep "ERROR" "$f" 2>/dev/null | grep -q "network fault between server rdma-server$k and server rdma-server$((1 - k)) (rank [0-9]*): rxe0 port 1 of server rdma-server$k went down"; then
      echo "   FAIL: rank $r (server rdma-server$k) did not name its port going down"
      fails=$((fails + 1))
    fi
  done
done
if awk -v t="$took" -v l="$limit" 'BEGIN { exit !(t > l) }'; then
  echo "   FAIL: the ranks took ${took} s, more than HCCL_EXEC_TIMEOUT=$limit s"
  fails=$((fails + 1))
fi
if [ $fails != 0 ]; then
  for k in 0 1; do tail -n 20 "$out/launch$k" "$out"/server$k/rank_*.log; done
fi
exit $fails
