#!/usr/bin/env bash
# quickstart.sh - the README's two commands on a fresh Debian 12 machine (as root, or with sudo):
# usage: bash scripts/quickstart.sh bench   install, build, run an 8-device allreduce benchmark
#                                           and judge its busbw against the memory limit
#        bash scripts/quickstart.sh test    install, build, run every test (ctest)
# BUILD_DIR (default ./build) and BUILD_TYPE (default Release) may be set; SKIP_INSTALL=1 skips
# apt-get and pip (for machines that already have the packages).
#
# torch: the test command builds torch_hccl for two torches and tests both: pip's torch 2.13
# (for `python3` on PATH when that is not Debian's own /usr/bin/python3, else for a virtual
# environment in $BUILD_DIR/venv), with Lightning and torchmetrics (and DeepSpeed 0.19.8,
# transformers 5.24.0 and accelerate 1.15.0 in a venv over that Python, $BUILD_DIR/deepspeed-venv,
# or in $BUILD_DIR/venv), in $BUILD_DIR; and Debian's
# python3-torch 1.13 (for /usr/bin/python3) in $BUILD_DIR/debian-torch, where only the tests of
# torch_hccl and the installs (cmake's and pip's) run again.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
case "$mode" in
bench | test) ;;
-h | --help) awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
*)
  echo "quickstart.sh: '$mode' is not bench or test; usage: bash scripts/quickstart.sh bench|test" \
    "(see --help)" >&2
  exit 2
  ;;
esac

packages=(build-essential cmake pkg-config libuv1-dev libcjson-dev libcmocka-dev iproute2 procps)
# The tests cover the PyTorch backend too (torch_hccl), so they need Debian's torch; clang with
# libFuzzer runs the short fuzz pass (fuzz_smoke, scripts/fuzz.sh); ccache compiles each source
# once for the several builds below; qemu, busybox, cpio and kmod
# boot the RDMA guests (tests/rdma/guest.sh, which downloads Debian's kernel package itself with
# apt-get download: the lists from the apt-get update below), rdma-core's packages run RDMA in them.
[ "$mode" = test ] && packages+=(python3-dev python3-venv python3-torch libtorch-dev pybind11-dev openmpi-bin libopenmpi-dev clang libclang-rt-14-dev ninja-build ccache)
[ "$mode" = test ] && packages+=(qemu-system-x86 rdma-core ibverbs-utils libibverbs-dev busybox-static cpio kmod)
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
# ccache (Debian's), for the test command: it compiles the same sources more than once (this
# build; pip's build of the same tree in pip_install; the Debian torch build and its pip build),
# and every compile after the first with the same command is a cache hit. CMake takes
# CMAKE_<LANG>_COMPILER_LAUNCHER from the environment when it configures a new build tree,
# scikit-build-core's included. Three things make the commands the same:
#   - one compiler name: ccache hashes it, and pip's builds would take Python's (sysconfig's
#     CC: gcc, or x86_64-linux-gnu-gcc for Debian's Python) where CMake takes cc: CC and CXX
#     set here (unless set already) are what every build uses;
#   - CCACHE_BASEDIR = this build folder, under which pip's builds and the Debian build sit:
#     paths below it (torch_hccl's precompiled header, -include'd by absolute path) become
#     relative to each build's own top, the same in each, while the source tree's stay absolute;
#     and CCACHE_SLOPPINESS=pch_defines,time_macros, which ccache needs to cache compiles
#     that use a precompiled header. GCC's header is not the same file twice, so only a hit
#     on its own compile (the same command again) makes the files that use it hit;
#   - one generator: ccache keys a compile on its dependency file's target (-MT), the object's
#     path from the build's top, which Ninja (pip's builds use it) and Make write differently.
# pip_install's wheel build went from 109 misses to 101 hits of 109 (2026-12-07).
mkdir -p "$build"
if [ "$mode" = test ] && command -v ccache >/dev/null; then
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
  export CC=${CC:-cc} CXX=${CXX:-c++}
  CCACHE_BASEDIR=$(cd "$build" && pwd)
  export CCACHE_BASEDIR CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:+$CCACHE_SLOPPINESS,}pch_defines,time_macros
  if command -v ninja >/dev/null; then export CMAKE_GENERATOR=Ninja; fi
