#!/usr/bin/env bash
# uneven.sh - where the forms through leaders pay (issue 45): allreduce, broadcast and reduce
# (perf/'s programs) on pretend servers holding different rank counts, flat against through
# leaders. Init refuses servers of different counts; only HcclCommShrink makes them (a shrink's
# survivors), so each layout is launched as S servers x D devices (network namespaces,
# tests/multi/netns.sh, as bench/split.sh; needs root) and the programs shrink it first
# (PERF_EXCLUDE, perf/hccl_perf.c): 4+2+1 is 3 x 4 without ranks 6, 7, 9, 10, 11. Each program
# runs four ways: HCCL_ALGO=ring (flat ring / chain), HCCL_ALGO=tree (flat halving-doubling /
# binomial tree), HCCL_ALGO='level0:NA;level1:NA' (through leaders, the model choosing each
# level) and unset (the cost model's own choice: it should track the best of the others).
# fp32 sum, root 0, sizes MIN to MAX by 4x; rank 0's in-place time in us. One Markdown table
# line per layout x collective x size. 8+7 (2 x 8 without rank 15) works too but is 16 ranks.
#
# usage: bash bench/uneven.sh [BUILD_DIR=build] ["4+2+1 2+1 4+1" layouts] [MIN=4K] [MAX=64M]
#        [ITERS=20]
set -u
case "${1:-}" in
-h | --help) awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
-*) echo "uneven.sh: unknown option '$1'; see bash bench/uneven.sh --help" >&2; exit 2 ;;
esac
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:-build}" && pwd) || exit 2
LAYOUTS=${2:-4+2+1 2+1 4+1}
MIN=${3:-4K} MAX=${4:-64M} ITERS=${5:-20}
NETNS_ID=${NETNS_ID:-$((RANDOM % 200))}
NETNS_PREFIX=${NETNS_PREFIX:-l3u$NETNS_ID} NETNS_VETH=${NETNS_VETH:-l3u$NETNS_ID}
. "$HERE/../tests/multi/netns.sh"
work=$(mktemp -d /tmp/hccl-uneven.XXXXXX)
trap 'netns_down; rm -rf "$work"' EXIT
port=$(netns_port)
status=0

# run S D EXCLUDE PROG ALGO OUT: one program on S servers of D devices shrunk by EXCLUDE; rank
# 0's output in OUT. The status of server 0's launcher (every rank's check is in its table).
run() {
  local S=$1 D=$2 ex=$3 prog=$4 algo=$5 out=$6 k pids=() rc=0
  port=$((port + 1))
  for ((k = 0; k < S; k++)); do
    netns_exec "$k" env HCCL_IF_IP="$(netns_addr "$k")" ${algo:+HCCL_ALGO="$algo"} \
      PERF_EXCLUDE="$ex" HCCL_CONNECT_TIMEOUT=120 OMP_NUM_THREADS=1 timeout -k 5 900 \
      "$BUILD/bin/npu-launch" --nnodes "$S" --node-rank "$k" --master-addr "$(netns_addr 0)" \
      --master-port "$port" --device-list "$(seq -s, 0 $((D - 1)))" -- "$BUILD/bin/$prog" \
      -b "$MIN" -e "$MAX" -f 4 -n "$ITERS" -w 2 -d float -o sum -r 0 -c 1 \
      >"$out.$k" 2>&1 &
    pids+=($!)
  done
  for k in "${!pids[@]}"; do wait "${pids[$k]}" || rc=1; done
  [ $rc = 0 ] || { echo "uneven.sh: $prog HCCL_ALGO='$algo' failed; its output:" >&2; cat "$out".* >&2; }
  cp "$out.0" "$out"
  return $rc
}

printf '| layout | collective | bytes | flat ring/chain us | flat hd/tree us | through leaders us | unset us |\n'
printf '| --- | --- | --- | --- | --- | --- | --- |\n'
for lo in $LAYOUTS; do
  IFS=+ read -r -a counts <<<"$lo"
  S=${#counts[@]} D=0 ex=""
  for c in "${counts[@]}"; do [ "$c" -gt "$D" ] && D=$c; done
  for ((k = 0; k < S; k++)); do
    for ((j = counts[k]; j < D; j++)); do ex="$ex${ex:+,}$((k * D + j))"; done
  done
  netns_up "$S" || exit $?
  for prog in allreduce_perf broadcast_perf reduce_perf; do
    i=0
    for algo in ring tree "level0:NA;level1:NA" ""; do
      run "$S" "$D" "$ex" "$prog" "$algo" "$work/$prog.$i" || status=1
      i=$((i + 1))
    done
    # rank 0's in-place time (the column before the last two: time, algbw, busbw, #wrong) per
    # size, the four runs side by side.
    awk -v lo="$lo" -v coll="${prog%_perf}" '
      $1 ~ /^[0-9]+$/ && $3 == "float" { t[FILENAME, $1] = $(NF - 3); sizes[$1] = 1 }
      END {
        n = 0; for (s in sizes) order[++n] = s + 0
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (order[j] < order[i]) { x = order[i]; order[i] = order[j]; order[j] = x }
        for (i = 1; i <= n; i++) {
          s = order[i]; printf "| %s | %s | %d |", lo, coll, s
          for (f = 0; f < 4; f++) { v = t[ARGV[f + 1], s]; printf " %s |", v == "" ? "n/a" : v }
          printf "\n"
        }
      }' "$work/$prog.0" "$work/$prog.1" "$work/$prog.2" "$work/$prog.3"
  done
  netns_down
done
exit $status
