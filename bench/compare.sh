#!/usr/bin/env bash
# compare.sh - libhccl's allreduce against MPI, and (when torch is installed) libhccl through
# torch.distributed (torch_hccl) against torch's gloo, on this machine, for 2, 4 and 8 ranks,
# and markdown tables of the result.
#
# usage: bench/compare.sh [build-dir]   (default ./build; builds nothing)
#
# For each N it runs, sum of DTYPE (default float) only:
#   allreduce_perf      (and with -R 1: HcclMemAlloc buffers, the zero-copy path)
#                       under <build>/bin/npu-launch --device-list 0-(N-1) --master-port P,
#                       or, when npu-launch is not built, N background processes with
#                       RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE/MASTER_ADDR/MASTER_PORT set;
#   mpi_allreduce_perf  under mpirun --allow-run-as-root --oversubscribe -np N
#                       --mca mpi_yield_when_idle 1. With more ranks than cores
#                       a busy-polling MPI rank steals the core its peer needs; yielding when
#                       idle makes the comparison fair (libhccl's waits spin only briefly when
#                       oversubscribed, then sleep on a futex).
#                       Both launchers keep their default CPU binding, as a user gets it:
#                       npu-launch pins rank r to CPU r mod ncpu; mpirun binds to cores up to
#                       one rank per core and not at all when oversubscribed. (The shell-loop
#                       fallback binds nothing; unpinned libhccl ranks can be much slower at
#                       4 KiB on a busy machine, see bench/README.md.)
#   torch_allreduce_perf.py --backend gloo|hccl (torch.distributed) the same way as
#                       allreduce_perf, when the build's Python ($PY) can import torch (hccl: when
#                       <build>/python/torch_hccl was built);
#   torch_ddp_step.py --backend gloo|hccl: the median time of a DDP training step.
# and the anchors a CPU user would choose instead (bench/README.md, "Anchors"), in one more
# pair of tables with the best anchor named at each rank count and hccl's ratio to it:
#   oneCCL              bench/ccl_allreduce_perf.cpp under the mpiexec of Intel MPI; oneCCL
#                       (oneccl-cpu, its impi-rt, oneccl-devel's headers) is pip-installed into
#                       ANCHORS_DIR/oneccl on first use and the program built into <build>/bin;
#   DeepSpeed shm       torch_allreduce_perf.py --backend deepspeed-shm under the deepspeed
#                       launcher, from a venv ANCHORS_DIR/deepspeed-venv (deepspeed pip-installed
#                       on first use, torch pinned to the version $PY has);
#   MPICH               mpi_allreduce_perf.c built against Debian's MPICH, under its
#                       mpiexec.hydra; the packages are fetched (apt-get download) and unpacked
#                       into ANCHORS_DIR/mpich on first use, never installed (libmpich-dev would
#                       take the mpi.h alternative from Open MPI).
# An anchor that is not installed or cannot run shows the reason in its cells.
# The torch table compares in-place columns (torch's allreduce is in place; its out-of-place
# twin adds a copy) with allreduce_perf's in-place columns.
# Each program runs at 64 MiB with few iterations (bandwidth) and at 4 KiB with many
# (latency); one sweep with a single -n would either take minutes at 64 MiB or be noise at
# 4 KiB. Each of those runs is repeated REPEATS times and the table shows the median, so one
# burst of load from something else on the machine does not decide a column; the repeats go
# round by round (each round runs every library once at each rank count), so that the host's
# drift over minutes weighs on every library alike. Numbers are
# from the out-of-place columns (the anchors tables: in-place, the call all of them have), time combined across ranks as the average (-a 1, the
# default). Every run checks its results (-c 1): a wrong element makes the cell n/a.
#
# Settings (environment): ITERS_LARGE (default 5) and ITERS_SMALL (default 500) timed
# iterations, REPEATS (default 3), RUN_TIMEOUT (default 120) seconds per run, RESULTS_DIR
# (default a new /tmp/hccl-compare.XXXXXX) where every run's full output is kept.
# RANKS (default "2 4 8"). DTYPE (default float): the element type every allreduce program
# reduces, one of allreduce_perf's -d names (int8 uint8 int16 uint16 int32 uint32 int64 uint64
# half bfloat16 float double); DTYPE=bfloat16 puts oneCCL's bf16 allreduce beside libhccl's
# (a program that refuses the type shows why in its cells; the DDP step stays float32).
# ANCHORS_DIR (default <build>/anchors) where the anchors are
# installed; ANCHORS_INSTALL=0 installs nothing (an anchor not already there shows "not
# installed"); ONECCL_VERSION (default 2021.15.2), DEEPSPEED_VERSION (default 0.19.8).
# QUICK=1: a functional check, not a measurement: 2 ranks, 4 KiB only, ITERS_SMALL 20, one
# repeat, no DDP step; prints the anchors table (about a minute once the anchors are
# installed; the first run installs them: about two minutes, 120 MB downloaded, 550 MB on disk).
set -u
case "${1:-}" in
-h | --help) awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
-*) echo "compare.sh: unknown option '$1'; see bash bench/compare.sh --help" >&2; exit 2 ;;
esac

