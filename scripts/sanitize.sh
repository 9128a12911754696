#!/usr/bin/env bash
# sanitize.sh - builds the project with a sanitizer into build-<name> and runs every test.
# usage: bash scripts/sanitize.sh address     # ASan + UBSan
#        bash scripts/sanitize.sh undefined   # UBSan alone
#        bash scripts/sanitize.sh thread      # TSan
# Forked ranks inherit the sanitizer; a report makes that rank (and so the test) fail.
# torch_hccl is left out of these builds: Debian's python3 and libtorch are not built with a
# sanitizer, so the extension could only load with the runtime preloaded into python itself;
# the library under it is the same code the C tests run.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
address) san="address,undefined" name=asan ;;
undefined) san="undefined" name=ubsan ;;
thread) san="thread" name=tsan ;;
-h | --help) awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
*)
  echo "sanitize.sh: '${1:-}' is not a sanitizer; usage: bash scripts/sanitize.sh" \
    "address|undefined|thread (see --help)" >&2
  exit 2
  ;;
esac
cmake -S . -B "build-$name" -DCMAKE_BUILD_TYPE=Debug -DHCCL_SANITIZE="$san" -DHCCL_BUILD_TORCH=OFF >/dev/null
cmake --build "build-$name" -j"$(nproc)"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1}
# Left out: the tests that run none of the library's code under the sanitizer, only scripts
# and checks of the tree (the build without a sanitizer runs each): help (each program's --help;
# the parsers of the perf flags and the launcher's options stay covered by perf, perf_data and
# launcher here), labels, layers, components, bench_verdict, perf_flags. Side by side as in
# scripts/quickstart.sh (tests/CMakeLists.txt's RUN_SERIAL holds here too).
jobs=$(($(nproc) + 1))
exec ctest --test-dir "build-$name" --output-on-failure --timeout 1800 -j"$jobs" \
  -E '^(help|labels|layers|components|bench_verdict|perf_flags)$' \
  --output-junit "$(cd "build-$name" && pwd)/ctest.xml"
