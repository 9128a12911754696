#!/usr/bin/env bash
# compare.sh - libhccl's allreduce against MPI (and gloo, when torch is installed) on this
# machine, for 2, 4 and 8 ranks, and a markdown table of the result.
#
#   bench/compare.sh [build-dir]        (default ./build; builds nothing)
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
#   gloo_allreduce_perf.py (torch.distributed, gloo backend) the same way as allreduce_perf,
#                       when /usr/bin/python3 can import torch.
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

BUILD=${1:-./build}
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
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  HAVE_GLOO=1
else
  echo "gloo: python3-torch not installed"
fi
if [ -x "$BIN/npu-launch" ]; then
  echo "launcher: $BIN/npu-launch"
else
  echo "launcher: $BIN/npu-launch not built; starting the ranks with a shell loop"
fi
echo "raw output: $RESULTS_DIR"

free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
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

# field FILE COLUMN: the out-of-place time (COLUMN=time) or busbw (COLUMN=busbw) of the
# float/sum line in FILE. Tolerates a per-rank prefix a launcher may add to each line.
field() {
  awk -v col="$2" '{
      for (i = 3; i + 5 <= NF; i++)
        if ($i == "float" && $(i + 1) == "sum" && $(i + 2) == "-1") {
          print (col == "time" ? $(i + 3) : $(i + 5)); exit
        }
    }' "$1"
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "n/a" }'; }

# run NAME N SIZE launcher-fn prog... : runs REPEATS times, keeps every output, prints the
# median "time busbw", or "n/a n/a" if any run failed.
run() {
  local name=$1 n=$2 size=$3 how=$4
  shift 4
  local flags out k times=() bws=()
  if [ "$size" = 64M ]; then flags=("${LARGE_FLAGS[@]}"); else flags=("${SMALL_FLAGS[@]}"); fi
  for ((k = 1; k <= REPEATS; k++)); do
    out=$RESULTS_DIR/$name.np$n.$size.$k.txt
    if ! "$how" "$n" "$@" "${flags[@]}" >"$out" 2>&1 || ! grep -q "Out of bounds values : 0 OK" "$out"; then
      echo "compare.sh: $name with $n ranks at $size failed; see $out" >&2
      echo "n/a n/a"
      return
    fi
    times+=("$(field "$out" time)")
    bws+=("$(field "$out" busbw)")
  done
  echo "$(printf '%s\n' "${times[@]}" | median) $(printf '%s\n' "${bws[@]}" | median)"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "n/a" }'; }

start=$(date +%s)
rows=()
for n in 2 4 8; do
  echo "running $n ranks ..." >&2
  read -r _ h_bw <<<"$(run hccl "$n" 64M launch "$BIN/allreduce_perf")"
  read -r h_t _ <<<"$(run hccl "$n" 4K launch "$BIN/allreduce_perf")"
  m_bw=n/a m_t=n/a g_bw=n/a g_t=n/a
  if [ $HAVE_MPI = 1 ]; then
    read -r _ m_bw <<<"$(run mpi "$n" 64M mpi_launch "$BIN/mpi_allreduce_perf")"
    read -r m_t _ <<<"$(run mpi "$n" 4K mpi_launch "$BIN/mpi_allreduce_perf")"
  fi
  if [ $HAVE_GLOO = 1 ]; then
    read -r _ g_bw <<<"$(run gloo "$n" 64M launch /usr/bin/python3 "$HERE/gloo_allreduce_perf.py")"
    read -r g_t _ <<<"$(run gloo "$n" 4K launch /usr/bin/python3 "$HERE/gloo_allreduce_perf.py")"
  fi
  row="| $n | $h_bw | $m_bw | $(ratio "$h_bw" "$m_bw") | $h_t | $m_t | $(ratio "$h_t" "$m_t") |"
  [ $HAVE_GLOO = 1 ] && row="$row $g_bw | $g_t |"
  rows+=("$row")
done

echo
echo "allreduce, float sum, out-of-place; busbw in GB/s, time in us; $(nproc) cores; $(date -u +%Y-%m-%dT%H:%MZ)"
echo
if [ $HAVE_GLOO = 1 ]; then
  echo "| ranks | hccl busbw@64MiB | mpi busbw@64MiB | ratio | hccl time@4KiB | mpi time@4KiB | ratio | gloo busbw@64MiB | gloo time@4KiB |"
  echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
else
  echo "| ranks | hccl busbw@64MiB | mpi busbw@64MiB | ratio | hccl time@4KiB | mpi time@4KiB | ratio |"
  echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
fi
printf '%s\n' "${rows[@]}"
echo
echo "ratio = hccl / mpi: above 1 is better for hccl in the busbw column, below 1 is better"
echo "for hccl in the time column. 64 MiB: -n $ITERS_LARGE -w 1; 4 KiB: -n $ITERS_SMALL -w 20;"
echo "median of $REPEATS runs each. Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
[ $HAVE_GLOO = 1 ] || echo "gloo: python3-torch not installed"
echo "took $(($(date +%s) - start)) s; raw output in $RESULTS_DIR"
