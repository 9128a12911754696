#!/usr/bin/env bash
# anchors.sh - the CPU libraries libhccl is measured against, installed and started the way
# their users do it; sourced by bench/compare.sh (one server) and bench/multiserver.sh (pretend
# servers), not run. setup_oneccl, setup_deepspeed and setup_mpich install an anchor on first
# use (pip or apt-get download, into ANCHORS_DIR) and build its benchmark program into BIN;
# each leaves its X_WHY empty when the anchor can run, else sets it to a short reason that the
# tables print in its cells. ccl_launch, ds_launch and mpich_launch start N ranks on this
# machine with each anchor's own launcher; best names the best of several results.
#
# The caller sets: ANCHORS_DIR, ANCHORS_INSTALL (1: install what is missing), ONECCL_VERSION,
# DEEPSPEED_VERSION, PY (the Python torch runs in), HAVE_GLOO (1: PY imports torch), BIN (the
# build's bin/), HERE (bench/), RESULTS_DIR (logs), RUN_TIMEOUT (seconds), and, if it calls
# ds_launch, a free_port function.
#
# usage: . "$HERE/anchors.sh"   (in bench/compare.sh and bench/multiserver.sh)
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  case "${1:-}" in
  -h | --help) awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
  *) echo "anchors.sh: sourced by bench/compare.sh and bench/multiserver.sh, not run${1:+ (unknown option '$1')}" >&2; exit 2 ;;
  esac
fi

# --- Anchors (bench/README.md, "Anchors"). setup_X leaves X_WHY empty when X can run, else
# sets it to a short reason that the tables print in X's cells.
mkdir -p "$ANCHORS_DIR" && ANCHORS_DIR=$(cd "$ANCHORS_DIR" && pwd)
ONECCL=$ANCHORS_DIR/oneccl
DS_VENV=$ANCHORS_DIR/deepspeed-venv
CCL_WHY= DS_WHY= MPICH_WHY=

# The perf programs' driver (flags, sweep, data, check, table: perf/perf_common.h), built into
# each twin made here as CMake builds it into the MPI twins.
PERF_DRIVER=("$HERE/../perf/perf_common.c" "$HERE/../perf/perf_args.c" "$HERE/../perf/perf_coll.c"
  "$HERE/../perf/perf_data.c")
