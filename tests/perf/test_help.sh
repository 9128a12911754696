#!/usr/bin/env bash
# test_help.sh - every program and script a user runs answers -h and --help: exit 0, the usage
# on stdout (it says "usage"), nothing on stderr; and an unknown flag (--no-such-flag) is
# refused: a non-zero exit and a message on stderr that names the flag.
#
# usage: bash tests/perf/test_help.sh BUILD_DIR
#
# The programs are found, not listed: every file in BUILD_DIR/bin, and every *.sh and *.py in
# bench/, scripts/ and examples/; a new one without --help fails here. Shell scripts run with
# the shell of their first line, Python ones with the Python torch_hccl was built for
# (BUILD_DIR/python/INTERPRETER, else python3) and the build's torch_hccl on PYTHONPATH. Each
# Python script reads its flags before it imports torch (a second or more of CPU), so none needs
# torch to answer: none is skipped where that Python has no torch, and one that imports torch
# first fails there. Two programs are checked at a time (ctest runs one test at a time on 2
# cores); their lines print in order.
# Then the usage is held against the docs' flag tables: every flag of docs/perf_programs.md
# in allreduce_perf --help, every option of docs/launching.md in npu-launch --help.
set -u
build=$(cd "${1:?usage: test_help.sh BUILD_DIR}" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
py=$(cat "$build/python/INTERPRETER" 2>/dev/null || command -v python3)
export PYTHONPATH=$build/python${PYTHONPATH:+:$PYTHONPATH}
tmp=$(mktemp -d /tmp/hccl-help.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# Unknown flags these report otherwise, and why (the exit must still be non-zero):
#   argparse checks the required positional arguments before it looks at unknown flags, so a
#   lone --no-such-flag gets "the following arguments are required" (with a usage line).
names_flag_exempt=" trace.py ddp_timeline.py scale_plot.py "

fails=0 checked=0
fail() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}

# run FILE ARG: runs FILE the way a user would, stdout to $out, stderr to $err (the calling
# check's own files); the exit code in $rc. 60 s: a program that ignores the flag and starts
# work is cut off (and fails).
run() {
  local f=$1
  shift
  case $f in
  *.py) set -- "$py" "$f" "$@" ;;
  *.sh) if head -1 "$f" | grep -q bash; then set -- bash "$f" "$@"; else set -- sh "$f" "$@"; fi ;;
  *) set -- "$f" "$@" ;;
  esac
  timeout -k 5 60 "$@" >"$out" 2>"$err" </dev/null
  rc=$?
}

# check FILE NAME: the three runs of one program; prints a "FAIL:" line for each failure. The
# checks run JOBS at a time (each in its own files): about 170 short runs, a third of them
# Python starts, one core each, and ctest runs one test at a time.
check() {
  local f=$1 name=$2 out=$tmp/$3.out err=$tmp/$3.err base flag
  for flag in -h --help; do
    run "$f" "$flag"
    if [ $rc != 0 ]; then
      echo "FAIL: $name $flag: exit $rc, expected 0; stderr: $(head -c 300 "$err")"
    elif ! grep -qi usage "$out"; then
      echo "FAIL: $name $flag: no usage on stdout ($(wc -c <"$out") bytes)"
    elif [ -s "$err" ]; then
      echo "FAIL: $name $flag: wrote to stderr: $(head -c 300 "$err")"
    fi
  done
  run "$f" --no-such-flag
  base=$(basename "$f")
  if [ $rc = 0 ] || [ $rc = 124 ] || [ $rc = 137 ]; then
    echo "FAIL: $name --no-such-flag: exit $rc, expected a refusal (non-zero, not a timeout)"
  elif [ ! -s "$err" ]; then
    echo "FAIL: $name --no-such-flag: exit $rc but nothing on stderr"
  elif ! grep -q -- "--no-such-flag" "$err" && [[ $names_flag_exempt != *" $base "* ]]; then
    echo "FAIL: $name --no-such-flag: the message does not name the flag: $(head -c 300 "$err")"
  fi
}
JOBS=2
n=0
for f in "$build"/bin/* "$src"/bench/*.sh "$src"/bench/*.py "$src"/scripts/*.sh \
  "$src"/scripts/*.py "$src"/examples/*.py; do
  [ -f "$f" ] || continue
  name=${f#"$src"/}
  name=${name#"$build"/}
  checked=$((checked + 1))
  n=$((n + 1))
  while [ "$(jobs -rp | wc -l)" -ge $JOBS ]; do wait -n; done
  check "$f" "$name" $n >"$tmp/$n.result" &
done
wait
for i in $(seq 1 $n); do
  [ -s "$tmp/$i.result" ] || continue
  cat "$tmp/$i.result"
  fails=$((fails + $(grep -c '^FAIL: ' "$tmp/$i.result")))
done

# The usage against the docs: each flag in the first column of the docs' flag tables.
doc_flags() { # FILE HEADING: the flags (-x, --xyz) in the first column of the table below HEADING
  awk -F'|' -v h="$2" '$0 == h {on = 1; next} on && /^## / {exit} on && /^\| `-/ {print $2}' "$1" |
    grep -o -- '`--*[A-Za-z][A-Za-z-]*' | tr -d '`' | sort -u
}
check_doc() { # PROGRAM DOC HEADING
  local prog=$1 doc=$2 n=0
  "$build/bin/$prog" --help >"$tmp/usage" 2>&1
  for flag in $(doc_flags "$src/$doc" "$3"); do
    n=$((n + 1))
    grep -q -- "$flag\b" "$tmp/usage" || fail "$doc lists $flag, $prog --help does not"
  done
  [ $n -gt 3 ] || fail "found only $n flags under '$3' in $doc: did its table move?"
}
check_doc allreduce_perf docs/perf_programs.md "## Flags"
check_doc npu-launch docs/launching.md "## Options"

echo "$checked programs and scripts checked, $fails failures"
[ $fails = 0 ]
