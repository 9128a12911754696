#!/usr/bin/python3
"""torch_ddp_step.py - the time of one torch DistributedDataParallel training step on a
backend (gloo or hccl), for bench/compare.sh.

    npu-launch --device-list 0-3 -- /usr/bin/python3 bench/torch_ddp_step.py --backend hccl

The model is an MLP of 4 hidden layers of 1024 (about 4.2 M parameters, 16.8 MB of fp32
gradients: DDP's 25 MiB buckets give one large and one small allreduce per step) trained with
SGD on a global batch of 64 split over the ranks. Each rank uses one thread for compute. Rank 0
prints the median and the minimum step time over --steps steps after --warmup steps, and the
final loss (equal for every backend up to summation order: a correctness check too).
"""
import argparse
import os
import statistics
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="gloo", choices=["gloo", "hccl"])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--global-batch", type=int, default=64)
    a = ap.parse_args()
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    if a.backend == "hccl":
        import torch_hccl  # noqa: F401
    torch.set_num_threads(1)
    dist.init_process_group(a.backend)
    rank, n = dist.get_rank(), dist.get_world_size()
    if a.global_batch % n:
        sys.exit("--global-batch %d does not split over %d ranks" % (a.global_batch, n))
    torch.manual_seed(0)
    w = a.width
    model = nn.Sequential(nn.Linear(256, w), nn.ReLU(), nn.Linear(w, w), nn.ReLU(),
                          nn.Linear(w, w), nn.ReLU(), nn.Linear(w, w), nn.ReLU(),
                          nn.Linear(w, 10))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    per = a.global_batch // n
    times, loss = [], None
    for step in range(a.warmup + a.steps):
        g = torch.Generator().manual_seed(step)
        x = torch.randn(a.global_batch, 256, generator=g)[rank * per:(rank + 1) * per]
        y = torch.randint(0, 10, (a.global_batch,), generator=g)[rank * per:(rank + 1) * per]
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = nn.functional.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        t = torch.tensor([time.perf_counter() - t0])
        dist.all_reduce(t, op=dist.ReduceOp.MAX)  # a step ends when its slowest rank's does
        if step >= a.warmup:
            times.append(t.item())
    nparams = sum(p.numel() for p in model.parameters())
    if rank == 0:
        print("# torch_ddp_step backend %s ranks %d params %d global batch %d" % (
            a.backend, n, nparams, a.global_batch))
        print("ddp step ms: median %.2f min %.2f (%d steps) final loss %.6f" % (
            1e3 * statistics.median(times), 1e3 * min(times), len(times), loss.item()))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
