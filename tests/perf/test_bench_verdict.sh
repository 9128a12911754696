#!/usr/bin/env bash
# test_bench_verdict.sh - scripts/bench_verdict.sh, the quick start bench's last line: its
# arithmetic (busbw over B/p x 2(p-1)/p) and judgement on made-up tables with a given B, and
# one run that measures B with build/bin/membw.
#   test_bench_verdict.sh BUILD_DIR
set -euo pipefail
build=$1
here=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

table() { # table PROG NRANKS BUSBW
  cat <<EOF
# $1 (libhccl 0.1.0) nranks $2
# minBytes 16 maxBytes 67108864 step: 4(factor) warmup iters: 2 iters: 10 validation: 1 average: 1(avg) blocking: 1
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
          16             4     float     sum      -1    31.05    0.00    0.00      0    29.77    0.00    0.00      0
    67108864      16777216     float     sum      -1   123456    0.54    $3      0   120000    0.56    0.99      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.4 GB/s
#
EOF
}
verdict() { MEMBW_GBS=$1 bash "$here/scripts/bench_verdict.sh" "$build" "$2"; }
expect() { # expect OUTPUT TEXT...
  local out=$1; shift
  for t in "$@"; do
    case "$out" in *"$t"*) ;; *) fail "'$t' not in: $out" ;; esac
  done
}

# 8 ranks, B = 8.94: limit 8.94/8 x 14/8 = 1.96 GB/s; 0.95 of it is 49%, in the usual range.
table allreduce_perf 8 0.95 >"$tmp/a"
out=$(verdict 8.94 "$tmp/a")
expect "$out" "# verdict: busbw 0.95 GB/s at 64 MiB is 49% of this machine's memory limit 1.96 GB/s" \
  "p = 8, B = 8.94 GB/s given by MEMBW_GBS" "as expected (40-60% at 8 ranks"
[ "$(printf '%s\n' "$out" | wc -l)" = 1 ] || fail "more than one line: $out"
# Half the usual, and far below it.
table allreduce_perf 8 0.60 >"$tmp/b"
expect "$(verdict 8.94 "$tmp/b")" "is 31% of" "below the usual 40-60% at 8 ranks"
table allreduce_perf 8 0.20 >"$tmp/c"
expect "$(verdict 8.94 "$tmp/c")" "is 10% of" "far below the usual"
# 2 ranks: limit B/2 x 1 = 4.47; 4.0 is 89%.
table allreduce_perf 2 4.00 >"$tmp/d"
expect "$(verdict 8.94 "$tmp/d")" "is 89% of this machine's memory limit 4.47 GB/s" "as expected (70-100%"
# Not an allreduce, and a run that printed no rows: no verdict, said so.
table all_gather_perf 8 0.95 >"$tmp/e"
expect "$(verdict 8.94 "$tmp/e")" "# verdict: none: " "not allreduce_perf's output"
head -2 "$tmp/a" >"$tmp/f"
expect "$(verdict 8.94 "$tmp/f")" "# verdict: none: no result rows"
# B measured by membw, as the quick start does.
out=$(bash "$here/scripts/bench_verdict.sh" "$build" "$tmp/a")
expect "$out" "# verdict: busbw 0.95 GB/s at 64 MiB is " "measured just now by membw"
echo "$out"
echo "PASS"