BUILD=${1:-./build}
# The Python torch_hccl was built for (build/python/INTERPRETER), or $PYTHON.
PY=${PYTHON:-$(cat "$BUILD/python/INTERPRETER" 2>/dev/null || command -v python3)}
BIN=$BUILD/bin
HERE=$(cd "$(dirname "$0")" && pwd)
QUICK=${QUICK:-0}
if [ "$QUICK" = 1 ]; then
  ITERS_SMALL=${ITERS_SMALL:-20}
  REPEATS=${REPEATS:-1}
  RANKS=${RANKS:-2}
fi
ITERS_LARGE=${ITERS_LARGE:-5}
ITERS_SMALL=${ITERS_SMALL:-500}
REPEATS=${REPEATS:-3}
RANKS=${RANKS:-2 4 8}
ANCHORS_DIR=${ANCHORS_DIR:-$BUILD/anchors}
ANCHORS_INSTALL=${ANCHORS_INSTALL:-1}
ONECCL_VERSION=${ONECCL_VERSION:-2021.15.2}
DEEPSPEED_VERSION=${DEEPSPEED_VERSION:-0.19.8}
RUN_TIMEOUT=${RUN_TIMEOUT:-120}
DTYPE=${DTYPE:-float}
RESULTS_DIR=${RESULTS_DIR:-$(mktemp -d /tmp/hccl-compare.XXXXXX)}
mkdir -p "$RESULTS_DIR"
rm -f "$RESULTS_DIR"/*.why # a reused folder: no failure of an earlier run counts

LARGE_FLAGS=(-d "$DTYPE" -o sum -b 64M -e 64M -n "$ITERS_LARGE" -w 1 -c 1)
SMALL_FLAGS=(-d "$DTYPE" -o sum -b 4K -e 4K -n "$ITERS_SMALL" -w 20 -c 1)

die() { echo "compare.sh: $*" >&2; exit 1; }

case " int8 uint8 int16 uint16 int32 uint32 int64 uint64 half bfloat16 float double " in
*" $DTYPE "*) ;;
*) echo "compare.sh: DTYPE='$DTYPE' is not a type: expected one of int8 uint8 int16 uint16 int32 uint32 int64 uint64 half bfloat16 float double" >&2; exit 2 ;;
esac

[ -x "$BIN/allreduce_perf" ] || die "$BIN/allreduce_perf not found: build first (cmake --build $BUILD) or pass the build directory as the first argument"
HAVE_MPI=1
if [ ! -x "$BIN/mpi_allreduce_perf" ]; then
  echo "mpi: $BIN/mpi_allreduce_perf not built (CMake did not find MPI): MPI columns are n/a"
  HAVE_MPI=0
elif ! command -v mpirun >/dev/null; then
  echo "mpi: mpirun not in PATH: MPI columns are n/a"
  HAVE_MPI=0
fi
HAVE_GLOO=0
if "$PY" -c "import torch" 2>/dev/null; then
  HAVE_GLOO=1
else
  echo "gloo: python3-torch not installed"
fi
HAVE_THCCL=0
if [ $HAVE_GLOO = 1 ] && PYTHONPATH=$BUILD/python "$PY" -c "import torch_hccl" 2>/dev/null; then
  HAVE_THCCL=1
  export PYTHONPATH=$BUILD/python${PYTHONPATH:+:$PYTHONPATH}
else
  echo "torch_hccl: not built in $BUILD/python: torch-level hccl columns are n/a"
fi
if [ -x "$BIN/npu-launch" ]; then
  echo "launcher: $BIN/npu-launch"
else
  echo "launcher: $BIN/npu-launch not built; starting the ranks with a shell loop"
fi
echo "raw output: $RESULTS_DIR"

free_port() {
  "$PY" -c 'import socket; s=socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])' 2>/dev/null ||
    echo $((20000 + RANDOM % 20000))
}

# launch N prog args... : N ranks with the launcher variables set, rank 0's output on stdout.
launch() {
  local n=$1 port
  shift
  port=$(free_port)
  if [ -x "$BIN/npu-launch" ]; then
    timeout "$RUN_TIMEOUT" "$BIN/npu-launch" --device-list "0-$((n - 1))" --master-port "$port" -- "$@"
    return
  fi
  local pids=() rc=0 r
  for ((r = 0; r < n; r++)); do
    RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r LOCAL_WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 \
      MASTER_PORT=$port timeout "$RUN_TIMEOUT" "$@" &
    pids+=($!)
  done
  for r in "${pids[@]}"; do wait "$r" || rc=1; done
  return $rc
}

mpi_launch() {
  local n=$1
  shift
  timeout "$RUN_TIMEOUT" mpirun --allow-run-as-root --oversubscribe -np "$n" \
    --mca mpi_yield_when_idle 1 "$@"
}

# --- Anchors: installed and started by bench/anchors.sh (setup_X, X_launch, X_WHY).
# shellcheck source=bench/anchors.sh
. "$HERE/anchors.sh"

# field FILE COLUMN [ip]: the out-of-place (or, with ip, in-place) time (COLUMN=time) or busbw
# (COLUMN=busbw) of the DTYPE/sum line in FILE. Tolerates a per-rank prefix a launcher may add.
field() {
  awk -v col="$2" -v ip="${3:-}" -v dtype="$DTYPE" '{
      for (i = 3; i + 5 <= NF; i++)
        if ($i == dtype && $(i + 1) == "sum" && $(i + 2) == "-1") {
          o = (ip == "ip") ? 4 : 0
          print (col == "time" ? $(i + 3 + o) : $(i + 5 + o)); exit
        }
    }' "$1"
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "n/a" }'; }

# run NAME N SIZE launcher-fn prog... : round ROUND's run (of REPEATS; the caller runs the
# rounds), its output kept; in the last round prints the median "time busbw time_ip busbw_ip"
# over the rounds (out-of-place, then in-place), or n/a if any run failed (and then the reason
# in RESULTS_DIR/NAME.npN.SIZE.why, which cell prints; the later rounds skip it, so the last
# round reaches the medians only if every round passed its own check).
run() {
  local name=$1 n=$2 size=$3 how=$4
  shift 4
  local flags out rc why=$RESULTS_DIR/$name.np$n.$size.why
  if [ "$size" = 64M ]; then flags=("${LARGE_FLAGS[@]}"); else flags=("${SMALL_FLAGS[@]}"); fi
  if [ -e "$why" ]; then
    echo "n/a n/a n/a n/a"
    return
  fi
  out=$RESULTS_DIR/$name.np$n.$size.$ROUND.txt
  "$how" "$n" "$@" "${flags[@]}" >"$out" 2>&1
  rc=$?
  if [ $rc != 0 ] || ! grep -q "Out of bounds values : 0 OK" "$out"; then
    echo "compare.sh: $name with $n ranks at $size failed; see $out" >&2
    if [ $rc = 124 ]; then
      echo "timed out after RUN_TIMEOUT=${RUN_TIMEOUT}s" >"$why"
    elif grep -q "Out of bounds values : [1-9]" "$out"; then
      echo "wrong results: $(grep -m1 'Out of bounds' "$out" | tr -d '#')" >"$why"
    else
      { grep -m1 -E 'deepspeed-shm:|ccl_allreduce_perf:|CCL_ERROR' "$out" || first_error "$out"; } |
        tr '|' '/' | cut -c1-150 >"$why"
    fi
    echo "n/a n/a n/a n/a"
    return
  fi
  if [ "$ROUND" != "$REPEATS" ]; then
    echo "n/a n/a n/a n/a" # not the last round: no medians yet
    return
  fi
  local k col
  for col in "time" "busbw" "time ip" "busbw ip"; do
    for ((k = 1; k <= REPEATS; k++)); do field "$RESULTS_DIR/$name.np$n.$size.$k.txt" $col; done |
      median
  done | paste -sd' '
}

# ddp N BACKEND: median DDP step time in ms (torch_ddp_step.py), or n/a. Rank 0 prints it
# after the last step's allreduce, so a run that printed it and then failed ran every step: on
# torch 2.13 gloo's ranks sometimes abort while they exit, after destroy_process_group
# ("terminate called without an active exception", seen at 2 ranks on 2026-11-26, 1 run of 4);
# the time counts, and stderr says what happened.
ddp() {
  local n=$1 backend=$2 out=$RESULTS_DIR/ddp.$2.np$1.txt
  if launch "$n" "$PY" "$HERE/torch_ddp_step.py" --backend "$backend" >"$out" 2>&1; then
    awk '/^ddp step ms:/ { print $5; exit }' "$out"
  elif grep -q '^ddp step ms:' "$out"; then
    echo "compare.sh: DDP step on $backend with $n ranks: every step ran, then a rank failed on its way out ($(grep -m1 -E 'terminate called|failed first' "$out")); the time counts; see $out" >&2
    awk '/^ddp step ms:/ { print $5; exit }' "$out"
  else
    echo "compare.sh: DDP step on $backend with $n ranks failed; see $out" >&2
    echo n/a
  fi
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "n/a" }'; }

# cell VALUE NAME N SIZE [WHY]: VALUE, or, when it is n/a, "n/a: " and why (WHY, or the reason
# run left for NAME at N ranks and SIZE).
cell() {
  local why=${5:-}
  if [ "$1" != n/a ]; then
    echo "$1"
    return
  fi
  [ -n "$why" ] || why=$(cat "$RESULTS_DIR/$2.np$3.$4.why" 2>/dev/null)
  echo "n/a${why:+: $why}"
}

echo "anchors: $ANCHORS_DIR" >&2
setup_oneccl
setup_deepspeed
setup_mpich
for a in "oneCCL:$CCL_WHY" "DeepSpeed:$DS_WHY" "MPICH:$MPICH_WHY"; do
  [ -z "${a#*:}" ] || echo "${a%%:*}: ${a#*:}"
done

# The limits of this machine, measured in the same run: B, the bytes all cores copy per second
# together (bench/membw.c), bounds an allreduce's busbw at p ranks by B/p x 2(p-1)/p (every
# byte of every rank's input read and of its output written once); the floor of a 4 KiB
# exchange between two processes (bench/copy_floor.c) bounds a 2-rank 4 KiB allreduce, the
# copying one (malloc buffers) and the zero-copy one (HcclMemAlloc, -R 1): out of place,
# in place, and with inputs rewritten before every call (what a training step's gradients are).
MEMBW=n/a FLOOR_US=n/a ZFLOOR_US=n/a ZFLOOR_IP_US=n/a ZFLOOR_FRESH_US=n/a
if cc -O2 -pthread -o "$RESULTS_DIR/membw" "$HERE/membw.c" 2>"$RESULTS_DIR/membw.build.txt"; then
  MEMBW=$("$RESULTS_DIR/membw" | awk '{ print $1 }')
fi
if cc -O3 -march=native -o "$RESULTS_DIR/copy_floor" "$HERE/copy_floor.c" 2>"$RESULTS_DIR/copy_floor.build.txt"; then
  floors=$("$RESULTS_DIR/copy_floor" 4096)
  floor_of() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p" <<<"$floors"; }
  FLOOR_US=$(floor_of us) ZFLOOR_US=$(floor_of zcopy_us) ZFLOOR_IP_US=$(floor_of zcopy_inplace_us)
  ZFLOOR_FRESH_US=$(floor_of zcopy_fresh_us)
fi
echo "memory: B = $MEMBW GB/s (membw); a 4 KiB exchange between two processes: $FLOOR_US us, zero-copy $ZFLOOR_US us, in place $ZFLOOR_IP_US us, fresh inputs $ZFLOOR_FRESH_US us (copy_floor)" >&2
# limit N: B/N x 2(N-1)/N.
limit() { awk -v b="$MEMBW" -v n="$1" 'BEGIN { if (b + 0 > 0) printf "%.2f", b / n * 2 * (n - 1) / n; else print "n/a" }'; }
share() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.0f%%", 100 * a / b; else print "n/a" }'; }

start=$(date +%s)
rows=()
trows=()
arows_bw=()
arows_t=()
for n in $RANKS; do
  echo "running $n ranks ..." >&2
  h_bw=n/a hi_bw=n/a r_bw=n/a m_bw=n/a mi_bw=n/a g_bw=n/a t_bw=n/a
  c_bw=n/a s_bw=n/a x_bw=n/a
  m_t=n/a mi_t=n/a g_t=n/a t_t=n/a d_g=n/a d_h=n/a c_t=n/a s_t=n/a x_t=n/a r_t=n/a
  sizes="64M 4K"
  [ "$QUICK" = 1 ] && sizes=4K
  for ((ROUND = 1; ROUND <= REPEATS; ROUND++)); do
    for size in $sizes; do
      if [ $size = 64M ]; then
        read -r _ h_bw _ hi_bw <<<"$(run hccl "$n" 64M launch "$BIN/allreduce_perf")"
        read -r _ _ _ r_bw <<<"$(run hccl-R1 "$n" 64M launch "$BIN/allreduce_perf" -R 1)"
      else
        read -r h_t _ hi_t _ <<<"$(run hccl "$n" 4K launch "$BIN/allreduce_perf")"
        read -r _ _ r_t _ <<<"$(run hccl-R1 "$n" 4K launch "$BIN/allreduce_perf" -R 1)"
      fi
    done
    if [ $HAVE_MPI = 1 ]; then
      [ "$QUICK" = 1 ] || read -r _ m_bw _ mi_bw <<<"$(run mpi "$n" 64M mpi_launch "$BIN/mpi_allreduce_perf")"
      read -r m_t _ mi_t _ <<<"$(run mpi "$n" 4K mpi_launch "$BIN/mpi_allreduce_perf")"
    fi
    if [ $HAVE_GLOO = 1 ]; then
      [ "$QUICK" = 1 ] || read -r _ _ _ g_bw <<<"$(run gloo "$n" 64M launch "$PY" "$HERE/torch_allreduce_perf.py" --backend gloo)"
      read -r _ _ g_t _ <<<"$(run gloo "$n" 4K launch "$PY" "$HERE/torch_allreduce_perf.py" --backend gloo)"
      [ "$QUICK" = 1 ] || [ "$ROUND" != "$REPEATS" ] || d_g=$(ddp "$n" gloo)
    fi
    if [ $HAVE_THCCL = 1 ] && [ "$QUICK" != 1 ]; then
      read -r _ _ _ t_bw <<<"$(run torch-hccl "$n" 64M launch "$PY" "$HERE/torch_allreduce_perf.py" --backend hccl)"
      read -r _ _ t_t _ <<<"$(run torch-hccl "$n" 4K launch "$PY" "$HERE/torch_allreduce_perf.py" --backend hccl)"
      [ "$ROUND" != "$REPEATS" ] || d_h=$(ddp "$n" hccl)
    fi
    if [ -z "$CCL_WHY" ]; then
      [ "$QUICK" = 1 ] || read -r _ _ _ c_bw <<<"$(run oneccl "$n" 64M ccl_launch "$BIN/ccl_allreduce_perf")"
      read -r _ _ c_t _ <<<"$(run oneccl "$n" 4K ccl_launch "$BIN/ccl_allreduce_perf")"
    fi
    if [ -z "$DS_WHY" ]; then
      [ "$QUICK" = 1 ] || read -r _ _ _ s_bw <<<"$(run deepspeed "$n" 64M ds_launch "$HERE/torch_allreduce_perf.py" --backend deepspeed-shm)"
      read -r _ _ s_t _ <<<"$(run deepspeed "$n" 4K ds_launch "$HERE/torch_allreduce_perf.py" --backend deepspeed-shm)"
    fi
    if [ -z "$MPICH_WHY" ]; then
      [ "$QUICK" = 1 ] || read -r _ _ _ x_bw <<<"$(run mpich "$n" 64M mpich_launch "$BIN/mpich_allreduce_perf")"
      read -r _ _ x_t _ <<<"$(run mpich "$n" 4K mpich_launch "$BIN/mpich_allreduce_perf")"
    fi
  done # rounds
  rows+=("| $n | $h_bw | $m_bw | $(ratio "$h_bw" "$m_bw") | $h_t | $m_t | $(ratio "$h_t" "$m_t") |")
  trows+=("| $n | $hi_bw | $t_bw | $(ratio "$t_bw" "$hi_bw") | $g_bw | $(ratio "$t_bw" "$g_bw") | $hi_t | $t_t | $(ratio "$t_t" "$hi_t") | $g_t | $d_g | $d_h | $(ratio "$d_h" "$d_g") |")
  mpi_why=
  [ $HAVE_MPI = 1 ] || mpi_why="mpi_allreduce_perf or mpirun missing"
  gloo_why=
  [ $HAVE_GLOO = 1 ] || gloo_why="python3-torch not installed"
  if [ "$QUICK" != 1 ]; then
    IFS='|' read -r bn bv <<<"$(best more "Open MPI=$mi_bw" "MPICH=$x_bw" "oneCCL=$c_bw" "DeepSpeed shm=$s_bw" "gloo=$g_bw" )"
    arows_bw+=("| $n | $(cell "$hi_bw" hccl "$n" 64M) | $(cell "$mi_bw" mpi "$n" 64M "$mpi_why") | $(cell "$x_bw" mpich "$n" 64M "$MPICH_WHY") | $(cell "$c_bw" oneccl "$n" 64M "$CCL_WHY") | $(cell "$s_bw" deepspeed "$n" 64M "$DS_WHY") | $(cell "$g_bw" gloo "$n" 64M "$gloo_why") | $bn | $(ratio "$hi_bw" "$bv") | $(cell "$r_bw" hccl-R1 "$n" 64M) | $(limit "$n") | $(share "$hi_bw" "$(limit "$n")") | $(share "$r_bw" "$(limit "$n")") |")
  fi
  IFS='|' read -r bn bv <<<"$(best less "Open MPI=$mi_t" "MPICH=$x_t" "oneCCL=$c_t" "DeepSpeed shm=$s_t" "gloo=$g_t" )"
  arows_t+=("| $n | $(cell "$hi_t" hccl "$n" 4K) | $(cell "$mi_t" mpi "$n" 4K "$mpi_why") | $(cell "$x_t" mpich "$n" 4K "$MPICH_WHY") | $(cell "$c_t" oneccl "$n" 4K "$CCL_WHY") | $(cell "$s_t" deepspeed "$n" 4K "$DS_WHY") | $(cell "$g_t" gloo "$n" 4K "$gloo_why") | $bn | $(ratio "$hi_t" "$bv") | $(cell "$r_t" hccl-R1 "$n" 4K) | $(ratio "$r_t" "$bv") |")
done

echo
echo "allreduce, $DTYPE sum; busbw in GB/s, time in us; $(nproc) cores; $(date -u +%Y-%m-%dT%H:%MZ)"
[ "$QUICK" = 1 ] && echo "QUICK=1: a functional check at 4 KiB, -n $ITERS_SMALL, $REPEATS run(s): not a measurement"
if [ "$QUICK" != 1 ]; then
  echo
  echo "libhccl (allreduce_perf) against MPI, out-of-place:"
  echo
  echo "| ranks | hccl busbw@64MiB | mpi busbw@64MiB | ratio | hccl time@4KiB | mpi time@4KiB | ratio |"
  echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
  printf '%s\n' "${rows[@]}"
  echo
  echo "ratio = hccl / mpi: above 1 is better for hccl in the busbw column, below 1 is better"
  echo "for hccl in the time column."
  if [ $HAVE_GLOO = 1 ]; then
    echo
    echo "Through torch.distributed, in-place (torch-hccl = torch_hccl over libhccl); DDP step in ms:"
    echo
    echo "| ranks | allreduce_perf busbw@64MiB | torch-hccl | ratio | gloo | hccl/gloo | allreduce_perf time@4KiB | torch-hccl | ratio | gloo | DDP step gloo | DDP step hccl | hccl/gloo |"
    echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    printf '%s\n' "${trows[@]}"
    echo
    echo "busbw ratios above 1 favour the first named; time ratios below 1 favour the first named."
  fi
fi
echo
echo "libhccl (allreduce_perf) against the anchors a CPU user would choose, in-place (each"
echo "library's own in-place call; bench/README.md, \"Anchors\"):"
if [ "$QUICK" != 1 ]; then
  echo
  echo "| ranks | hccl busbw@64MiB | Open MPI | MPICH | oneCCL | DeepSpeed shm | gloo | best anchor | hccl/best | hccl -R 1 | memory limit | hccl share | -R 1 share |"
  echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | :--- | ---: | ---: | ---: | ---: | ---: |"
  printf '%s\n' "${arows_bw[@]}"
  echo
  echo "-R 1: allreduce_perf's buffers from HcclMemAlloc (the zero-copy path). memory limit:"
  echo "B/p x 2(p-1)/p with B = $MEMBW GB/s, all cores copying together (bench/membw.c)."
fi
echo
echo "| ranks | hccl time@4KiB | Open MPI | MPICH | oneCCL | DeepSpeed shm | gloo | best anchor | hccl/best | hccl -R 1 | -R 1/best |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | :--- | ---: | ---: | ---: |"
printf '%s\n' "${arows_t[@]}"
echo
echo "-R 1 at 4 KiB: zero-copy where the server has a core for each rank, else as hccl (docs/design.md)."
echo
echo "hccl/best: above 1 is better for hccl in the busbw table, below 1 in the time table."
echo "The floor of a 4 KiB exchange between two processes (bench/copy_floor.c): $FLOOR_US us"
echo "copying (copy into the other's slot, flag, add the other's slot), $ZFLOOR_US us zero-copy (flag,"
echo "add one's half of both inputs into both outputs, flag), $ZFLOOR_IP_US us the same in place, and"
echo "$ZFLOOR_FRESH_US us out of place with each input rewritten before every call, as a training step's are."
if [ "$QUICK" != 1 ]; then
  echo "64 MiB: -n $ITERS_LARGE -w 1; 4 KiB: -n $ITERS_SMALL -w 20; median of $REPEATS runs each;"
  echo "DDP: median of 20 steps after 3 (bench/torch_ddp_step.py). Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
else
  echo "4 KiB: -n $ITERS_SMALL -w 20; $REPEATS run(s). Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
fi
[ $HAVE_GLOO = 1 ] || echo "gloo: python3-torch not installed"
echo "took $(($(date +%s) - start)) s; raw output in $RESULTS_DIR"
