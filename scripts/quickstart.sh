#!/usr/bin/env bash
# quickstart.sh - the README's two commands on a fresh Debian 12 machine (as root, or with sudo):
#   bash scripts/quickstart.sh bench   install, build, run an 8-device allreduce benchmark
#   bash scripts/quickstart.sh test    install, build, run every test (ctest)
# BUILD_DIR (default ./build) and BUILD_TYPE (default Release) may be set; SKIP_INSTALL=1 skips
# apt-get (for machines that already have the packages).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
case "$mode" in
bench | test) ;;
*)
  echo "usage: bash scripts/quickstart.sh bench|test" >&2
  exit 2
  ;;
esac

packages=(build-essential cmake pkg-config libuv1-dev libcjson-dev libcmocka-dev iproute2 procps)
# The tests cover the PyTorch backend too (torch_hccl), so they need Debian's torch; clang with
# libFuzzer runs the short fuzz pass (fuzz_smoke, scripts/fuzz.sh).
[ "$mode" = test ] && packages+=(python3-dev python3-torch libtorch-dev pybind11-dev openmpi-bin libopenmpi-dev clang libclang-rt-14-dev)
if [ "${SKIP_INSTALL:-0}" != 1 ]; then
  missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    echo "== installing ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
fi

build=${BUILD_DIR:-build}
echo "== building in $build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" >/dev/null
cmake --build "$build" -j"$(nproc)"

if [ "$mode" = bench ]; then
  echo "== 8-device allreduce benchmark (npu-launch --device-list 0-7)"
  exec "$build/bin/npu-launch" --device-list 0,1,2,3,4,5,6,7 -- \
    "$build/bin/allreduce_perf" -b 16 -e 64M -f 4 -d float -o sum -n 10 -w 2
fi
echo "== running every test"
exec ctest --test-dir "$build" --output-on-failure --timeout 900
