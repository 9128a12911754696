#!/usr/bin/env bash
# fuzz.sh - builds the libFuzzer targets (tests/fuzz/fuzz_*.c) with clang in a build directory
# of their own and runs each for SECONDS (default 30) over a scratch copy of its seed corpus
# (tests/fuzz/corpus/<target>/), so inputs found are not written into the repository.
#
# usage: bash scripts/fuzz.sh [SECONDS_PER_TARGET]
#
# Prints executions, executions per second and crashes per target; exits non-zero when any
# target crashed (its input is kept under <build>/fuzz-artifacts/ to add as a regression seed).
# FUZZ_BUILD_DIR (default build-fuzz) and FUZZ_CC (default clang) may be set; FUZZ_TARGETS
# ("fuzz_topo fuzz_ranktable") runs only those. Needs clang and libclang-rt-14-dev.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
case "$secs" in
-h | --help) awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
'' | *[!0-9]*)
  echo "fuzz.sh: '$secs' is not a number of seconds; see bash scripts/fuzz.sh --help" >&2
  exit 2
  ;;
esac
build=${FUZZ_BUILD_DIR:-build-fuzz}
cc=${FUZZ_CC:-clang}
command -v "$cc" >/dev/null || {
  echo "fuzz.sh: $cc not found; apt-get install clang libclang-rt-14-dev" >&2
  exit 2
}

echo "== building the fuzz targets with $cc in $build"
mkdir -p "$build"
cmake -S . -B "$build" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHCCL_FUZZ=ON \
  -DHCCL_BUILD_TESTS=OFF -DHCCL_BUILD_TORCH=OFF >"$build/configure.log" 2>&1 || {
  cat "$build/configure.log" >&2
  exit 1
}
cmake --build "$build" -j2 --target fuzz_targets >/dev/null

# Longest input per target: a few times the largest real document or request.
max_len() {
  case "$1" in
  fuzz_ranktable) echo 16384 ;;
  fuzz_store_wire) echo 8192 ;;
  fuzz_tcp_handshake) echo 4096 ;; # a hello and some 40 frames of its 64-byte slots
  *) echo 4096 ;;
  esac
}
dict() {
  case "$1" in
  fuzz_topo | fuzz_ranktable | fuzz_whitelist) echo tests/fuzz/json.dict ;;
  *) [ -f "tests/fuzz/$1.dict" ] && echo "tests/fuzz/$1.dict" ;;
  esac
}

scratch=$(mktemp -d /tmp/hccl-fuzz.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
artifacts="$build/fuzz-artifacts"
mkdir -p "$artifacts"
targets=${FUZZ_TARGETS:-$(cd "$build/fuzz" && ls fuzz_* | sort)}
failed=0
printf '%-18s %12s %10s %8s\n' target executions exec/s crashes
for t in $targets; do
  mkdir -p "$scratch/$t"
  [ -d "tests/fuzz/corpus/$t" ] && cp -r "tests/fuzz/corpus/$t/." "$scratch/$t/"
  args=(-max_total_time="$secs" -max_len="$(max_len "$t")" -timeout=5 -rss_limit_mb=1024
    -print_final_stats=1 -artifact_prefix="$artifacts/$t-")
  d=$(dict "$t" || true)
  [ -n "$d" ] && args+=(-dict="$d")
  before=$(ls "$artifacts" | grep -c "^$t-" || true)
  rc=0
  "$build/fuzz/$t" "${args[@]}" "$scratch/$t" >"$scratch/$t.log" 2>&1 || rc=$?
  after=$(ls "$artifacts" | grep -c "^$t-" || true)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$scratch/$t.log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$scratch/$t.log" | tail -1)
  crashes=$((after - before))
  [ "$rc" -ne 0 ] && [ "$crashes" -eq 0 ] && crashes=1
  printf '%-18s %12s %10s %8s\n' "$t" "${execs:-?}" "${rate:-?}" "$crashes"
  if [ "$crashes" -ne 0 ]; then
    failed=1
    echo "-- $t failed (exit $rc); the end of its log:" >&2
    tail -40 "$scratch/$t.log" >&2
  fi
done
if [ "$failed" -ne 0 ]; then
  echo "fuzz.sh: crashes found; inputs in $artifacts" >&2
  exit 1
fi
echo "fuzz.sh: no crashes"
