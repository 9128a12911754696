#!/usr/bin/env bash
# test_bench_verdict.sh - scripts/bench_verdict.sh, the quick start bench's last two lines: their
# arithmetic (busbw over B/p x 2(p-1)/p) and judgement, out of place and in place, below, within
# and above the usual range and above the limit, on made-up tables with a given B and cache; and
# one run that measures B with build/bin/membw.
#   test_bench_verdict.sh BUILD_DIR
set -euo pipefail
build=$1
here=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

table() { # table PROG NRANKS BUSBW [BUSBW_IN_PLACE]: a 64 MiB row; in place 0.99 unless given
  cat <<EOF
# $1 (libhccl 0.1.0) nranks $2
# minBytes 16 maxBytes 67108864 step: 4(factor) warmup iters: 2 iters: 10 validation: 1 average: 1(avg) blocking: 1
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
          16             4     float     sum      -1    31.05    0.00    0.00      0    29.77    0.00    0.00      0
    67108864      16777216     float     sum      -1   123456    0.54    $3      0   120000    0.56    ${4:-0.99}      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.4 GB/s
#
EOF
}
# verdict B TABLE [LLC_BYTES]: the last-level cache 64 MiB unless given (0: unknown).
verdict() { MEMBW_GBS=$1 LLC_BYTES=${3:-67108864} bash "$here/scripts/bench_verdict.sh" "$build" "$2"; }
expect() { # expect OUTPUT TEXT...
  local out=$1; shift
  for t in "$@"; do
    case "$out" in *"$t"*) ;; *) fail "'$t' not in: $out" ;; esac
  done
}
oop() { printf '%s\n' "$1" | sed -n 1p; } # the out-of-place line
inp() { printf '%s\n' "$1" | sed -n 2p; } # the in-place line
range8="40-60% at 8 ranks on malloc buffers"
above_range="better than the 2-core runs the range is from (more cores, a larger cache, a quieter moment, or -R 1 buffers)"
not_ip="above the limit, and not from being in place (which moves as many bytes): "
rerun="-R 1 buffers (zero-copy passes it, docs/performance.md), or B was measured at a slower moment than the run (run again)"

# 8 ranks, B = 8.94: limit 8.94/8 x 14/8 = 1.96 GB/s; 0.95 of it is 49%, 0.99 51%: both within
# the usual range, each said on its own line.
table allreduce_perf 8 0.95 >"$tmp/a"
out=$(verdict 8.94 "$tmp/a")
[ "$(printf '%s\n' "$out" | wc -l)" = 2 ] || fail "not two lines: $out"
expect "$(oop "$out")" "# verdict: out of place, busbw 0.95 GB/s at 64 MiB is 49% of this machine's memory limit 1.96 GB/s" \
  "p = 8, B = 8.94 GB/s given by MEMBW_GBS): within the usual $range8"
expect "$(inp "$out")" "# verdict: in place, busbw 0.99 GB/s is 51% of the same limit (in place reads every input and writes every result once too): within the usual $range8; the fields: docs/perf_programs.md"
# Below, far below: out of place 31% and 10%, in place 31% and 10%.
table allreduce_perf 8 0.60 0.60 >"$tmp/b"
out=$(verdict 8.94 "$tmp/b")
expect "$(oop "$out")" "is 31% of" ": below the usual $range8: is something else running (uptime)?"
expect "$(inp "$out")" "is 31% of the same limit" ": below the usual $range8: is something else running (uptime)?"
table allreduce_perf 8 0.20 0.20 >"$tmp/c"
out=$(verdict 8.94 "$tmp/c")
expect "$(oop "$out")" "is 10% of" ": far below the usual $range8: check for other load (uptime) and the binding (--report-bindings)"
expect "$(inp "$out")" "is 10% of the same limit" ": far below the usual $range8: check for"
# Above the range, below the limit (the issue's 74%, which was called "as expected"): 1.45 is
# 74%, in place 1.80 92%.
table allreduce_perf 8 1.45 1.80 >"$tmp/g"
out=$(verdict 8.94 "$tmp/g")
expect "$(oop "$out")" "is 74% of" ": above the usual $range8: $above_range"
expect "$(inp "$out")" "is 92% of the same limit" ": above the usual $range8: $above_range"
case "$out" in *"as expected"*) fail "'as expected' left in: $out" ;; esac
# Above the limit: the issue's table (B = 5.99, limit 1.31; out of place 0.96 is 73%, in place
# 1.97 150%). The in-place buffers, 8 x 64 MiB = 512 MiB, against a last-level cache of 64 MiB:
# larger than it, so the reason left is -R 1 or B; against 480 MiB (this machine's): part fits;
# against 1 GiB: they fit. Unknown cache: no word of it.
table allreduce_perf 8 0.96 1.97 >"$tmp/h"
out=$(verdict 5.99 "$tmp/h")
expect "$(oop "$out")" "is 73% of this machine's memory limit 1.31 GB/s" ": above the usual $range8"
expect "$(inp "$out")" "busbw 1.97 GB/s is 150% of the same limit" \
  ": ${not_ip}its 512 MiB of buffers (8 ranks x 64 MiB) are larger than the caches, so: $rerun; the fields"
