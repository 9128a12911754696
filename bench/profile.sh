#!/bin/sh
# profile.sh - where the time of one allreduce size goes, for docs/performance.md: runs
# allreduce_perf (float sum, out-of-place and in-place) under npu-launch three times, each
# on an otherwise idle machine:
#   1. plain, for the time per call;
#   2. under `perf stat -a` (software events: this VM exposes no hardware counters), for the
#      CPU time and context switches per call, all ranks together;
#   3. under `perf record -a -e cpu-clock`, for the share of CPU time in each function;
#   4. with HCCL_TRACE_FILE, for the time ranks slept waiting for a peer, per call.
#
# usage: bench/profile.sh [-B build] [-n ranks] [-s bytes] [-R 0|1] [-i iterations]
#
# Defaults: build, 8 ranks, 64M, -R 0, 20 iterations. Needs perf (linux-perf) and root or
# kernel.perf_event_paranoid <= 0 for -a.
set -eu
help() { awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; }
B=build N=8 S=64M R=0 I=20
case "${1:-}" in
--help) help; exit 0 ;;
--*) echo "profile.sh: unknown option '$1'; see bench/profile.sh --help" >&2; exit 2 ;;
esac
while getopts hB:n:s:R:i: o; do
  case $o in
    B) B=$OPTARG ;; n) N=$OPTARG ;; s) S=$OPTARG ;; R) R=$OPTARG ;; i) I=$OPTARG ;;
    h) help; exit 0 ;;
    *) echo "usage: $0 [-B build] [-n ranks] [-s bytes] [-R 0|1] [-i iterations]; see --help" >&2; exit 2 ;;
  esac
done
command -v perf >/dev/null || { echo "profile.sh: perf not found (apt-get install linux-perf)" >&2; exit 2; }
T=$(mktemp -d /tmp/hccl-profile.XXXXXX)
trap 'rm -rf "$T"' EXIT
run() {
  "$B/bin/npu-launch" --device-list "0-$((N - 1))" -- "$B/bin/allreduce_perf" \
    -d float -o sum -b "$S" -e "$S" -n "$I" -w 2 -c 0 -R "$R"
}
# calls made by one rank in one run: (warm-up + timed) x (out-of-place + in-place)
CALLS=$(((I + 2) * 2))

echo "== allreduce $S, $N ranks, -R $R, $I timed calls (+2 warm-up) out-of-place and in-place"
run | grep -E '^ +[0-9]+ ' | awk '{printf "time per call: out-of-place %s us (busbw %s GB/s), in-place %s us (busbw %s GB/s)\n", $6, $8, $10, $12}'

perf stat -a -x, -e task-clock,context-switches,cpu-migrations,page-faults -o "$T/stat" \
  sh -c "$(command -v "$B/bin/npu-launch") --device-list 0-$((N - 1)) -- $B/bin/allreduce_perf -d float -o sum -b $S -e $S -n $I -w 2 -c 0 -R $R >/dev/null"
awk -F, -v calls="$CALLS" -v n="$N" '
  /task-clock/       { printf "CPU time per call, all CPUs (incl. idle): %.2f ms\n", $1 / calls }
  /context-switches/ { printf "context switches per call: %.0f (%.1f per rank)\n", $1 / calls, $1 / calls / n }
  /cpu-migrations/   { printf "CPU migrations per call: %.1f\n", $1 / calls }
  /page-faults/      { printf "page faults per call: %.1f (includes start-up)\n", $1 / calls }' "$T/stat"

perf record -q -a -e cpu-clock -o "$T/perf.data" -- \
  sh -c "$B/bin/npu-launch --device-list 0-$((N - 1)) -- $B/bin/allreduce_perf -d float -o sum -b $S -e $S -n $I -w 2 -c 0 -R $R >/dev/null" 2>/dev/null
echo "share of all CPU samples by function (top 12; swapper = idle CPU):"
perf report -q -i "$T/perf.data" --no-children --sort comm,sym --stdio 2>/dev/null |
  grep -v '^$' | head -12 | sed 's/^/  /'

HCCL_TRACE_FILE="$T/t.%r.json" run >/dev/null
/usr/bin/python3 - "$T" "$N" <<'EOF'
import glob, json, sys
d, n = sys.argv[1], int(sys.argv[2])
calls = busy = slept = 0.0
for f in glob.glob(d + "/t.*.json"):
    ev = json.load(open(f))
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    ar = [(e["ts"], e["ts"] + e["dur"]) for e in ev
          if e.get("cat") == "collective" and e["name"].lower() == "allreduce"]
    calls += len(ar)
    busy += sum(b - a for a, b in ar)
    # waits that slept inside an allreduce call (the program's own barriers excluded)
    slept += sum(e["dur"] for e in ev if e.get("cat") == "wait"
                 and any(a <= e["ts"] < b for a, b in ar))
print("from HCCL_TRACE_FILE: %.0f allreduce calls over %d ranks; per call and rank %.2f ms, "
      "of which %.2f ms (%.0f%%) asleep waiting for a peer"
      % (calls, n, busy / calls / 1e3, slept / calls / 1e3, 100 * slept / busy))
EOF
