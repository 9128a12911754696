#!/usr/bin/python3
"""torch_latency.py - where a small dist.all_reduce's time goes, per rank, in one run:

  dist.all_reduce(t)             torch's Python layer + pybind + torch_hccl + the library
  pg.allreduce([t]).wait()       pybind + torch_hccl + the library (torch's Python layer skipped)
  dist.all_reduce(t, async_op=True).wait()

Run under a launcher, one process per device:

  PYTHONPATH=build/python build/bin/npu-launch --device-list 0,1 -- \\
      /usr/bin/python3 bench/torch_latency.py --bytes 4096 --iters 20000

Compare with `allreduce_perf -b 4K -e 4K -n 20000 -w 200` (the C call) and with
build/bin/torch_overhead (torch_hccl's own share, from C++, without Python).

Or the Ascend docs' way, torch.multiprocessing.spawn with explicit ranks and no core binding:

  PYTHONPATH=build/python /usr/bin/python3 bench/torch_latency.py --spawn 4 --iters 5000

--shapes adds dist.all_reduce rows for the other shapes users pass at the same bytes:
complex64 and complex128 (torch's Python checks the op and makes a view_as_real view each
call), that [n, 2] float view made once and handed over as a float tensor (torch_hccl's share
of a complex call without torch's complex branch), a 2-D [k, k] float32 and a slice (staged).

--backend fake is torch's own do-nothing backend (every call returns at once): the floor of
torch's layers, at the same sharing of cores when started with --spawn N. Its ranks never wait
for each other, so each runs whole time slices with warm caches; --ring (with --spawn) makes
each fake call also wait for the rank before it, as a real collective makes a rank wait for
its peers: a one-byte token passed round the ranks over pipes after every call (rank 0 sends
first), so when ranks outnumber cores every call is a sleep and a wake-up of each rank, the
cost a real collective cannot avoid there. Each row also gives rank 0's CPU time a call (all
its threads) and that times ranks / cores, the wall time a call cannot go below when every
rank spends as much and ranks outnumber cores.
"""
import argparse
import os
import time

parser = argparse.ArgumentParser(description=__doc__,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--bytes", type=int, default=4096)
parser.add_argument("--iters", type=int, default=20000)
parser.add_argument("--backend", default="hccl")
parser.add_argument("--spawn", type=int, default=0,
                    help="start this many ranks with torch.multiprocessing.spawn")
parser.add_argument("--shapes", action="store_true",
                    help="also complex64, complex128, their float view, [k, k] and a slice")
parser.add_argument("--port", type=int, default=29501, help="MASTER_PORT with --spawn")
parser.add_argument("--ring", action="store_true",
                    help="with --spawn: after each call pass a token round the ranks (pipes)")
args = parser.parse_args()
if args.ring and not args.spawn:
    parser.error("--ring needs --spawn N")

# torch after the flags: -h and a wrong flag are answered without loading it (a second or more)
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import torch_hccl  # noqa: E402,F401


def main(rank=None, world=None, pipes=None):
    torch.set_num_threads(1)
    token = b"t"
    if pipes:  # --ring: read from the rank before, write to the rank after
        rfd, wfd = pipes[rank][0].fileno(), pipes[(rank + 1) % world][1].fileno()

        def ring():
            if rank == 0:
                os.write(wfd, token)
                os.read(rfd, 1)
            else:
                os.read(rfd, 1)
                os.write(wfd, token)
    if args.backend == "fake":
        # torch's do-nothing backend: the floor of torch's own layers, at the same sharing of
        # cores when started with --spawn (every rank a process of its own, talking to no one).
        from torch.testing._internal.distributed.fake_pg import FakeStore
        dist.init_process_group("fake", store=FakeStore(), rank=rank or 0,
                                world_size=world or int(os.environ.get("WORLD_SIZE", "1")))
    elif rank is None:
        dist.init_process_group(args.backend)
    else:
        dist.init_process_group(args.backend, init_method="tcp://127.0.0.1:%d" % args.port,
                                rank=rank, world_size=world)
    t = torch.ones(args.bytes // 4)
    pg = dist.distributed_c10d._get_default_group()

    def us_per_call(fn, n):
        # The wall time a call, and the CPU time this process (every thread of it) spent a call.
        for _ in range(max(n // 100, 10)):
            fn()
        dist.barrier()
        t0, c0 = time.perf_counter_ns(), time.process_time_ns()
        for _ in range(n):
            fn()
        return (time.perf_counter_ns() - t0) / n / 1000, (time.process_time_ns() - c0) / n / 1000

    rows = [("dist.all_reduce", lambda: dist.all_reduce(t)),
            ("pg.allreduce().wait()", lambda: pg.allreduce([t]).wait()),
            ("all_reduce(async_op=True).wait()",
             lambda: dist.all_reduce(t, async_op=True).wait())]
    if pipes:
        rows = [(name + " + ring", lambda fn=fn: (fn(), ring())) for name, fn in rows]
        rows.append(("ring alone", ring))
    if args.shapes:
        n = args.bytes // 4
        c64, c128 = torch.ones(n // 2, dtype=torch.complex64), torch.ones(n // 4, dtype=torch.complex128)
        held = torch.view_as_real(c64)
        k = int(n ** 0.5)
        sq, sl = torch.ones(k, n // k), torch.ones(2 * n)[::2]
        rows += [("dist.all_reduce complex64", lambda: dist.all_reduce(c64)),
                 ("dist.all_reduce complex128", lambda: dist.all_reduce(c128)),
                 ("dist.all_reduce view_as_real held", lambda: dist.all_reduce(held)),
                 ("dist.all_reduce [%d, %d] float32" % (k, n // k), lambda: dist.all_reduce(sq)),
                 ("dist.all_reduce slice [::2]", lambda: dist.all_reduce(sl)),
                 ("dist.all_reduce float32 again", lambda: dist.all_reduce(t))]
    got = [(name,) + us_per_call(fn, args.iters) for name, fn in rows]
    if dist.get_rank() == 0:
        # cpu: rank 0's CPU time a call (all its threads); when ranks outnumber cores the wall
        # time a call cannot be below cpu x ranks / cores if every rank spends as much.
        cores = len(os.sched_getaffinity(0))
        print("# %s%s, %d ranks%s, %d bytes float32 sum, %d calls each, %d cores" % (
            args.backend, " + token ring" if pipes else "", dist.get_world_size(),
            " (mp.spawn)" if rank is not None else "",
            args.bytes, args.iters, cores))
        for name, us, cpu in got:
            print("%-34s %8.2f us  cpu %7.2f us  cpu x ranks / cores %8.2f us" % (
                name, us, cpu, cpu * dist.get_world_size() / cores))
    dist.destroy_process_group()


if __name__ == "__main__":
    if args.spawn:
        import torch.multiprocessing as mp
        # --ring: pipe k carries the token into rank k (multiprocessing hands each child the
        # pipes' ends; the token moves by plain os.read/os.write on them)
        pipes = [mp.Pipe(duplex=False) for _ in range(args.spawn)] if args.ring else None
        mp.spawn(main, args=(args.spawn, pipes), nprocs=args.spawn)
    else:
        main()
