#!/usr/bin/env bash
# test_install.sh BUILD_DIR - `cmake --install` into a temporary prefix, then use the installed
# copy as a user would: build a C program with pkg-config and with find_package(hccl), run it
# on 2 ranks under the installed npu-launch, run the installed allreduce_perf, and (when the
# torch backend was built) import the installed torch_hccl and allreduce through it. The Python
# way, pip, is test_pip.sh's (ctest pip_install).
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
step() { echo "== $*"; }
# A free port for each run (the default 29688 may be another job's on a shared machine).
port() { python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import docblocks; print(docblocks.free_port())' "$src/../docs"; }

step "cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log"
libdir=$(dirname "$(find "$prefix" -name 'libhccl.so' | head -1)")
for f in include/hccl.h include/ddp.h bin/npu-launch bin/hccl-fr bin/allreduce_perf bin/all_gather_perf \
  bin/reduce_scatter_perf bin/broadcast_perf bin/reduce_perf bin/alltoall_perf bin/sendrecv_perf; do
  test -e "$prefix/$f" || { echo "missing $prefix/$f"; exit 1; }
done
soname=$(objdump -p "$libdir/libhccl.so" | awk '/SONAME/ {print $2}')
[ "$soname" = libhccl.so.0 ] || { echo "soname is '$soname', expected libhccl.so.0"; exit 1; }
echo "soname $soname"

step "pkg-config"
export PKG_CONFIG_PATH=$libdir/pkgconfig
cc -Wall -Werror -o "$tmp/hello_pc" "$src/hello_hccl.c" $(pkg-config --cflags --libs hccl) \
  -Wl,-rpath,"$libdir"
"$prefix/bin/npu-launch" --master-port "$(port)" --device-list 0,1 -- "$tmp/hello_pc"

step "the DDP layer: ddp.h with -lhccl_ddp"
printf '#include <ddp.h>\nint main(void) { ddp_t *d; return ddp_create(NULL, NULL, 0, NULL, &d) == HCCL_SUCCESS; }\n' >"$tmp/ddp_link.c"
# libhccl_ddp needs libhccl.so.0 itself; a runpath does not reach a library's own
# dependencies, so the temporary prefix goes on LD_LIBRARY_PATH (in /usr/local ld.so finds both)
cc -Wall -Werror -o "$tmp/ddp_link" "$tmp/ddp_link.c" $(pkg-config --cflags --libs hccl) -lhccl_ddp
LD_LIBRARY_PATH="$libdir" "$tmp/ddp_link"

step "find_package(hccl)"
cmake -S "$src" -B "$tmp/fp" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_RPATH="$libdir" >/dev/null
cmake --build "$tmp/fp" >/dev/null
"$prefix/bin/npu-launch" --master-port "$(port)" --device-list 0,1 -- "$tmp/fp/hello_hccl"

step "installed allreduce_perf"
"$prefix/bin/npu-launch" --master-port "$(port)" --device-list 0,1 -- "$prefix/bin/allreduce_perf" -b 8 -e 1M -f 32 -n 2 -w 1 |
  tee "$tmp/perf.txt" | tail -3
grep -q "Out of bounds values : 0 OK" "$tmp/perf.txt"

pydir=$(find "$prefix" -type d -name torch_hccl | head -1)
if [ -n "$pydir" ]; then
  py=$(cat "$build/python/INTERPRETER")
  step "installed torch_hccl ($py)"
  PYTHONPATH=$(dirname "$pydir") "$prefix/bin/npu-launch" --master-port "$(port)" --device-list 0,1 -- "$py" -c '
import torch, torch.distributed as dist, torch_hccl, os
assert torch_hccl.__file__.startswith(os.environ["PYTHONPATH"]), torch_hccl.__file__
dist.init_process_group("hccl")
t = torch.ones(4) * (dist.get_rank() + 1)
dist.all_reduce(t)
assert t.tolist() == [3.0] * 4, t
print("rank", dist.get_rank(), "torch_hccl from", os.path.dirname(torch_hccl.__file__), "ok")
dist.destroy_process_group()'
else
  echo "(torch_hccl was not built: skipped)"
fi
echo "install test passed"
