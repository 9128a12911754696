#!/usr/bin/env bash
# ddp_overlap.sh - ddp_train's step time with and without overlap at 2, 4 and 8 devices, and the
# share of communication hidden behind backward: the numbers in docs/ddp.md.
# usage: bash bench/ddp_overlap.sh [build-dir] [repeats]
# Each run is `ddp_train --steps 40 --global-batch 64` under npu-launch, wrapped in
# flock /tmp/bench.lock so no other benchmark on the machine runs at the same time; the table
# gives the median of `repeats` runs (3) of each configuration. Times are ddp_train's own means
# over steps 1..39 and over ranks (docs/ddp.md says how communication and its hidden part are
# measured).
set -euo pipefail
case "${1:-}" in
-h | --help) awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
-*) echo "ddp_overlap.sh: unknown option '$1'; see bash bench/ddp_overlap.sh --help" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
build=${1:-build}
repeats=${2:-3}
launch=("$build/bin/npu-launch")
train="$build/bin/ddp_train"
[ -x "$train" ] || { echo "no $train: build first" >&2; exit 2; }

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

run() { # ranks, extra args -> "step_ms backward_ms comm_ms exposed_ms hidden_pct final first"
  local n=$1
  shift
  local port=$((29700 + RANDOM % 2000))
  flock /tmp/bench.lock "${launch[@]}" --nproc-per-node "$n" --master-port "$port" -- \
    "$train" --steps 40 --global-batch 64 "$@" 2>/dev/null |
    awk '/^step 0 loss/ {first=$4} /^final loss/ {fin=$3}
         /^step time/ {st=$3; bw=$6; cm=$9; ex=$14}
         /of communication hidden/ {h=$1; sub("%","",h)}
         END {print st, bw, cm, ex, h, fin, first}'
}

col() { # column k of the rows on stdin -> median
  awk -v k="$1" '{print $k}' | median
}

printf "| ranks | step, overlap (ms) | step, no overlap (ms) | backward, overlap / no overlap (ms) | communication, overlap / no overlap (ms) | exposed, overlap (ms) | hidden | final loss | step 0 loss |\n"
printf "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
for n in 1 2 4 8; do
  ov="" nov=""
  for ((k = 0; k < repeats; k++)); do
    ov+="$(run "$n")"$'\n'
    nov+="$(run "$n" --no-overlap)"$'\n'
  done
  ov=$(printf "%s" "$ov" | sed '/^$/d')
  nov=$(printf "%s" "$nov" | sed '/^$/d')
  printf "| %d | %s | %s | %s / %s | %s / %s | %s | %s%% | %s | %s |\n" "$n" \
    "$(col 1 <<<"$ov")" "$(col 1 <<<"$nov")" "$(col 2 <<<"$ov")" "$(col 2 <<<"$nov")" \
    "$(col 3 <<<"$ov")" "$(col 3 <<<"$nov")" "$(col 4 <<<"$ov")" "$(col 5 <<<"$ov")" \
    "$(col 6 <<<"$ov" | tail -1)" "$(col 7 <<<"$ov" | tail -1)"
done
