#!/usr/bin/env bash
# bench_verdict.sh - two lines that judge an allreduce_perf run against this machine's memory
# limit, measured now: the last lines of `bash scripts/quickstart.sh bench`.
# usage: bash scripts/bench_verdict.sh BUILD_DIR PERF_OUTPUT
#   PERF_OUTPUT is what allreduce_perf printed (rank 0's table). The busbw judged is the
#   largest size's, out of place (first line) and in place (second line). B, the bytes all
#   cores copy per second together, comes from BUILD_DIR/bin/membw (about 2 s); MEMBW_GBS=8.94
#   gives it instead (the tests). The last-level cache, which a verdict above the limit
#   compares the buffers with, is getconf's LEVEL3_CACHE_SIZE (else LEVEL2); LLC_BYTES gives it.
#
# The limit is the project's rule (docs/performance.md, "The memory limit"): an allreduce at p
# ranks reads every input and writes every output at least once, so busbw <= B/p x 2(p-1)/p.
# In place the same holds: the result is written over the input, but every input byte is still
# read and every result byte written (staged.c and ring.c read each input once and write each
# output once in place as out of place), so one limit judges both columns. What in place saves
# is around those bytes: its stores land on lines it has just read (out of place, a store first
# reads its line unless it streams, which it does from 16 MiB of output) and its buffers take
# half the room (p x size against 2 x p x size), so more of them may stay in the cache.
# Each verdict says within, below or above the usual range, and above the limit, why it can be.
# The lines start with "#", so the output stays an nccl-tests table for parsers.
set -euo pipefail
case "${1:-}" in
-h | --help) awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
-*) echo "bench_verdict.sh: unknown option '$1'; see --help" >&2; exit 2 ;;
esac
if [ $# -ne 2 ]; then
  echo "bench_verdict.sh: usage: bash scripts/bench_verdict.sh BUILD_DIR PERF_OUTPUT (see --help)" >&2
  exit 2
fi
build=$1 out=$2

# p from the header, "# allreduce_perf (libhccl 0.1.0) nranks 8"; the largest size's row, its
# busbw out of place ($8) and in place ($12).
read -r prog p < <(awk '/^# [a-z_]+_perf \(/ { print $2, $NF; exit }' "$out") || true
if [ "${prog:-}" != allreduce_perf ]; then
  echo "# verdict: none: $out is not allreduce_perf's output (the limit here is an allreduce's)"
  exit 0
fi
read -r size busbw busbw_ip < <(awk '!/^#/ && NF >= 13 && $1 ~ /^[0-9]+$/ { s = $1; b = $8; i = $12 }
  END { print s, b, i }' "$out")
if [ -z "${busbw:-}" ]; then
  echo "# verdict: none: no result rows in $out (did the run fail?)"
  exit 0
fi

cores=$(nproc)
if [ -n "${MEMBW_GBS:-}" ]; then
  B=$MEMBW_GBS how="given by MEMBW_GBS"
else
  B=$("$build/bin/membw" | awk '{ print $1 }')
  how="measured just now by membw, $cores cores copying together"
fi
llc=${LLC_BYTES:-$(getconf LEVEL3_CACHE_SIZE 2>/dev/null || true)}
case "$llc" in '' | 0 | undefined) llc=$(getconf LEVEL2_CACHE_SIZE 2>/dev/null || true) ;; esac
case "$llc" in '' | *[!0-9]*) llc=0 ;; esac

awk -v p="$p" -v B="$B" -v bw="$busbw" -v bwi="$busbw_ip" -v size="$size" -v how="$how" \
  -v cores="$cores" -v llc="$llc" '
function mib(b) { return b >= 1048576 ? sprintf("%g MiB", b / 1048576) : sprintf("%d B", b) }
# The judgement of a share of the limit; ip: the in-place column, whose buffers take p x size
# (out of place 2 x p x size: a send and a receive buffer a rank).
function judge(share, ip,   range, foot, where, why) {
  if (lo == 0) return "no range is known for this many ranks"
  range = sprintf("%d-%d%% at %d ranks on malloc buffers", lo, hi, p)
  if (share > 100) {
    foot = (ip ? 1 : 2) * p * size
    where = sprintf("%s of buffers (%d ranks x %s%s)", mib(foot), p, ip ? "" : "2 x ", mib(size))
    if (llc > 0 && foot <= llc)
      return sprintf("above the limit%s: its %s fit in this machine'"'"'s %s last-level cache, so they can run from the cache, not memory", ip ? ", and not from being in place (which moves as many bytes)" : "", where, mib(llc))
    if (llc > 0 && foot <= 2 * llc)
      why = sprintf("part of its %s can stay in this machine'"'"'s %s last-level cache, or ", where, mib(llc))
    else
      why = sprintf("its %s are larger than the caches, so: ", where)
    return sprintf("above the limit%s: %s-R 1 buffers (zero-copy passes it, docs/performance.md), or B was measured at a slower moment than the run (run again)", ip ? ", and not from being in place (which moves as many bytes)" : "", why)
  }
  if (share > hi)
    return sprintf("above the usual %s: better than the 2-core runs the range is from (more cores, a larger cache, a quieter moment, or -R 1 buffers)", range)
  if (share >= lo) return sprintf("within the usual %s", range)
  if (share >= lo / 2) return sprintf("below the usual %s: is something else running (uptime)?", range)
  return sprintf("far below the usual %s: check for other load (uptime) and the binding (--report-bindings)", range)
}
BEGIN {
  limit = B / p * 2 * (p - 1) / p
  # What libhccl reached at 64 MiB on malloc buffers on the 2-core machines of
  # docs/performance.md (bench/compare.sh, four runs): 8 ranks 42-57% of the limit, 4 ranks
  # 55-60%, 2 ranks 86-90%. Those runs read the in-place column; out of place ran within about
  # 6% of it at 4 and 8 ranks (the staged path, docs/design.md) and about a fifth below it at 2
  # (the ring), so one range a rank count judges both columns.
  lo = p == 8 ? 40 : p == 4 ? 50 : p == 2 ? 70 : 0
  hi = p == 8 ? 60 : p == 4 ? 75 : p == 2 ? 100 : 0
  share = limit > 0 ? 100 * bw / limit : 0
  note = cores == 2 ? "" : sprintf("; the ranges are from 2 cores, this machine has %d", cores)
  printf "# verdict: out of place, busbw %.2f GB/s at %s is %.0f%% of this machine'"'"'s memory limit %.2f GB/s (B/p x 2(p-1)/p, p = %d, B = %.2f GB/s %s): %s%s\n", bw, mib(size), share, limit, p, B, how, judge(share, 0), note
  if (bwi !~ /^[0-9.]+$/) {
    printf "# verdict: in place, none: the table has no in-place busbw (%s)\n", bwi == "" ? "no column" : bwi
    exit
  }
  share = limit > 0 ? 100 * bwi / limit : 0
  printf "# verdict: in place, busbw %.2f GB/s is %.0f%% of the same limit (in place reads every input and writes every result once too): %s; the fields: docs/perf_programs.md\n", bwi, share, judge(share, 1)
}'