fi
# Two steps run in the background beside others (the client libraries beside the build, the
# Debian torch build beside the tests): beside starts one with its output in a log, await
# waits for it and, if it failed, shows the log's end and says so; both return its status.
beside() { # VAR LOG COMMAND...: the step's pid in VAR
  local var=$1 log=$2
  shift 2
  "$@" >"$log" 2>&1 &
  printf -v "$var" %s $!
}
await() { # PID LOG WHAT
  local st=0
  wait "$1" || st=$?
  if [ $st != 0 ]; then
    tail -40 "$2"
    echo "quickstart.sh: $3 failed (exit $st); its log: $2" >&2
  fi
  return $st
}
torch_args=()
if [ "$mode" = test ]; then
  # pip's torch, pinned: an unpinned torch, or a range admitting a newer one, is a CUDA build
  # of several GB. Lightning and torchmetrics are clients of the backend the tests run.
  pip_packages=(torch==2.13.0 lightning==2.6.6 torchmetrics==1.9.0 expecttest==0.3.0)
  py=$(command -v python3 || true)
  if [ -z "$py" ] || [ "$(readlink -f "$py")" = "$(readlink -f /usr/bin/python3)" ]; then
    [ -x "$build/venv/bin/python" ] || /usr/bin/python3 -m venv "$build/venv"
    py=$build/venv/bin/python
  fi
  if [ "${SKIP_INSTALL:-0}" != 1 ] &&
    ! "$py" -c 'import torch, lightning, torchmetrics, expecttest; assert torch.__version__.startswith("2.13.0")' 2>/dev/null; then
    echo "== pip install ${pip_packages[*]} (for $py)"
    "$py" -m pip install -q "${pip_packages[@]}"
  fi
  # DeepSpeed, a client that tests/torch/test_bf16_clients.py trains with, pinned and for the
  # tests only: in a venv of its own that sees $py's packages (--system-site-packages), so it
  # runs on $py's very torch (pinned on the pip line, so pip keeps it) while $py itself gets
  # nothing new: no deepspeed, none of its dependencies, no newer setuptools. When $py is
  # already a venv (build/venv above) it goes into that venv instead: a venv made from a venv
  # would see Debian's site-packages (torch 1.13), not this venv's torch. DS_BUILD_OPS=0
  # installs no op; the one DeepSpeed's CPU accelerator builds when it starts (its
  # shared-memory allreduce, into ~/.cache/torch_extensions) is built here once, so the test
  # does not time it.
  ds_py=$py
  if [ "$("$py" -c 'import sys; print(sys.prefix == sys.base_prefix)')" = True ]; then
    ds_py=$build/deepspeed-venv/bin/python
    [ -x "$ds_py" ] || [ "${SKIP_INSTALL:-0}" = 1 ] || "$py" -m venv --system-site-packages "$build/deepspeed-venv"
  fi
  # The Hugging Face recipes' libraries (test_hf_trainer.py, test_accelerate.py, docs/pytorch.md
  # "Recipes") go into the same venv, pinned: transformers and accelerate for torch 2.x.
  client_packages=(deepspeed==0.19.8 transformers==5.24.0 accelerate==1.15.0)
  # Both steps run beside the build below (pip mostly unpacks, the op is one compile), which
  # waits for them before the tests: 49 s of the command's time before, one after the other.
  clients=""
  if [ "${SKIP_INSTALL:-0}" != 1 ] && ! "$ds_py" -c 'import deepspeed, transformers, accelerate' 2>/dev/null; then
    tv=$("$py" -c 'import torch; print(torch.__version__.split("+")[0])')
    echo "== pip install ${client_packages[*]} (for $ds_py, over torch $tv), then DeepSpeed's CPU shared-memory op, beside the build (log: $build/clients.log)"
    install_clients() {
      DS_BUILD_OPS=0 "$ds_py" -m pip install -q "${client_packages[@]}" "torch==$tv" || return
      DS_ACCELERATOR=cpu timeout 900 "$ds_py" -c 'from deepspeed.accelerator import get_accelerator
get_accelerator().create_op_builder("ShareMemCommBuilder").load()' >/dev/null ||
        echo "quickstart.sh: DeepSpeed's op did not build; test_bf16_clients will say why"
    }
    beside clients "$build/clients.log" install_clients
  fi
  torch_args=(-DHCCL_TORCH_PYTHON="$("$py" -c 'import sys; print(sys.executable)')")
fi
echo "== building in $build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" "${torch_args[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)"
if [ -n "${clients:-}" ]; then
  await "$clients" "$build/clients.log" "pip install ${client_packages[*]}" || exit
  cat "$build/clients.log"
fi

