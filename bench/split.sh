#!/usr/bin/env bash
# split.sh - the time to make the groups of a 3D layout (tensor x pipeline x data), HcclCommSplit
# one call per group (split) and the three in one HcclGroupStart/End (group), against today's
# bootstrap per group (bench/split_probe.c): at 8 ranks on this server, then,
# when servers are given, across S pretend servers x D devices (network namespaces,
# tests/multi/netns.sh, as bench/scale.sh; needs root). One line per run from split_probe.
# --torch: the same layout made through torch's new_group at 8 ranks (bench/torch_split.py):
# hccl's split, hccl over the store (TORCH_HCCL_SPLIT=0), and gloo; one line each.
#
# SPLIT_LOG=dir keeps the pretend servers' logs (HCCL_LOG_LEVEL=info) as dir/<S>.<mode>.<k>.log:
# each split's and each group's bootstrap phases, and the TCP links each group dialled/accepted;
# after each split run a line per split gives their means over the ranks (split_phases below).
#
# usage: bash bench/split.sh [build] ["64 128" servers] [D=1] [TP=2] [PP=2]
#        bash bench/split.sh --torch [build] [TP=2] [PP=2]
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../tests/multi/netns.sh" # netns_port; netns_up for the servers below
case "${1:-}" in
-h | --help) awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
--torch)
  BUILD=$(cd "${2:-build}" && pwd)
  TP=${3:-2} PP=${4:-2}
  port=$(netns_port)
  status=0
  for run in "hccl 1" "hccl 0" "gloo 1"; do
    set -- $run
    port=$((port + 1))
    PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}" TORCH_HCCL_SPLIT=$2 OMP_NUM_THREADS=1 \
      timeout -k 5 300 "$BUILD/bin/npu-launch" --master-port "$port" \
      --device-list 0,1,2,3,4,5,6,7 -- "$(cat "$BUILD/python/INTERPRETER" 2>/dev/null || echo python3)" \
      "$HERE/torch_split.py" "$1" "$TP" "$PP" 2>&1 | grep "^torch_split:" || status=1
  done
  exit $status ;;
-*) echo "split.sh: unknown option '$1'; see bash bench/split.sh --help" >&2; exit 2 ;;
esac
# The means over the ranks of split q's phases (ms) and its group's TCP links, from the logs
# "$1".split.*.log: the parent round (with the wait for the slowest rank's previous split),
# the group's bootstrap and its "conn", links and "ready" phases, links made and dialled.
# "$3": split or group (whose three splits share one parent round).
split_phases() {
  local q
  for q in 0 1 2; do
    cat "$1"."$3".*.log | awk -v q="$q" -v S="$2" -v M="$3" '
      function val(k,  i) { for (i = 1; i < NF; i++) if ($i == k) return $(i + 1); return 0 }
      $0 ~ "HcclCommSplit " q ":" { ag += val("allgather"); gb += val("bootstrap"); n++ }
      $0 ~ "split" q "\\.[0-9-]+ rank .*bootstrap phases" { c += val("conn"); l += val("links"); r += val("ready") }
      $0 ~ "split" q "\\.[0-9-]+ rank .*TCP transport: rank .* made" { m += val("made"); d += $(index_d()) }
      function index_d(  i) { for (i = 1; i < NF; i++) if ($i == "dialled,") return i - 1; return 1 }
      END { if (n) printf "split_phases: servers %s mode %s split %d ranks %d parent_allgather_ms %.1f " \
            "group_bootstrap_ms %.1f conn %.1f links %.1f ready %.1f tcp_links %d dialled %d\n",
            S, M, q, n, ag / n, gb / n, c / n, l / n, r / n, m, d }'
  done
}

BUILD=$(cd "${1:-build}" && pwd)
SERVERS=${2:-}
D=${3:-1}
TP=${4:-2}
PP=${5:-2}
port=$(netns_port)
status=0
for mode in split group init; do
  port=$((port + 1))
  timeout -k 5 300 "$BUILD/bin/npu-launch" --master-port "$port" --device-list 0,1,2,3,4,5,6,7 \
    -- "$BUILD/bin/split_probe" "$mode" "$TP" "$PP" 2>/dev/null || status=1
done
[ -n "$SERVERS" ] || exit $status
[ -z "${SPLIT_LOG:-}" ] || mkdir -p "$SPLIT_LOG" || exit 1
devs=$(seq -s, 0 $((D - 1)))
for S in $SERVERS; do
  netns_up "$S" || exit $?
  for mode in split group init; do
    port=$((port + 1))
    pids=()
    for ((k = 0; k < S; k++)); do
      # The server's own status, not grep's (only server 0's rank 0 prints the line).
      log=/dev/null level=${HCCL_LOG_LEVEL:-warn}
      [ -n "${SPLIT_LOG:-}" ] && log="$SPLIT_LOG/$S.$mode.$k.log" level=info
      (netns_exec "$k" env HCCL_IF_IP="$(netns_addr "$k")" HCCL_CONNECT_TIMEOUT=300 OMP_NUM_THREADS=1 \
        HCCL_LOG_LEVEL="$level" timeout -k 5 600 \
        "$BUILD/bin/npu-launch" --nnodes "$S" --node-rank "$k" --master-addr "$(netns_addr 0)" \
        --master-port "$port" --device-list "$devs" -- "$BUILD/bin/split_probe" "$mode" "$TP" "$PP" \
        2>"$log" | grep "^split_probe:"; exit "${PIPESTATUS[0]}") &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || status=1; done
  done
  [ -n "${SPLIT_LOG:-}" ] && split_phases "$SPLIT_LOG/$S" "$S" split &&
    split_phases "$SPLIT_LOG/$S" "$S" group
  netns_down
done
exit $status
