#!/usr/bin/env bash
# scale.sh - a job across S pretend servers (network namespaces, tests/multi/netns.sh), one
# npu-launch per server, and what it costs as S grows: for each S and devices per server D, the
# job's wall time, and over its ranks the largest init time, first-call time (a 4 KiB int32
# allreduce), sockets held and resident size (bench/scale_probe.c); from the logs
# (HCCL_LOG_LEVEL=INFO), the bytes rank 0's bootstrap store served (in all, and per rank: a
# flat line, the store serves O(n)) and where rank 0's init went: the "info" round (the store
# introduces the ranks' tree of sockets; the records go over it), placement and transport
# setup with "conn", the links, and "ready" (ms).
#
# usage: [NETNS_PREFIX=name] bash bench/scale.sh [build] ["4 8 16 32 64 128"] ["1 2"] [max ranks=128]
#
# NETNS_PREFIX names the namespaces (<prefix>_<k>; default hcs<pid>); more than 250 servers take
# a /16 (tests/multi/netns.sh). Needs root (namespaces). Prints one table row per (S, D); a
# failed or wrong job prints FAIL.
# At the end bench/scale_plot.py draws the table (scale.svg beside the outputs) and prints how
# init time grows with n (its log-log slope, and init / (n log2 n)).
set -u
case "${1:-}" in
-h | --help) awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
-*) echo "scale.sh: unknown option '$1'; see bash bench/scale.sh --help" >&2; exit 2 ;;
esac
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:-build}" && pwd)
SERVERS=${2:-4 8 16 32 64 128}
DEVS=${3:-1 2}
MAX_RANKS=${4:-128}
. "$HERE/../tests/multi/netns.sh"
OUT=$(mktemp -d /tmp/scale.XXXXXX)
port=$(netns_port)

printf '%-8s %-4s %-6s %9s %9s %13s %8s %8s %9s %11s %9s %8s %8s %8s %8s\n' servers D ranks wall_s \
  init_ms first_call_ms sockets others rss_kib store_bytes B_per_rk info_ms conn_ms links_ms \
  ready_ms
for S in $SERVERS; do
  for D in $DEVS; do
    [ $((S * D)) -le "$MAX_RANKS" ] || continue
    netns_up "$S" || exit $?
    devs=$(seq -s, 0 $((D - 1)))
    port=$((port + 1))
    t0=$(date +%s.%N)
    pids=()
    for ((k = 0; k < S; k++)); do
      netns_exec "$k" env HCCL_CONNECT_TIMEOUT=300 OMP_NUM_THREADS=1 HCCL_LOG_LEVEL=INFO \
        timeout -k 5 600 \
        "$BUILD/bin/npu-launch" --nnodes "$S" --node-rank "$k" --master-addr "$(netns_addr 0)" \
        --master-port "$port" --device-list "$devs" -- "$BUILD/bin/scale_probe" \
        >"$OUT/S$S.D$D.$k" 2>&1 &
      pids+=($!)
    done
    bad=0
    for p in "${pids[@]}"; do wait "$p" || bad=$((bad + 1)); done
    wall=$(echo "$(date +%s.%N) - $t0" | bc)
    line=$(grep -h "^scale_probe:" "$OUT/S$S.D$D.0")
    if [ $bad = 0 ] && [[ $line == *" ok" ]]; then
      read -r _ _ n _ init _ first _ socks _ rss _ others _ <<<"$line"
      served=$(sed -n 's/.* served \([0-9]*\) bytes in .*/\1/p' "$OUT/S$S.D$D.0" | head -1)
      read -r ph_info ph_conn ph_links ph_ready < <(sed -n 's/^hccl rank 0 .*bootstrap phases ms: info \([0-9.]*\) conn \([0-9.]*\) links \([0-9.]*\) ready \([0-9.]*\).*/\1 \2 \3 \4/p' "$OUT/S$S.D$D.0")
      printf '%-8s %-4s %-6s %9.2f %9s %13s %8s %8s %9s %11s %9s %8s %8s %8s %8s\n' "$S" "$D" "$n" \
        "$wall" "$init" "$first" "$socks" "$others" "$rss" "${served:-?}" \
        "$(( ${served:-0} / n ))" "${ph_info:-?}" "${ph_conn:-?}" "${ph_links:-?}" "${ph_ready:-?}" |
        tee -a "$OUT/table.txt"
    else
      printf '%-8s %-4s %-6s FAIL (%d launchers failed; see %s)\n' "$S" "$D" $((S * D)) "$bad" "$OUT"
    fi
    netns_down
  done
done
echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg); outputs in $OUT"
python3 "$HERE/scale_plot.py" "$OUT/table.txt" "$OUT/scale.svg"
