#!/usr/bin/env bash
# plan8.sh - the cost model's allreduce on one server against each algorithm forced (issue 58):
# allreduce_perf under npu-launch at P ranks (8 by default), ordinary (malloc'd) buffers, run
# four ways (bench/perf_sizes.sh: 200 calls a size up to 256 KiB, 20 above): HCCL_ALGO=ring,
# HCCL_ALGO=tree (halving-doubling), HCCL_ALGO=oneshot (at any size when forced), and unset
# (the model: one-shot, staged or flat). ROUNDS rounds, the four ways in turn in each (the
# first moving one on every round), so each pair is timed close together; per size every way's
# median time, the algorithm the model chose (its runs' traces), the fastest forced way, and
# the chosen way's median over it, or the model's own where it chose staged
# (bench/medians.py; issue 58 asks for at most 1.10). Out of place, then in place: two tables.
# Staged cannot be forced: the unset column is where it runs (from 64 KiB at 4 ranks or more,
# hccl/src/algo/plan.c).
#
# usage: bash bench/plan8.sh [BUILD_DIR=build] [P=8] [MIN=4K] [MAX=64M] [ROUNDS=3]
set -u
case "${1:-}" in
-h | --help) awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
-*) echo "plan8.sh: unknown option '$1'; see bash bench/plan8.sh --help" >&2; exit 2 ;;
esac
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:-build}" && pwd) || exit 2
P=${2:-8} MIN=${3:-4K} MAX=${4:-64M} ROUNDS=${5:-3}
work=$(mktemp -d /tmp/hccl-plan8.XXXXXX)
trap 'rm -rf "$work"' EXIT
ways=(ring tree oneshot "")
status=0
for ((r = 0; r < ROUNDS; r++)); do
  for ((j = 0; j < 4; j++)); do
    i=$(((r + j) % 4))
    trace=()
    [ -n "${ways[$i]}" ] || trace=(HCCL_TRACE_FILE="$work/out.$i.$r.trace.%r.json")
    env ${ways[$i]:+HCCL_ALGO="${ways[$i]}"} "${trace[@]}" timeout -k 5 900 "$BUILD/bin/npu-launch" \
      --device-list "$(seq -s, 0 $((P - 1)))" -- bash "$HERE/perf_sizes.sh" \
      "$BUILD/bin/allreduce_perf" "$MIN" "$MAX" 20 -d float -o sum -c 1 >"$work/out.$i.$r.table" 2>&1 ||
      { echo "plan8.sh: HCCL_ALGO='${ways[$i]}' failed:" >&2; cat "$work/out.$i.$r.table" >&2; status=1; }
  done
done
for column in outofplace inplace; do
  echo
  echo "$P ranks, $column (us, medians of $ROUNDS):"
  echo "| ranks | bytes | ring | tree | oneshot | unset | the model chose | fastest | chosen / fastest |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  python3 "$HERE/medians.py" --label "$P" --column "$column" --way "ring=$work/out.0.*.table" \
    --way "tree=$work/out.1.*.table" --way "oneshot=$work/out.2.*.table" \
    --chosen "unset=$work/out.3.*.table" --trace "$work/out.3.*.trace.0*.json" \
    --map "one-shot=oneshot" --map "oneshot=oneshot" --map "staged=staged" --map "ring=ring" \
    --map "halving-doubling=tree" --map "doubling=tree"
done
exit $status
