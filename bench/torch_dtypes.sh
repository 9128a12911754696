#!/usr/bin/env bash
# torch_dtypes.sh - dist.all_reduce of every dtype on hccl (torch_hccl) against gloo, at 2, 4
# and 8 ranks: one markdown table, a row per dtype, hccl's ratio to gloo at 4 KiB (time) and
# 64 MiB (bus bandwidth).
#
# usage: bench/torch_dtypes.sh [build-dir]   (default ./build; builds nothing)
#
# Each (rank count, size) runs bench/torch_allreduce_perf.py -d all -o sum under npu-launch
# (--device-list 0-(N-1), a free --master-port), once with --backend hccl and once with --backend
# gloo, back to back: 4 KiB with ITERS_SMALL (default 500) timed calls, 64 MiB with ITERS_LARGE
# (default 5), after 20 and 1 warm-up calls. Every call's result is checked (a wrong element fails the run). The table takes
# the in-place columns (torch's allreduce is in place). gloo refuses int16 and the unsigned types
# above uint8: those cells say so. RANKS (default "2 4 8"), RESULTS_DIR (default a new
# /tmp/hccl-dtypes.XXXXXX) keeps every run's output; RUN_TIMEOUT (default 600) s per run.
# A ratio above 1 at 64 MiB, and below 1 at 4 KiB, means hccl is faster.
set -u
case "${1:-}" in
-h | --help) awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
-*) echo "torch_dtypes.sh: unknown option '$1'; see bash bench/torch_dtypes.sh --help" >&2; exit 2 ;;
esac
BUILD=${1:-./build}
PY=${PYTHON:-$(cat "$BUILD/python/INTERPRETER" 2>/dev/null || command -v python3)}
HERE=$(cd "$(dirname "$0")" && pwd)
RANKS=${RANKS:-2 4 8}
ITERS_SMALL=${ITERS_SMALL:-500}
ITERS_LARGE=${ITERS_LARGE:-5}
RUN_TIMEOUT=${RUN_TIMEOUT:-600}
RESULTS_DIR=${RESULTS_DIR:-$(mktemp -d /tmp/hccl-dtypes.XXXXXX)}
mkdir -p "$RESULTS_DIR"
[ -x "$BUILD/bin/npu-launch" ] || { echo "torch_dtypes.sh: no $BUILD/bin/npu-launch: build first" >&2; exit 2; }
[ -d "$BUILD/python/torch_hccl" ] || { echo "torch_dtypes.sh: no $BUILD/python/torch_hccl: build with torch" >&2; exit 2; }

free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'; }

fail=0
for n in $RANKS; do
  for size in 4K 64M; do
    iters=$ITERS_SMALL warm=20
    [ "$size" = 64M ] && iters=$ITERS_LARGE warm=1
    for backend in hccl gloo; do
      out=$RESULTS_DIR/$backend.np$n.$size.txt
      PYTHONPATH=$BUILD/python OMP_NUM_THREADS=1 timeout "$RUN_TIMEOUT" "$BUILD/bin/npu-launch" \
        --device-list "0-$((n - 1))" --master-port "$(free_port)" -- "$PY" \
        "$HERE/torch_allreduce_perf.py" --backend "$backend" -d all -o sum -b "$size" -e "$size" \
        -n "$iters" -w "$warm" -c 1 >"$out" 2>&1
      if [ $? != 0 ] || ! grep -q "Out of bounds values : 0 OK" "$out"; then
        echo "torch_dtypes.sh: $backend at $n ranks, $size failed; see $out" >&2
        fail=1
      fi
    done
  done
done

"$PY" - "$RESULTS_DIR" "$RANKS" <<'EOF'
import os, sys
d, ranks = sys.argv[1], sys.argv[2].split()
def table(path):
    """{dtype: (in-place time us, in-place busbw)} from allreduce_perf's table."""
    rows = {}
    if not os.path.exists(path):
        return rows
    for line in open(path):
        f = line.split()
        if len(f) < 13 or not f[0].isdigit():
            continue
        rows[f[2]] = (float(f[9]), float(f[11]))
    return rows
res = {(b, n, s): table(os.path.join(d, "%s.np%s.%s.txt" % (b, n, s)))
       for b in ("hccl", "gloo") for n in ranks for s in ("4K", "64M")}
types = list(res[("hccl", ranks[0], "4K")]) or []
head = ["dtype"] + ["%s ranks: 4 KiB us hccl / gloo" % n for n in ranks] + \
       ["%s ranks: 64 MiB busbw hccl / gloo" % n for n in ranks]
print("| " + " | ".join(head) + " |")
print("|" + "---|" * len(head))
for t in types:
    cells = [t]
    for s, col in (("4K", 0), ("64M", 1)):
        for n in ranks:
            h, g = res[("hccl", n, s)].get(t), res[("gloo", n, s)].get(t)
            if h is None:
                cells.append("n/a")
            elif g is None:
                cells.append("%.4g / gloo refuses" % h[col])
            else:
                cells.append("%.4g / %.4g (%.2fx)" % (h[col], g[col], g[col] / h[col] if col == 0 else h[col] / g[col]))
    print("| " + " | ".join(cells) + " |")
print("\nratios: hccl's speed over gloo's (above 1: hccl faster); runs kept in %s" % d)
EOF
exit $fail
