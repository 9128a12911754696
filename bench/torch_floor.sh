#!/usr/bin/env bash
# torch_floor.sh - allreduce of plain torch tensors through torch.distributed against the memory
# floor measured in the same run, and against gloo:
#
# usage: bash bench/torch_floor.sh [build] [repeats=3] [ranks="2 4 8"]
#
# B = the bytes all cores copy per second together (bench/membw.c, one thread per core). An
# allreduce reads each input once and writes each output once, so algbw <= B/p and
# busbw <= B/p * 2(p-1)/p: the floor. For each p it runs, in turns, `repeats` times each:
#   hccl        bench/torch_allreduce_perf.py --backend hccl under npu-launch (torch_hccl's
#               allocator on, the default: tensors in shared arenas, zero-copy)
#   hccl-noalloc the same with TORCH_HCCL_ALLOCATOR=0 (malloc'd tensors: the ring)
#   gloo        --backend gloo, unbound, as under torchrun
#   C-R1        allreduce_perf -R 1 (HcclMemAlloc buffers), the library without torch
# 64 MiB float sum in place (torch's all_reduce is in place), 5 calls after 1; 4 KiB over 500.
# Prints one table: median busbw at 64 MiB, its % of the floor, the ratio to gloo, and the median
# 4 KiB time. In place (torch's case) a rank writes results into cache lines it has just read,
# with no second buffer and no read-for-ownership, which a memcpy pays for: in-place busbw can
# exceed this floor (up to 2x at 2 ranks on a machine whose L3 holds the buffers).
set -euo pipefail
case "${1:-}" in
-h | --help) awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
-*) echo "torch_floor.sh: unknown option '$1'; see bash bench/torch_floor.sh --help" >&2; exit 2 ;;
esac
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:-build}" && pwd)
# The Python torch_hccl was built for (build/python/INTERPRETER), or $PYTHON.
PY=${PYTHON:-$(cat "$BUILD/python/INTERPRETER" 2>/dev/null || command -v python3)}
REPEATS=${2:-3}
RANKS=${3:-2 4 8}
OUT=$(mktemp -d /tmp/torch_floor.XXXXXX)
export PYTHONPATH=$BUILD/python OMP_NUM_THREADS=1
cc -O2 -pthread -o "$OUT/membw" "$HERE/membw.c"
MEMBW=$("$OUT/membw")
B=$(awk '{print $1}' <<<"$MEMBW")

port=$((29000 + RANDOM % 2000))
plain() { # plain N prog... : N ranks with torchrun's variables, no binding
  local n=$1 r pids=() rc=0
  shift
  port=$((port + 1))
  for ((r = 0; r < n; r++)); do
    RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r LOCAL_WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 \
      MASTER_PORT=$port timeout 600 "$@" &
    pids+=($!)
  done
  for r in "${pids[@]}"; do wait "$r" || rc=1; done
  return $rc
}
npu() { # npu N prog... : under npu-launch with devices 0..N-1
  local n=$1
  shift
  timeout 600 "$BUILD/bin/npu-launch" --device-list "$(seq -s, 0 $((n - 1)))" -- "$@"
}
# busbw (in place) or time (in place) of the float/sum line
field() {
  awk -v col="$2" '{ for (i = 3; i + 9 <= NF; i++) if ($i == "float" && $(i+1) == "sum") {
      print (col == "time" ? $(i + 7) : $(i + 9)); exit } }' "$1"
}
median() { sort -g | awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : "n/a" }'; }

declare -A BW T
for n in $RANKS; do
  for ((k = 1; k <= REPEATS; k++)); do
    for who in hccl hccl-noalloc gloo C-R1; do
      for size in 64M 4K; do
        if [ $size = 64M ]; then fl=(-b 64M -e 64M -n 5 -w 1); else fl=(-b 4K -e 4K -n 500 -w 20); fi
        f=$OUT/$who.$n.$size.$k
        case $who in
        hccl) npu "$n" "$PY" "$HERE/torch_allreduce_perf.py" --backend hccl "${fl[@]}" ;;
        hccl-noalloc) TORCH_HCCL_ALLOCATOR=0 npu "$n" "$PY" "$HERE/torch_allreduce_perf.py" --backend hccl "${fl[@]}" ;;
        gloo) plain "$n" "$PY" "$HERE/torch_allreduce_perf.py" --backend gloo "${fl[@]}" ;;
        C-R1) npu "$n" "$BUILD/bin/allreduce_perf" -R 1 -d float -o sum "${fl[@]}" ;;
        esac >"$f" 2>&1 || echo "torch_floor.sh: $who at $n ranks, $size failed: $f" >&2
        grep -q "Out of bounds values : 0 OK" "$f" || echo "torch_floor.sh: $who $n $size: wrong or failed: $f" >&2
        if [ $size = 64M ]; then BW[$who.$n]+="$(field "$f" busbw) "; else T[$who.$n]+="$(field "$f" time) "; fi
      done
    done
  done
done

echo "# torch $("$PY" -c "import torch; print(torch.__version__)") ($PY); B = $MEMBW (membw); 64 MiB float sum in place, median of $REPEATS; load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %-13s %10s %9s %9s %9s %12s\n' ranks who busbw floor "%floor" "x gloo" "4KiB us"
for n in $RANKS; do
  floor=$(awk -v b="$B" -v p="$n" 'BEGIN { printf "%.2f", b / p * 2 * (p - 1) / p }')
  g=$(tr ' ' '\n' <<<"${BW[gloo.$n]}" | grep . | median)
  for who in hccl hccl-noalloc gloo C-R1; do
    bw=$(tr ' ' '\n' <<<"${BW[$who.$n]}" | grep . | median)
    t=$(tr ' ' '\n' <<<"${T[$who.$n]}" | grep . | median)
    awk -v n="$n" -v w="$who" -v bw="$bw" -v f="$floor" -v g="$g" -v t="$t" 'BEGIN {
      printf "%-6s %-13s %10.2f %9.2f %8.0f%% %9.2f %12s\n", n, w, bw, f, 100 * bw / f, bw / g, t }'
  done
done
echo "# raw outputs: $OUT"
