#!/usr/bin/env bash
# rdma_torch.sh - torch DistributedDataParallel across two pretend servers over RDMA, equal to
# gloo's run (issue 57): tests/torch/test_ddp.py's rank function (a small model, 8 steps from
# one seed, plain, find_unused_parameters and the fp16 hook; each trained twice in the same
# processes, on backend hccl (the default group) and on a gloo group, and every parameter and
# buffer compared) run as 2 servers x 1 rank under npu-launch by tests/rdma/rdma_ranks.sh, so
# hccl's links between the servers are forced onto RDMA (HCCL_NET=rdma: a rank without it fails,
# never a silent TCP). One job for both backends, so torch is imported once per rank (tens of
# seconds under emulation). gloo runs over the guest's loopback (GLOO_SOCKET_IFNAME=lo: the
# pretend servers' hostnames resolve nowhere).
#
# Passes when both launchers exit 0 (test_ddp's own check: within 1e-5, 1e-3 with fp16), every
# variant's worst relative difference is 0 on both ranks (two ranks: each sum is a + b on either
# backend, so the results are equal bit for bit), and the ranks' log says RDMA carried the job:
# each rank's "RDMA transport: rank R uses DEV port P" at init and its "sent N bytes over L
# links" at teardown with N > 0. Prints those lines and the agreement lines.
#
#   (in a guest with rxe0) bash tests/rdma/rdma_torch.sh BUILD
#   guest.sh run BUILD -- bash tests/rdma/rdma_torch.sh BUILD
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: rdma_torch.sh BUILD}" && pwd)
py=$(cat "$build/python/INTERPRETER" 2>/dev/null || command -v python3)
if ! "$py" -c 'import torch' 2>/dev/null; then
  echo "SKIP: $py has no torch (torch_hccl is not built in $build)"
  exit 77
fi
out=${GUEST_OUT:-/tmp}/torch.out
PYTHONPATH=$build/python${PYTHONPATH:+:$PYTHONPATH} GLOO_SOCKET_IFNAME=${GLOO_SOCKET_IFNAME:-lo} \
  HCCL_LOG_LEVEL=info RDMA_RANKS_TIMEOUT=${RDMA_RANKS_TIMEOUT:-500} RDMA_RANKS_PEEK=1 \
  bash "$here/rdma_ranks.sh" "$build" 2 1 -- "$py" "$here/../torch/test_ddp.py" --worker ddp \
  >"$out" 2>&1
st=$?
fails=0
[ $st = 0 ] || { echo "FAIL: the launchers' status $st"; fails=$((fails + 1)); }
grep -E "exited|agree|RDMA transport: rank [0-9]+ (uses|sent)|resources left" "$out" | sed 's/^ *//'
for k in 0 1; do
  n=$(grep -c "rank $k [a-z0-9]*: hccl and gloo agree (worst relative difference 0.00e+00)" "$out")
  [ "$n" = 3 ] || { echo "FAIL: rank $k: $n of 3 variants equal to gloo's bit for bit"; fails=$((fails + 1)); }
  grep -q "RDMA transport: rank $k uses " "$out" ||
    { echo "FAIL: rank $k did not say it uses RDMA"; fails=$((fails + 1)); }
  grep -Eq "RDMA transport: rank $k sent [1-9][0-9]* bytes" "$out" ||
    { echo "FAIL: rank $k sent nothing over RDMA"; fails=$((fails + 1)); }
done
[ $fails = 0 ] || tail -60 "$out"
exit $fails
