#!/usr/bin/env bash
# test_perf_flags.sh - the benchmark programs' flags are perf/perf_flags.h's, in every program:
# the libhccl programs and their MPI twins (perf/perf_args.c compiles the table in), the oneCCL
# twin (the same driver; when built) and bench/torch_allreduce_perf.py (reads the table's text
# through perf/perf_flags.py). A flag written into one program's code and not into the table,
# or a row of the table that a program named in its PERF_BY_* column does not take, fails here.
#
# usage: bash tests/perf/test_perf_flags.sh BUILD_DIR
#
# Each program is asked about every letter a-z, A-Z, as a user would: "-L VALUE -h" exits 0
# (VALUE: the flag's default, else the least its kind takes) for a letter of its rows, and
# "-L 1 -h" exits 2 with "unknown flag -L" on stderr for any other (-h after: a program that
# took a letter it should not ends at the usage, not in a benchmark). allreduce_perf,
# mpi_allreduce_perf (when MPI was found), ccl_allreduce_perf (BUILD_DIR/bin, or
# $CCL_ALLREDUCE_PERF; bench/compare.sh builds it) and torch_allreduce_perf.py (no torch
# needed: it reads its flags before importing torch) are asked all 52; the other *_perf
# programs of BUILD_DIR/bin only show their usage. The usage's flag lines of each must be its
# rows' left columns (perf_flags.py PROGRAM), no more, no fewer; and docs/perf_programs.md's
# "## Flags" table must name every flag of the libhccl programs (tests/perf/test_help.sh holds
# the other direction).
set -u
build=$(cd "${1:?usage: test_perf_flags.sh BUILD_DIR}" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
py=$(command -v python3)
tmp=$(mktemp -d /tmp/hccl-perf-flags.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fails=0 checked=0
fail() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}

# table PROGRAM: "letter kind value shown" lines, one per flag the table gives PROGRAM.
table() {
  "$py" "$src/perf/perf_flags.py" "$1" ||
    fail "perf/perf_flags.py $1 could not read perf/perf_flags.h"
}

# usage_columns FILE: the left column of each flag line of a usage ("  -b <bytes>  ...").
usage_columns() {
  awk '/^  -/ { c = substr($0, 3, 10); sub(/ +$/, "", c); print c }' "$1" | sort
}

# check_usage NAME PROGRAM CMD...: CMD --help's flag lines are exactly PROGRAM's rows.
check_usage() {
  local name=$1 prog=$2
  shift 2
  "$@" --help >"$tmp/usage" 2>"$tmp/err" || fail "$name --help: exit $?: $(head -c 300 "$tmp/err")"
  table "$prog" | awk '$4 != "-" { $1 = $2 = $3 = ""; sub(/^ +/, ""); print }' |
    { [ "$prog" = torch ] && echo "--backend"; cat; } | sort >"$tmp/want"
  usage_columns "$tmp/usage" >"$tmp/got"
  if ! cmp -s "$tmp/want" "$tmp/got"; then
    fail "$name --help's flag lines are not perf/perf_flags.h's rows for PERF_BY_${prog^^}" \
      "(< the table, > the usage):"
    diff "$tmp/want" "$tmp/got" | grep '^[<>]'
  fi
}

# check_letters NAME PROGRAM CMD...: every letter, taken or refused as the table says.
check_letters() {
  local name=$1 prog=$2 letter kind value shown rc args
  shift 2
  declare -A row=()
  while read -r letter kind value shown; do row[$letter]=$value; done < <(table "$prog")
  for letter in {a..z} {A..Z}; do
    if [ -z "${row[$letter]+x}" ]; then
      args=("-$letter" 1 -h)
    elif [ "${row[$letter]}" = - ]; then
      args=("-$letter") # -h itself
    else
      args=("-$letter" "${row[$letter]}" -h)
    fi
    RANK=0 timeout 30 "$@" "${args[@]}" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ -n "${row[$letter]+x}" ]; then
      [ $rc = 0 ] && grep -qi usage "$tmp/out" ||
        fail "$name: perf/perf_flags.h gives it -$letter, but '${args[*]}' exits $rc:" \
          "$(head -c 300 "$tmp/err")"
    else
      [ $rc = 2 ] && grep -q -- "unknown flag -$letter" "$tmp/err" ||
        fail "$name takes -$letter, which perf/perf_flags.h does not give it" \
          "(PERF_BY_${prog^^}): '${args[*]}' exits $rc, stderr: $(head -c 200 "$tmp/err")"
    fi
  done
  checked=$((checked + 1))
}

# both NAME PROGRAM CMD...
both() {
  check_usage "$@"
  check_letters "$@"
}

[ -x "$build/bin/allreduce_perf" ] || fail "no $build/bin/allreduce_perf: build first"
both allreduce_perf hccl "$build/bin/allreduce_perf"
for f in "$build"/bin/*_perf; do
  name=$(basename "$f")
  case $name in
  allreduce_perf | mpi_allreduce_perf | ccl_allreduce_perf) ;;
  mpi_*) check_usage "$name" mpi "$f" && checked=$((checked + 1)) ;;
  *) check_usage "$name" hccl "$f" && checked=$((checked + 1)) ;;
  esac
done
if [ -x "$build/bin/mpi_allreduce_perf" ]; then
  both mpi_allreduce_perf mpi "$build/bin/mpi_allreduce_perf"
else
  echo "skip: mpi_allreduce_perf (not built: CMake found no MPI)"
fi
ccl=${CCL_ALLREDUCE_PERF:-$build/bin/ccl_allreduce_perf}
if [ -x "$ccl" ]; then
  both ccl_allreduce_perf ccl "$ccl"
else
  echo "skip: ccl_allreduce_perf (not built here; bench/compare.sh builds it with oneCCL)"
fi
both torch_allreduce_perf.py torch "$py" "$src/bench/torch_allreduce_perf.py"

# docs/perf_programs.md's flag table names every flag of the libhccl programs.
doc=$src/docs/perf_programs.md
awk -F'|' '$0 == "## Flags" {on = 1; next} on && /^## / {exit} on && /^\| `-/ {print $2}' \
  "$doc" >"$tmp/docflags"
[ -s "$tmp/docflags" ] || fail "no flag table under '## Flags' in docs/perf_programs.md (moved?)"
while read -r letter kind value shown; do
  [ "$kind" = HELP ] && continue
  grep -q -- "\`-$letter\b" "$tmp/docflags" ||
    fail "docs/perf_programs.md's '## Flags' table does not name -$letter (perf/perf_flags.h)"
done < <(table hccl)

echo "$checked programs checked against perf/perf_flags.h, $fails failures"
[ $fails = 0 ]