# stale EXE FILE...: true when EXE is missing or older than one of FILE, or than the driver.
stale() {
  local exe=$1 f
  shift
  [ -x "$exe" ] || return 0
  for f in "$@" "${PERF_DRIVER[@]}" "$HERE"/../perf/*.h; do
    [ "$f" -nt "$exe" ] && return 0
  done
  return 1
}

# first_error LOG: the first line of LOG that says what went wrong, made fit for a table cell.
first_error() {
  { grep -m1 -E 'ERROR|[Ee]rror|cannot|not found|No such' "$1" || tail -n1 "$1"; } |
    tr '|' '/' | cut -c1-150
}

# oneCCL: oneccl-cpu (libccl; it depends on impi-rt, Intel MPI's runtime with mpiexec and
# libfabric) and oneccl-devel's headers (--no-deps: it would pull the GPU build) into
# $ONECCL, then bench/ccl_allreduce_perf.cpp built against them, with the driver's C files
# (PERF_DRIVER, compiled with the C compiler on their own) beside it.
setup_oneccl() {
  local log=$RESULTS_DIR/install.oneccl.txt exe=$BIN/ccl_allreduce_perf
  if [ ! -e "$ONECCL/lib/libccl.so.1" ] || [ ! -e "$ONECCL/include/oneapi/ccl.hpp" ] ||
    [ ! -x "$ONECCL/bin/mpiexec" ]; then
    if [ "$ANCHORS_INSTALL" != 1 ]; then
      CCL_WHY="oneCCL not installed in $ONECCL (ANCHORS_INSTALL=0)"
      return
    fi
    echo "oneccl: pip install --prefix $ONECCL oneccl-cpu==$ONECCL_VERSION oneccl-devel==$ONECCL_VERSION ..." >&2
    if ! "$PY" -m pip install --prefix "$ONECCL" "oneccl-cpu==$ONECCL_VERSION" >"$log" 2>&1 ||
      ! "$PY" -m pip install --no-deps --prefix "$ONECCL" "oneccl-devel==$ONECCL_VERSION" >>"$log" 2>&1; then
      CCL_WHY="pip install oneccl-cpu==$ONECCL_VERSION failed: $(first_error "$log")"
      return
    fi
  fi
  if stale "$exe" "$HERE/ccl_allreduce_perf.cpp" "$ONECCL/lib/libccl.so.1"; then
    log=$RESULTS_DIR/build.oneccl.txt
    local objs=() f
    mkdir -p "$RESULTS_DIR/perf_driver"
    if ! (for f in "${PERF_DRIVER[@]}"; do # a subshell: its exit ends only the build
      objs+=("$RESULTS_DIR/perf_driver/$(basename "${f%.c}").o")
      "${CC:-cc}" -O2 -I"$HERE/../perf" -c "$f" -o "${objs[-1]}" || exit 1
    done &&
      "${CXX:-g++}" -O2 -std=c++17 -I"$HERE/../perf" -I"$ONECCL/include" \
        "$HERE/ccl_allreduce_perf.cpp" "${objs[@]}" \
        -L"$ONECCL/lib" -lccl -Wl,-rpath,"$ONECCL/lib" -o "$exe") >"$log" 2>&1; then
      CCL_WHY="building ccl_allreduce_perf failed: $(first_error "$log")"
      return
    fi
  fi
}

# oneCCL's documented launch: Intel MPI's mpiexec with the variables its vars.sh would set.
# The key-value store's address goes through a file of this run's own.
# The variables Intel MPI's vars.sh would set for $ONECCL (multiserver.sh starts it too).
ONECCL_ENV=(CCL_ROOT="$ONECCL" I_MPI_ROOT="$ONECCL" FI_PROVIDER_PATH="$ONECCL/lib"
  LD_LIBRARY_PATH="$ONECCL/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" PATH="$ONECCL/bin:$PATH")
ccl_launch() {
  local n=$1
  shift
  env "${ONECCL_ENV[@]}" CCL_PERF_KVS_FILE="$RESULTS_DIR/ccl.kvs.$RANDOM$RANDOM" \
    timeout "$RUN_TIMEOUT" "$ONECCL/bin/mpiexec" -n "$n" "$@"
}

# DeepSpeed: a venv that sees $PY's packages (so its torch is $PY's torch, pinned on the
# install line so pip cannot swap it), with deepspeed installed in it. Its shm op is built
# JIT by the first run (~/.cache/torch_extensions; 30 s to 2 min here, once per venv).
setup_deepspeed() {
  local log=$RESULTS_DIR/install.deepspeed.txt tv
  if [ $HAVE_GLOO != 1 ]; then
    DS_WHY="needs torch ($PY cannot import it)"
    return
  fi
  if ! "$DS_VENV/bin/python" -c "import deepspeed" >/dev/null 2>&1; then
    if [ "$ANCHORS_INSTALL" != 1 ]; then
      DS_WHY="DeepSpeed not installed in $DS_VENV (ANCHORS_INSTALL=0)"
      return
    fi
    tv=$("$PY" -c 'import torch; print(torch.__version__.split("+")[0])')
    echo "deepspeed: pip install deepspeed==$DEEPSPEED_VERSION torch==$tv into $DS_VENV ..." >&2
    if ! { "$PY" -m venv --system-site-packages "$DS_VENV" &&
      "$DS_VENV/bin/python" -m pip install "deepspeed==$DEEPSPEED_VERSION" "torch==$tv"; } >"$log" 2>&1; then
      DS_WHY="pip install deepspeed==$DEEPSPEED_VERSION failed: $(first_error "$log")"
      return
    fi
  fi
  # --bind_cores_to_rank (ds_launch) needs numactl: without it the ranks run unbound, and the
  # shm op's spinning waits took 15 ms a 4 KiB call at 2 ranks on 2 cores (14 us bound).
  if ! command -v numactl >/dev/null && [ "$ANCHORS_INSTALL" = 1 ] && [ "$(id -u)" = 0 ]; then
    echo "deepspeed: apt-get install numactl (its launcher binds cores with it) ..." >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends numactl \
      >"$RESULTS_DIR/install.numactl.txt" 2>&1 ||
      echo "deepspeed: numactl not installed ($(first_error "$RESULTS_DIR/install.numactl.txt")): its ranks run unbound" >&2
  fi
  # Build (or find built) the shm op here, unbound and without RUN_TIMEOUT: built by the first
  # timed run instead, it compiles on the one core its rank is pinned to.
  log=$RESULTS_DIR/build.deepspeed.txt
  if ! DS_ACCELERATOR=cpu timeout 900 "$DS_VENV/bin/python" -c 'from deepspeed.accelerator import get_accelerator
get_accelerator().create_op_builder("ShareMemCommBuilder").load()' >"$log" 2>&1; then
    DS_WHY="JIT build of DeepSpeed's ShareMemCommBuilder failed: $(first_error "$log")"
  fi
}

# DeepSpeed's documented launch for CPU: its deepspeed launcher (it sets LOCAL_SIZE, which the
# shm op needs) with --bind_cores_to_rank, which DeepSpeed's CPU guide recommends. That needs
# numactl and at least one core per rank; otherwise the ranks run unbound (like mpirun, which
# binds only while there are enough cores). The shm op's waits spin: unbound on a busy
# machine they are slow (bench/README.md).
# DeepSpeed's shared-memory allreduce leaves a 66 MB file per rank in /dev/shm
# (deepspeed_allreduce_buffer_<n>_<address>_<port>_<rank>) that nothing removes: 3 runs x 3 rank
# counts x 2 sizes would pin 5 GB of memory per compare.sh, so each run's files go after it.
ds_launch() {
  local n=$1 bind=() port rc
  shift
  port=$(free_port)
  if command -v numactl >/dev/null && [ "$n" -le "$(nproc)" ]; then bind=(--bind_cores_to_rank); fi
  timeout "$RUN_TIMEOUT" "$DS_VENV/bin/deepspeed" "${bind[@]}" --num_gpus "$n" --master_port "$port" "$@"
  rc=$?
  rm -f /dev/shm/deepspeed_allreduce_buffer_*_"$port"_*
  return $rc
}

# MPICH: Debian's packages (mpich, libmpich12, libmpich-dev, and libslurm38 that its mpiexec
# links) fetched with apt-get download and unpacked into $MPICH_DIR, not installed: installed,
# libmpich-dev would take the mpi.h and mpicc alternatives from Open MPI, which CMake builds
# mpi_allreduce_perf against. mpi_allreduce_perf.c is built against it with the C compiler
# (mpicc.mpich's paths point into /usr) and runs under its mpiexec.hydra.
MPICH_DIR=$ANCHORS_DIR/mpich
MPICH_LIB=$MPICH_DIR/usr/lib/x86_64-linux-gnu
setup_mpich() {
  local exe=$BIN/mpich_allreduce_perf log=$RESULTS_DIR/install.mpich.txt deb
  if [ ! -e "$MPICH_LIB/libmpich.so.12" ] || [ ! -x "$MPICH_DIR/usr/bin/mpiexec.hydra" ]; then
    if [ "$ANCHORS_INSTALL" != 1 ]; then
      MPICH_WHY="MPICH not unpacked in $MPICH_DIR (ANCHORS_INSTALL=0)"
      return
    fi
    echo "mpich: apt-get download mpich libmpich12 libmpich-dev libslurm38, unpacked into $MPICH_DIR ..." >&2
    mkdir -p "$MPICH_DIR/debs"
    if ! (cd "$MPICH_DIR/debs" && apt-get download mpich libmpich12 libmpich-dev libslurm38) >"$log" 2>&1; then
      MPICH_WHY="apt-get download mpich failed: $(first_error "$log")"
      return
    fi
    for deb in "$MPICH_DIR"/debs/*.deb; do dpkg -x "$deb" "$MPICH_DIR" >>"$log" 2>&1; done
  fi
  if stale "$exe" "$HERE/mpi_allreduce_perf.c"; then
    log=$RESULTS_DIR/build.mpich.txt
    if ! "${CC:-cc}" -O2 -I"$HERE/../perf" -I"$MPICH_DIR/usr/include/x86_64-linux-gnu/mpich" \
      -o "$exe" "$HERE/mpi_allreduce_perf.c" "${PERF_DRIVER[@]}" -lm \
      -L"$MPICH_LIB" -lmpich -Wl,-rpath,"$MPICH_LIB" >"$log" 2>&1; then
      MPICH_WHY="building mpi_allreduce_perf against MPICH failed: $(first_error "$log")"
    fi
  fi
}

# MPICH's own launcher, as a user of it runs a job on one machine (its default binding: none).
mpich_launch() {
  local n=$1
  shift
  LD_LIBRARY_PATH=$MPICH_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
    timeout "$RUN_TIMEOUT" "$MPICH_DIR/usr/bin/mpiexec.hydra" -launcher fork -np "$n" "$@"
}

# best more|less NAME=VALUE...: "NAME|VALUE" of the largest (more) or smallest (less) number.
best() {
  local dir=$1
  shift
  printf '%s\n' "$@" | awk -F= -v dir="$dir" '
    $2 + 0 > 0 && (b == "" || (dir == "more" ? $2 + 0 > bv : $2 + 0 < bv)) { b = $1; bv = $2 + 0 }
    END { if (b == "") print "n/a|n/a"; else print b "|" bv }'
}