expect "$(inp "$(verdict 5.99 "$tmp/h" 503316480)")" \
  ": ${not_ip}part of its 512 MiB of buffers (8 ranks x 64 MiB) can stay in this machine's 480 MiB last-level cache, or $rerun; the fields"
expect "$(inp "$(verdict 5.99 "$tmp/h" 1073741824)")" \
  ": ${not_ip}its 512 MiB of buffers (8 ranks x 64 MiB) fit in this machine's 1024 MiB last-level cache, so they can run from the cache, not memory; the fields"
expect "$(inp "$(verdict 5.99 "$tmp/h" 0)")" ": ${not_ip}its 512 MiB of buffers (8 ranks x 64 MiB) are larger than the caches, so: $rerun"
# Out of place above the limit: 2.50 of 1.96 is 128%; its buffers are twice the in-place ones.
table allreduce_perf 8 2.50 2.50 >"$tmp/i"
out=$(verdict 8.94 "$tmp/i" 1073741824)
expect "$(oop "$out")" "is 128% of" ": above the limit: its 1024 MiB of buffers (8 ranks x 2 x 64 MiB) fit in this machine's 1024 MiB last-level cache, so they can run from the cache, not memory"
out=$(verdict 8.94 "$tmp/i")
expect "$(oop "$out")" ": above the limit: its 1024 MiB of buffers (8 ranks x 2 x 64 MiB) are larger than the caches, so: $rerun"
expect "$(inp "$out")" "is 128% of the same limit" ": ${not_ip}its 512 MiB of buffers (8 ranks x 64 MiB) are larger than the caches, so: $rerun"
# 2 ranks: limit B/2 x 1 = 4.47; 4.0 is 89%, in place 4.6 103% (above: the range ends at the
# limit itself), its 128 MiB of buffers in a cache of 256 MiB.
table allreduce_perf 2 4.00 4.60 >"$tmp/d"
out=$(verdict 8.94 "$tmp/d" 268435456)
expect "$(oop "$out")" "is 89% of this machine's memory limit 4.47 GB/s" ": within the usual 70-100% at 2 ranks on malloc buffers"
expect "$(inp "$out")" "is 103% of the same limit" ": ${not_ip}its 128 MiB of buffers (2 ranks x 64 MiB) fit in this machine's 256 MiB last-level cache"
# 3 ranks: no range known, for either column.
table allreduce_perf 3 1.00 >"$tmp/j"
out=$(verdict 8.94 "$tmp/j")
expect "$(oop "$out")" "p = 3," ": no range is known for this many ranks"
expect "$(inp "$out")" ": no range is known for this many ranks"
# Not an allreduce, and a run that printed no rows: no verdict, said so.
table all_gather_perf 8 0.95 >"$tmp/e"
expect "$(verdict 8.94 "$tmp/e")" "# verdict: none: " "not allreduce_perf's output"
head -2 "$tmp/a" >"$tmp/f"
expect "$(verdict 8.94 "$tmp/f")" "# verdict: none: no result rows"
# B measured by membw and the cache read by getconf, as the quick start does.
out=$(bash "$here/scripts/bench_verdict.sh" "$build" "$tmp/a")
expect "$(oop "$out")" "# verdict: out of place, busbw 0.95 GB/s at 64 MiB is " "measured just now by membw"
expect "$(inp "$out")" "# verdict: in place, busbw 0.99 GB/s is "
echo "$out"
echo "PASS"
