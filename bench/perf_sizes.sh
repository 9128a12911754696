#!/usr/bin/env bash
# perf_sizes.sh - one perf program (perf/) from MIN to MAX by 4x with as many calls as each size
# needs to be timed: 10 x ITERS calls a size up to 256 KiB (a few calls of 100 us judge the
# machine's jitter, not the algorithm) and ITERS above; two runs, one table (the second's lines
# after the first's). With HCCL_TRACE_FILE set, the first run's trace goes to a name of its own
# (.small.json for .json). Run by npu-launch as the ranks' program (bench/uneven.sh,
# bench/plan8.sh).
#
# usage: bash bench/perf_sizes.sh PROGRAM MIN MAX ITERS [PROGRAM'S OTHER ARGS...]
set -u
case "${1:-}" in
-h | --help) awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
-*) echo "perf_sizes.sh: unknown option '$1'; see bash bench/perf_sizes.sh --help" >&2; exit 2 ;;
esac
[ $# -ge 4 ] || { echo "usage: bash bench/perf_sizes.sh PROGRAM MIN MAX ITERS [ARGS...]" >&2; exit 2; }
prog=$1 iters=$4 split=262144
lo=$(numfmt --from=iec "$2") && hi=$(numfmt --from=iec "$3") || exit 2
shift 4
t=()
[ -z "${HCCL_TRACE_FILE:-}" ] || t=(env HCCL_TRACE_FILE="${HCCL_TRACE_FILE%.json}.small.json")
if [ "$lo" -le $split ]; then
  "${t[@]}" "$prog" -b "$lo" -e $((hi < split ? hi : split)) -f 4 -n $((10 * iters)) -w 20 "$@" || exit
fi
[ "$hi" -le $split ] || exec "$prog" -b $((lo > split ? lo : 4 * split)) -e "$hi" -f 4 -n "$iters" -w 2 "$@"
