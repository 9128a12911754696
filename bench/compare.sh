#!/usr/bin/env bash
# compare.sh - libhccl's allreduce against MPI, and (when torch is installed) libhccl through
# torch.distributed (torch_hccl) against torch's gloo, on this machine, for 2, 4 and 8 ranks,
# and markdown tables of the result.
#
# usage: bench/compare.sh [build-dir]   (default ./build; builds nothing)
#
# For each N it runs, float sum only:
#   allreduce_perf      under <build>/bin/npu-launch --device-list 0-(N-1) --master-port P,
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
# The torch table compares in-place columns (torch's allreduce is in place; its out-of-place
# twin adds a copy) with allreduce_perf's in-place columns.
# Each program runs at 64 MiB with few iterations (bandwidth) and at 4 KiB with many
# (latency); one sweep with a single -n would either take minutes at 64 MiB or be noise at
# 4 KiB. Each of those runs is repeated REPEATS times and the table shows the median, so one
# burst of load from something else on the machine does not decide a column. Numbers are
# from the out-of-place columns, time combined across ranks as the average (-a 1, the
# default). Every run checks its results (-c 1): a wrong element makes the cell n/a.
#
# Settings (environment): ITERS_LARGE (default 5) and ITERS_SMALL (default 500) timed
# iterations, REPEATS (default 3), RUN_TIMEOUT (default 120) seconds per run, RESULTS_DIR
# (default a new /tmp/hccl-compare.XXXXXX) where every run's full output is kept.
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
ITERS_LARGE=${ITERS_LARGE:-5}
ITERS_SMALL=${ITERS_SMALL:-500}
REPEATS=${REPEATS:-3}
RUN_TIMEOUT=${RUN_TIMEOUT:-120}
RESULTS_DIR=${RESULTS_DIR:-$(mktemp -d /tmp/hccl-compare.XXXXXX)}
mkdir -p "$RESULTS_DIR"

LARGE_FLAGS=(-d float -o sum -b 64M -e 64M -n "$ITERS_LARGE" -w 1 -c 1)
SMALL_FLAGS=(-d float -o sum -b 4K -e 4K -n "$ITERS_SMALL" -w 20 -c 1)

die() { echo "compare.sh: $*" >&2; exit 1; }

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
  "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
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

# field FILE COLUMN [ip]: the out-of-place (or, with ip, in-place) time (COLUMN=time) or busbw
# (COLUMN=busbw) of the float/sum line in FILE. Tolerates a per-rank prefix a launcher may add.
field() {
  awk -v col="$2" -v ip="${3:-}" '{
      for (i = 3; i + 5 <= NF; i++)
        if ($i == "float" && $(i + 1) == "sum" && $(i + 2) == "-1") {
          o = (ip == "ip") ? 4 : 0
          print (col == "time" ? $(i + 3 + o) : $(i + 5 + o)); exit
        }
    }' "$1"
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "n/a" }'; }

# run NAME N SIZE launcher-fn prog... : runs REPEATS times, keeps every output, prints the
# median "time busbw time_ip busbw_ip" (out-of-place, then in-place), or n/a if any run failed.
run() {
  local name=$1 n=$2 size=$3 how=$4
  shift 4
  local flags out k times=() bws=() times_ip=() bws_ip=()
  if [ "$size" = 64M ]; then flags=("${LARGE_FLAGS[@]}"); else flags=("${SMALL_FLAGS[@]}"); fi
  for ((k = 1; k <= REPEATS; k++)); do
    out=$RESULTS_DIR/$name.np$n.$size.$k.txt
    if ! "$how" "$n" "$@" "${flags[@]}" >"$out" 2>&1 || ! grep -q "Out of bounds values : 0 OK" "$out"; then
      echo "compare.sh: $name with $n ranks at $size failed; see $out" >&2
      echo "n/a n/a n/a n/a"
      return
    fi
    times+=("$(field "$out" time)")
    bws+=("$(field "$out" busbw)")
    times_ip+=("$(field "$out" time ip)")
    bws_ip+=("$(field "$out" busbw ip)")
  done
  echo "$(printf '%s\n' "${times[@]}" | median) $(printf '%s\n' "${bws[@]}" | median)" \
    "$(printf '%s\n' "${times_ip[@]}" | median) $(printf '%s\n' "${bws_ip[@]}" | median)"
}

