#!/usr/bin/env bash
# uneven.sh - where the forms through leaders pay (issues 45, 58): allreduce, broadcast and
# reduce (perf/'s programs) on pretend servers holding different rank counts, flat against
# through leaders, and the cost model's own choice against the best of them. Each layout is
# launched as users launch it: one npu-launch per server (network namespaces,
# tests/multi/netns.sh, as bench/split.sh; needs root), each with its own --device-list (4+2+1:
# 0-3, 0-1 and 0), the launchers numbering the ranks server by server. Each program runs four
# ways: HCCL_ALGO=ring (flat ring / chain), HCCL_ALGO=tree (flat halving-doubling / binomial
# tree), HCCL_ALGO='level0:NA;level1:NA' (through leaders, the model choosing each level) and
# unset (the cost model's own choice: it should track the best of the others). ROUNDS rounds,
# the four ways in turn in each (the first way moving one on every round), so each pair is
# timed close together; the table gives each way's median over the rounds. fp32 sum, root 0,
# sizes MIN to MAX by 4x (bench/perf_sizes.sh: up to 256 KiB 10 x ITERS calls a size, as a few
# calls of 100 us judge the machine's jitter, not the algorithm); rank 0's in-place time in us. One Markdown table line per layout x
# collective x size, ending with the algorithm the model chose (its runs' traces), the fastest
# way, and the chosen way's median over the fastest's (bench/medians.py; 1.00: the model chose
# the fastest; issue 58 asks for at most 1.10).
#
# usage: bash bench/uneven.sh [BUILD_DIR=build] ["4+2+1 2+1 4+1" layouts] [MIN=4K] [MAX=64M]
#        [ITERS=20] [ROUNDS=3]
#        PROGS="allreduce_perf" bash bench/uneven.sh ...   # fewer programs (default: all three;
#        all_gather_perf and reduce_scatter_perf run flat, their "through leaders" column too)
set -u
case "${1:-}" in
-h | --help) awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
-*) echo "uneven.sh: unknown option '$1'; see bash bench/uneven.sh --help" >&2; exit 2 ;;
esac
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:-build}" && pwd) || exit 2
LAYOUTS=${2:-4+2+1 2+1 4+1}
MIN=${3:-4K} MAX=${4:-64M} ITERS=${5:-20} ROUNDS=${6:-3}
NETNS_ID=${NETNS_ID:-$((RANDOM % 200))}
NETNS_PREFIX=${NETNS_PREFIX:-l3u$NETNS_ID} NETNS_VETH=${NETNS_VETH:-l3u$NETNS_ID}
. "$HERE/../tests/multi/netns.sh"
work=$(mktemp -d /tmp/hccl-uneven.XXXXXX)
trap 'netns_down; rm -rf "$work"' EXIT
port=$(netns_port)
status=0

# run "COUNTS" PROG ALGO OUT: one program on servers of COUNTS devices (a list: 4 2 1); rank
# 0's output in OUT.table. Whether every launcher succeeded (every rank's check is in its table).
run() {
  local counts=($1) prog=$2 algo=$3 out=$4 k pids=() rc=0 trace=()
  local S=${#counts[@]}
  [ -n "$algo" ] || trace=(HCCL_TRACE_FILE="$out.trace.%r.json") # which algorithm the model chose
  port=$((port + 2)) # the launchers' own store takes --master-port + 1
  for ((k = 0; k < S; k++)); do
    netns_exec "$k" env HCCL_IF_IP="$(netns_addr "$k")" ${algo:+HCCL_ALGO="$algo"} \
      "${trace[@]}" \
      HCCL_CONNECT_TIMEOUT=120 OMP_NUM_THREADS=1 timeout -k 5 900 \
      "$BUILD/bin/npu-launch" --nnodes "$S" --node-rank "$k" --master-addr "$(netns_addr 0)" \
      --master-port "$port" --device-list "$(seq -s, 0 $((counts[k] - 1)))" -- \
      bash "$HERE/perf_sizes.sh" "$BUILD/bin/$prog" "$MIN" "$MAX" "$ITERS" -d float -o sum -r 0 -c 1 \
      >"$out.$k" 2>&1 &
    pids+=($!)
  done
  for k in "${!pids[@]}"; do wait "${pids[$k]}" || rc=1; done
  [ $rc = 0 ] || { echo "uneven.sh: $prog HCCL_ALGO='$algo' failed; its output:" >&2; cat "$out".* >&2; }
  cp "$out.0" "$out.table"
  return $rc
}

printf '| layout | collective | bytes | flat ring/chain us | flat hd/tree us | through leaders us | unset us | the model chose | fastest | chosen / fastest |\n'
printf '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n'
algos=(ring tree "level0:NA;level1:NA" "")
for lo in $LAYOUTS; do
  IFS=+ read -r -a counts <<<"$lo"
  netns_up "${#counts[@]}" || exit $?
  trap 'netns_down; rm -rf "$work"' EXIT # netns_up sets its own (netns_down only)
  for prog in ${PROGS:-allreduce_perf broadcast_perf reduce_perf}; do
    for ((r = 0; r < ROUNDS; r++)); do
      for ((j = 0; j < 4; j++)); do
        i=$(((r + j) % 4))
        run "${counts[*]}" "$prog" "${algos[$i]}" "$work/$prog.$i.$r" || status=1
      done
    done
    coll=${prog%_perf} ranks=1 # the trace's name; its count is a rank's block for these two
    case $coll in all_gather | reduce_scatter) ranks=$((lo)) ;; esac
    case $coll in all_gather) coll=allgather ;; reduce_scatter) coll=reduce-scatter ;; esac
    python3 "$HERE/medians.py" --label "$lo | ${prog%_perf}" --column inplace --ranks "$ranks" \
      --way "ring/chain=$work/$prog.0.*.table" --way "hd/tree=$work/$prog.1.*.table" \
      --way "leaders=$work/$prog.2.*.table" --chosen "unset=$work/$prog.3.*.table" \
      --trace "$work/$prog.3.*.trace.0*.json" --collective "$coll" \
      --map "through leaders=leaders" --map "ring=ring/chain" --map "chain=ring/chain" \
      --map "halving-doubling=hd/tree" --map "doubling=hd/tree" --map "binomial=hd/tree" \
      --map "Bruck=hd/tree"
  done
  netns_down
done
exit $status
