#!/usr/bin/env bash
# test_cable.sh - a cut cable told from a frozen process (issue 45): three pretend servers
# (network namespaces, tests/multi/netns.sh, named cb<pid>) of one rank each run allreduces
# under npu-launch with HCCL_EXEC_TIMEOUT=5, and one fault is made in the middle of the run:
#
#   cable   server 2's bridge port goes down: cut off from every server
#   pair    servers 1 and 2 lose each other (a blackhole route each way), both still reach 0
#   frozen  server 2's rank gets SIGSTOP: its host still answers, its process does not
#
# Each case passes when every rank that can speak (the frozen one cannot) logs, within 10 s of
# the fault, one error naming the right kind of fault (core/progress.c: "is cut off",
# "network fault between", "stopped or frozen") and the right server by its address, and no
# other kind. Skipped (77) where network namespaces cannot be made.
#
#   bash tests/multi/test_cable.sh BUILD_DIR
set -u
build=${1:?usage: test_cable.sh BUILD_DIR}
bin=$build/bin
here=$(cd "$(dirname "$0")" && pwd)
NETNS_PREFIX=cb$$
NETNS_VETH=cb$$
. "$here/netns.sh"
work=$(mktemp -d /tmp/hccl-cable.XXXXXX)
netns_up_or_exit 3
trap 'netns_down; rm -rf "$work"' EXIT
port=$(netns_port)
failures=0

# Each line of its input with the time it arrived (seconds since 1970).
stamp() {
  local l
  while IFS= read -r l; do printf '%s %s\n' "$EPOCHREALTIME" "$l"; done
}

# fault NAME MAKE UNDO KIND SERVERS SPEAKERS: runs the job, calls MAKE once every rank is in its
# run, then checks the first error line of each server in SPEAKERS (e.g. "0 1 2"): it matches
# KIND (a grep -E pattern), names the address of each server in SERVERS and came within 10 s.
# UNDO runs once the servers in SPEAKERS have ended.
fault() {
  local name=$1 make=$2 undo=$3 kind=$4 server=$5 speakers=$6 k pids=() t_cut line t ok=1
  port=$((port + 2))
  for k in 0 1 2; do
    netns_exec "$k" env HCCL_CONNECT_TIMEOUT=20 HCCL_EXEC_TIMEOUT=5 HCCL_ALGO=ring \
      timeout -k 5 40 "$bin/npu-launch" --nnodes 3 --node-rank "$k" \
      --master-addr "$(netns_addr 0)" --master-port "$port" --device-list 0 -- \
      "$bin/allreduce_perf" -b 4K -e 4K -n 100000000 -w 0 -c 0 2>&1 | stamp >"$work/$name.$k" &
    pids+=($!)
  done
  for _ in $(seq 1 300); do
    grep -qE '#  Rank +2 ' "$work/$name.0" 2>/dev/null && break
    sleep 0.1
  done
  sleep 1
  t_cut=$EPOCHREALTIME
  $make
  # The servers that speak end on their error; then UNDO (the frozen rank killed: stopped, it
  # would sit out its timeout's 40 s), then the rest.
  for k in $speakers; do wait "${pids[$k]}"; done
  $undo
  for k in 0 1 2; do wait "${pids[$k]}"; done
  for k in $speakers; do
    line=$(grep -m1 'ERROR' "$work/$name.$k")
    t=${line%% *}
    if [ -z "$line" ]; then
      ok=0 && echo "  server $k logged no error"
    elif ! grep -qE -- "$kind" <<<"$line" || ! names "$line" $server; then
      ok=0 && echo "  server $k: not '$kind' naming server(s) $server: ${line:0:900}"
    elif grep -qE -- "$OTHER" <<<"${line/$kind/}"; then
      ok=0 && echo "  server $k names another kind of fault too: ${line:0:900}"
    elif awk -v a="$t" -v b="$t_cut" 'BEGIN { exit !(a - b > 10) }'; then
      ok=0 && echo "  server $k: the error came $(awk -v a="$t" -v b="$t_cut" 'BEGIN { print a - b }') s after the fault"
    else
      echo "  server $k after $(awk -v a="$t" -v b="$t_cut" 'BEGIN { printf "%.1f", a - b }') s: ${line#* }" | cut -c1-400
    fi
  done
  if [ $ok = 1 ]; then
    echo "ok   $name"
  else
    failures=$((failures + 1))
    echo "FAIL $name"
    for k in 0 1 2; do tail -5 "$work/$name.$k" | cut -c1-600 | sed "s/^/  [server $k] /"; done
  fi
}
# names LINE SERVER...: whether LINE holds the address of every SERVER.
names() {
  local line=$1 s
  shift
  for s in "$@"; do grep -qE -- "$(netns_addr "$s" | sed 's/\./\\./g')([^0-9]|\$)" <<<"$line" || return 1; done
}
# Kinds that must not appear beside the right one.
OTHER='is cut off|network fault between|stopped or frozen'

sw=${NETNS_PREFIX}_sw
cable_cut() { ip -n "$sw" link set "${NETNS_VETH}p2" down; }
cable_mend() { ip -n "$sw" link set "${NETNS_VETH}p2" up; }
pair_cut() {
  netns_exec 1 ip route add blackhole "$(netns_addr 2)/32"
  netns_exec 2 ip route add blackhole "$(netns_addr 1)/32"
}
pair_mend() {
  netns_exec 1 ip route del blackhole "$(netns_addr 2)/32"
  netns_exec 2 ip route del blackhole "$(netns_addr 1)/32"
}
frozen_signal() {
  local pid
  for pid in $(ip netns pids "${NETNS_PREFIX}_2"); do
    grep -q allreduce_perf "/proc/$pid/comm" 2>/dev/null && kill "-$1" "$pid"
  done
}
freeze() { frozen_signal STOP; }
kill_frozen() { frozen_signal KILL; }

fault cable cable_cut cable_mend 'is cut off' 2 "0 1 2"
fault pair pair_cut pair_mend 'network fault between' "1 2" "0 1 2"
fault frozen freeze kill_frozen 'stopped or frozen' 2 "0 1"

echo "$((3 - failures)) passed, $failures failed"
[ "$failures" = 0 ]