# ddp N BACKEND: median DDP step time in ms (torch_ddp_step.py), or n/a.
ddp() {
  local n=$1 backend=$2 out=$RESULTS_DIR/ddp.$2.np$1.txt
  if launch "$n" "$PY" "$HERE/torch_ddp_step.py" --backend "$backend" >"$out" 2>&1; then
    awk '/^ddp step ms:/ { print $5; exit }' "$out"
  else
    echo "compare.sh: DDP step on $backend with $n ranks failed; see $out" >&2
    echo n/a
  fi
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "n/a" }'; }

start=$(date +%s)
rows=()
trows=()
for n in 2 4 8; do
  echo "running $n ranks ..." >&2
  read -r _ h_bw _ hi_bw <<<"$(run hccl "$n" 64M launch "$BIN/allreduce_perf")"
  read -r h_t _ hi_t _ <<<"$(run hccl "$n" 4K launch "$BIN/allreduce_perf")"
  m_bw=n/a m_t=n/a g_bw=n/a g_t=n/a t_bw=n/a t_t=n/a d_g=n/a d_h=n/a
  if [ $HAVE_MPI = 1 ]; then
    read -r _ m_bw _ _ <<<"$(run mpi "$n" 64M mpi_launch "$BIN/mpi_allreduce_perf")"
    read -r m_t _ _ _ <<<"$(run mpi "$n" 4K mpi_launch "$BIN/mpi_allreduce_perf")"
  fi
  if [ $HAVE_GLOO = 1 ]; then
    read -r _ _ _ g_bw <<<"$(run gloo "$n" 64M launch "$PY" "$HERE/torch_allreduce_perf.py" --backend gloo)"
    read -r _ _ g_t _ <<<"$(run gloo "$n" 4K launch "$PY" "$HERE/torch_allreduce_perf.py" --backend gloo)"
    d_g=$(ddp "$n" gloo)
  fi
  if [ $HAVE_THCCL = 1 ]; then
    read -r _ _ _ t_bw <<<"$(run torch-hccl "$n" 64M launch "$PY" "$HERE/torch_allreduce_perf.py" --backend hccl)"
    read -r _ _ t_t _ <<<"$(run torch-hccl "$n" 4K launch "$PY" "$HERE/torch_allreduce_perf.py" --backend hccl)"
    d_h=$(ddp "$n" hccl)
  fi
  rows+=("| $n | $h_bw | $m_bw | $(ratio "$h_bw" "$m_bw") | $h_t | $m_t | $(ratio "$h_t" "$m_t") |")
  trows+=("| $n | $hi_bw | $t_bw | $(ratio "$t_bw" "$hi_bw") | $g_bw | $(ratio "$t_bw" "$g_bw") | $hi_t | $t_t | $(ratio "$t_t" "$hi_t") | $g_t | $d_g | $d_h | $(ratio "$d_h" "$d_g") |")
done

echo
echo "allreduce, float sum; busbw in GB/s, time in us; $(nproc) cores; $(date -u +%Y-%m-%dT%H:%MZ)"
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
echo "64 MiB: -n $ITERS_LARGE -w 1; 4 KiB: -n $ITERS_SMALL -w 20; median of $REPEATS runs each;"
echo "DDP: median of 20 steps after 3 (bench/torch_ddp_step.py). Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
[ $HAVE_GLOO = 1 ] || echo "gloo: python3-torch not installed"
echo "took $(($(date +%s) - start)) s; raw output in $RESULTS_DIR"
