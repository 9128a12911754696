#!/usr/bin/env bash
# test_slurm.sh - a real Slurm on this host: slurmctld and slurmd from a configuration written in
# a temporary folder (one node, this host, 8 CPUs declared, auth/none: nothing leaves loopback),
# then jobs started the two ways docs/starting.md gives:
#   srun -n 4 allreduce_perf -c 1            srun starts every rank (SLURM_PROCID, ...)
#   srun -n 1 npu-launch --device-list 0-3   srun starts one npu-launch per server
# and one it refuses: two npu-launch tasks on one server. Each must check its results (-c 1,
# "Out of bounds values : 0 OK") and list every rank. Debian's slurmctld, slurmd and
# slurm-client are installed with apt-get when missing and this user may; where Slurm cannot
# be installed or started, the test says why and is skipped (exit 77).
#
#   bash tests/launcher/test_slurm.sh BUILD_DIR
set -u
build=${1:?usage: test_slurm.sh BUILD_DIR}
bin=$(cd "$build/bin" && pwd)
skip() {
  echo "SKIP: $*"
  exit 77
}

if ! command -v srun >/dev/null || ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null; then
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null ||
    skip "Slurm (slurmctld, slurmd, srun) is not installed, and this user cannot install it"
  echo "installing Debian's slurmctld, slurmd and slurm-client"
  DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y --no-install-recommends \
    slurmctld slurmd slurm-client >/tmp/hccl-slurm-apt.log 2>&1 ||
    skip "apt-get could not install Slurm (see /tmp/hccl-slurm-apt.log)"
fi
[ "$(id -u)" = 0 ] || skip "slurmd must run as root to start jobs as this user"
host=$(hostname -s)
getent hosts "$host" >/dev/null || skip "this host's name '$host' does not resolve"

dir=$(mktemp -d /tmp/hccl-slurm.XXXXXX)
mkdir -p "$dir/state" "$dir/spool"
# Two free ports for the daemons, one per job for the store.
free_port() {
  local p
  for _ in $(seq 100); do
    p=$((20000 + RANDOM % 9000))
    ss -Htln "sport = :$p" 2>/dev/null | grep -q . || { echo "$p"; return; }
  done
  echo 0
}
cport=$(free_port)
dport=$(free_port)
cat >"$dir/slurm.conf" <<EOF
ClusterName=hccltest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$cport
SlurmdPort=$dport
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=$host NodeAddr=127.0.0.1 CPUs=8 State=UNKNOWN
PartitionName=hccl Nodes=$host Default=YES MaxTime=10 State=UP OverSubscribe=YES
EOF
export SLURM_CONF=$dir/slurm.conf
# A job's variables must come from srun, not from whatever started this test.
unset $(env | sed -n 's/^\(SLURM_[A-Z_]*\)=.*/\1/p' | grep -v '^SLURM_CONF$') \
  RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT 2>/dev/null

stop() {
  for d in slurmd slurmctld; do
    [ -f "$dir/$d.pid" ] && kill "$(cat "$dir/$d.pid")" 2>/dev/null
  done
  sleep 0.5
  for d in slurmd slurmctld; do
    [ -f "$dir/$d.pid" ] && kill -9 "$(cat "$dir/$d.pid")" 2>/dev/null
  done
  rm -rf "$dir"
}
trap stop EXIT
slurmctld -f "$SLURM_CONF" 2>"$dir/slurmctld.err" || skip "slurmctld did not start: $(head -c 300 "$dir/slurmctld.err")"
slurmd -f "$SLURM_CONF" 2>"$dir/slurmd.err" || skip "slurmd did not start: $(head -c 300 "$dir/slurmd.err")"
state=""
for _ in $(seq 100); do
  state=$(sinfo -h -n "$host" -o %T 2>/dev/null | head -1)
  [ "$state" = idle ] && break
  sleep 0.2
done
[ "$state" = idle ] || skip "the Slurm node did not come up (state '$state'): $(tail -3 "$dir/slurmd.log" 2>/dev/null)"
echo "Slurm $(sinfo -V | cut -d' ' -f2) up: node $host idle"

passed=0
failed=0
# verdict OK NAME OUTPUT_FILE: counts the case, printing the end of its output when it failed.
verdict() {
  if [ "$1" = 1 ]; then
    echo "ok   $2"
    passed=$((passed + 1))
  else
    echo "FAIL $2"
    sed 's/^/  /' "$3" | tail -15
    failed=$((failed + 1))
  fi
}
# check NAME RANKS OUTPUT_FILE STATUS: a job that must succeed, every result right, every rank
# listed.
check() {
  local listed ok=0
  listed=$(grep -cE '^#  Rank +[0-9]+ ' "$3")
  [ "$4" = 0 ] && grep -q "# Out of bounds values : 0 OK" "$3" && [ "$listed" = "$2" ] && ok=1
  verdict $ok "$1: exit $4, $listed of $2 ranks listed, results checked" "$3"
}

timeout 120 srun -n 4 -t 2 env MASTER_PORT="$(free_port)" "$bin/allreduce_perf" -b 8 -e 1M -f 32 \
  -c 1 -n 2 -w 1 >"$dir/a.out" 2>&1
check "srun -n 4 allreduce_perf" 4 "$dir/a.out" $?
timeout 120 srun -n 4 -t 2 env MASTER_PORT="$(free_port)" "$bin/all_gather_perf" -b 8 -e 64K -f 32 \
  -c 1 -n 2 -w 1 -d all >"$dir/g.out" 2>&1
check "srun -n 4 all_gather_perf -d all" 4 "$dir/g.out" $?
timeout 120 srun -N 1 -n 1 -c 2 -t 2 "$bin/npu-launch" --master-port "$(free_port)" --device-list 0-3 \
  -- "$bin/allreduce_perf" -b 8 -e 1M -f 32 -c 1 -n 2 -w 1 >"$dir/l.out" 2>&1
check "srun -n 1 npu-launch --device-list 0-3 -- allreduce_perf" 4 "$dir/l.out" $?

# Two npu-launch tasks on one server would both start its rank 0: refused, saying why.
timeout 120 srun -N 1 -n 2 -t 2 "$bin/npu-launch" --master-port "$(free_port)" --device-list 0,1 \
  -- "$bin/allreduce_perf" -b 8 -e 8 >"$dir/r.out" 2>&1
rc=$?
ok=0
[ "$rc" != 0 ] && grep -q "srun started 2 npu-launch tasks on 1 server" "$dir/r.out" && ok=1
verdict $ok "srun -n 2 npu-launch on one server: exit $rc, refused naming SLURM_STEP_NUM_TASKS" "$dir/r.out"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
