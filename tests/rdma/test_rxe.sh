#!/usr/bin/env bash
# test_rxe.sh - the RDMA guests of tests/rdma/guest.sh work, before libhccl's own RDMA tests use
# them: rdma-core's programs, not the library, on rxe0 (software RoCE v2, GID index 1 = IPv4).
#
#   one guest   `ibv_devinfo -d rxe0` shows an active port, and `ibv_rc_pingpong -d rxe0 -g 1
#               -s 65536 -n 500` passes between a server and a client process of that guest,
#               over its dummy device's address
#   two guests  a pingpong of 200 x 4 KiB between the guests, over the socket netdev's wire, then
#               each guest's rxe0 counters (`rdma statistic show`: packets, retries)
#
# Why smaller between guests: ibv_rc_pingpong fixes its QP's timeout at 14 (67 ms) and its retry
# count at 7, which rxe takes as "retry forever". Under emulation a 64 KiB message (64 packets
# at rxe's MTU of 1024) between two guests often takes longer than 67 ms to be acknowledged, so
# rxe resends it from its first packet, again and again: 500 x 64 KiB took 14 s with 134 of
# those resends when it passed, and in 1 of 3 runs on a quiet machine (2026-12-07) it did not
# end within 120 s. At 4 KiB (4 packets) a resend is short and the pair ends in 9-13 s.
#
# Each step's lines of rdma-core's output are printed, and the test fails naming the step.
# Skipped (77) where the guests cannot run (guest.sh check says what to install).
#
#   bash tests/rdma/test_rxe.sh BUILD_DIR
set -u
build=${1:?usage: test_rxe.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/rdma/guest.sh
. "$here/guest.sh"
guest_check || exit 77
guest_prepare "$build"
rc=$?
[ $rc = 0 ] || exit $rc

# The pingpong's server on this guest, then its client to SERVER_ADDR; a client that cannot
# connect yet (the server or the other guest still starting) tries again, up to 60 times.
# shellcheck disable=SC2016
pingpong='
pp() { timeout 120 ibv_rc_pingpong -d rxe0 -g 1 ${PP_SIZE:--s 65536 -n 500} "$@"; }
client() {
  local i
  for ((i = 0; i < 60; i++)); do
    pp "$1" >"$GUEST_OUT/client.log" 2>&1 && { cat "$GUEST_OUT/client.log"; return 0; }
    grep -q "Couldn.t connect" "$GUEST_OUT/client.log" || break
    sleep 1
  done
  echo "client failed:"; cat "$GUEST_OUT/client.log"; return 1
}
'
fail=0

# One guest: ibv_devinfo, then a server and a client process on 10.233.1.1.
# shellcheck disable=SC2016
one=$pingpong'
ibv_devinfo -d rxe0 | grep -E "hca_id|state:|link_layer" || { echo "ibv_devinfo failed"; exit 1; }
ibv_devinfo -d rxe0 | grep -q PORT_ACTIVE || { echo "rxe0 port not active"; exit 1; }
pp >"$GUEST_OUT/server.log" 2>&1 &
server=$!
client "$GUEST_ADDR" || { kill $server; exit 1; }
wait $server || { echo "server failed:"; cat "$GUEST_OUT/server.log"; exit 1; }
echo "server:"; cat "$GUEST_OUT/server.log"
'
echo "== one guest: ibv_devinfo and ibv_rc_pingpong between two processes"
t0=$SECONDS
if guest_run "$build" -t 240 -- bash -c "$one"; then
  echo "ok: one guest ($((SECONDS - t0)) s)"
else
  echo "FAIL: one guest: ibv_devinfo or ibv_rc_pingpong on rxe0 over dummy0"
  fail=1
fi

# Two guests: the server in guest 0, the client in guest 1 to guest 0's eth0 address.
# shellcheck disable=SC2016
two=$pingpong'
PP_SIZE="-s 4096 -n 200"
if [ "$GUEST_ID" = 0 ]; then
  pp
else
  client "$GUEST_PEER"
fi
st=$?
echo "rxe0 counters: $(rdma statistic show link rxe0/1 | tr " " "\n" | paste - - | awk "\$2 != 0" | tr "\t\n" "= " | sed "s/[= ]*\$//")"
exit $st
'
echo "== two guests: ibv_rc_pingpong (200 x 4 KiB) between them over the socket netdev"
t0=$SECONDS
if guest_pair "$build" -t 240 -- bash -c "$two"; then
  echo "ok: two guests ($((SECONDS - t0)) s)"
else
  echo "FAIL: two guests: ibv_rc_pingpong between rxe0 on eth0 of each"
  fail=1
fi
exit $fail