if [ "$mode" = bench ]; then
  echo "== 8-device allreduce benchmark (npu-launch --device-list 0-7)"
  # The table as it comes, then two lines judging its largest size's busbw, out of place and in
  # place, against the memory limit measured right after (scripts/bench_verdict.sh; the fields:
  # docs/perf_programs.md).
  table=$(mktemp)
  trap 'rm -f "$table"' EXIT
  "$build/bin/npu-launch" --device-list 0,1,2,3,4,5,6,7 -- \
    "$build/bin/allreduce_perf" -b 16 -e 64M -f 4 -d float -o sum -n 10 -w 2 | tee "$table"
  bash scripts/bench_verdict.sh "$build" "$table"
  exit 0
fi
# The Debian torch pass (below) runs when Debian's torch imports and the tests above were not
# built for it already.
debian=0
if /usr/bin/python3 -c 'import torch' 2>/dev/null && [ "$(cat "$build/python/INTERPRETER" 2>/dev/null)" != /usr/bin/python3 ]; then
  debian=1
  # What torch 1.13 changes is torch_hccl's binding (csrc/compat.hpp, the TORCH_VERSION_MAJOR and
  # TORCH_HCCL_BACKEND_API branches: process_group, errors, allocator, ops_gather, ops_reduce,
  # reduce_route) and the installs; so this pass builds it and runs the tests of those: install,
  # pip_install (the 1.13 path: no entry points), torch_ops, torch_errors, torch_allocator,
  # torch_init, torch_ddp, torch_migrate (torch 1.x's spellings) and torch_suite_2 (torch 1.13's
  # own distributed tests). Not again here, each run by the pass above on torch 2.13, where what
  # they test is the same: the C test programs (HCCL_C_TESTS=OFF: none is built); torch_suite_4
  # and torch_ops_allocator_off (4 ranks and the ring path are libhccl's); torch_spawn (a
  # rank's variables are read by libhccl), torch_example (DDP, as torch_ddp here), torch_harness
  # (torch's harness, which torch_suite_2 here runs under), torch_allocator_fork and
  # torch_allocator_zcopy (the regions and the zero-copy path are libhccl's; the allocator's
  # 1.13 branch is torch_allocator's); and the clients that skip on 1.13 (accelerate,
  # bf16_clients, deepspeed_zero, hf_trainer, lightning, shrink, torch2).
  # Its build runs beside the main pass under SCHED_IDLE (chrt --idle), so it takes only the
  # cores the tests leave idle: the guest tests that run alone at the end leave 0.1-0.6 of the 2
  # (it took 42 s after the pass). At nice 19 instead it still took 0.05-0.39 cores from the
  # side-by-side tests, which then ran 66 s longer (2026-12-07).
  idle=()
  chrt --idle 0 true 2>/dev/null && idle=(chrt --idle 0)
  echo "== building torch_hccl for Debian's torch in $build/debian-torch, beside the tests (${idle[*]:-nice -n 19}; log: $build/debian-torch.log)"
  build_debian() {
    "${idle[@]}" nice -n 19 cmake -S . -B "$build/debian-torch" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" \
      -DHCCL_TORCH_PYTHON=/usr/bin/python3 -DHCCL_FUZZ=OFF -DHCCL_C_TESTS=OFF &&
      "${idle[@]}" nice -n 19 cmake --build "$build/debian-torch" -j"$(nproc)"
  }
  beside debian_build "$build/debian-torch.log" build_debian
fi
# Side by side: one more test than cores, longest first, the ones that time a failure alone
# (RUN_SERIAL; tests/CMakeLists.txt). Each pass
# leaves ctest's JUnit report, which scripts/suite_times.py writes into tests/README.md.
jobs=$(($(nproc) + 1))
echo "== running every test (ctest -j$jobs)"
main=0
ctest --test-dir "$build" --output-on-failure --timeout 1800 -j"$jobs" \
  --output-junit "$(cd "$build" && pwd)/ctest-main.xml" || main=$?
if [ $debian = 1 ]; then
  built=0
  await "$debian_build" "$build/debian-torch.log" "the build for Debian's torch" || built=$?
  [ $main = 0 ] || exit $main
  [ $built = 0 ] || exit $built
  echo "== torch_hccl again on Debian's torch (/usr/bin/python3), in $build/debian-torch"
  ctest --test-dir "$build/debian-torch" --output-on-failure --timeout 1800 -j"$jobs" \
    -R '^(install|pip_install|torch_(ops|errors|allocator|init|ddp|migrate|suite_2))$' \
    --output-junit "$(cd "$build" && pwd)/ctest-debian.xml"
fi
exit $main
