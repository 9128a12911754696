#!/usr/bin/python3
"""torch_shrink.py - training that survives a dead rank: dist.shrink_group on torch_hccl.

One process per rank, started with torchrun-style variables (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT; init env://): by npu-launch --on-failure continue, which leaves the other ranks
running when one dies (by default it stops them all), or by hand. A small float64 linear model
learns by plain SGD; each step's global batch of 12 samples is split among the ranks, and their
gradient sums are all-reduced, so the result does not depend on how many ranks share the batch
(up to float64 rounding).

With --kill-rank K --kill-step S, rank K SIGKILLs itself in step S, between its backward and its
all_reduce. The others' all_reduce fails (the dead peer is seen); they call
dist.shrink_group([K], shrink_flags=SHRINK_ABORT), which replaces the default group with one of
the survivors (renumbered in order), and redo step S and the rest on it. No restart: the same
processes go on. Here the survivors know K from the command line; a real job learns it from its
health checks (or the error message, which names the rank). Rank 0 hosts env://'s store, so
K must not be 0 (torchrun's agent hosts it outside the ranks, so there it may be).

Each rank prints "final <parameters>" at the end; tests/torch/test_shrink.py compares a run
with a kill against an unbroken one.

    PYTHONPATH=build/python build/bin/npu-launch --on-failure continue --tag-output \\
        --device-list 0-3 -- python3 examples/torch_shrink.py --kill-rank 2 --kill-step 3
"""
import argparse
import json
import os
import signal
import sys
import time
from datetime import timedelta

# The flags are read before torch is imported (a second or more), so -h and a mistyped flag
# are answered at once.
if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--kill-rank", type=int, default=-1)
    ap.add_argument("--kill-step", type=int, default=-1)
    args = ap.parse_args()

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

import torch_hccl  # noqa: F401  registers backend "hccl"

BATCH = 12  # global samples per step: splits evenly over 4, 3, 2 or 1 ranks


def batch(step):
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(BATCH, 8, generator=g, dtype=torch.float64)
    y = x.sum(1, keepdim=True) * 0.5 + 1.0
    return x, y


def step_grads(model, step):
    """This rank's share of the step's batch: the sum of its samples' gradients."""
    rank, n = dist.get_rank(), dist.get_world_size()
    x, y = batch(step)
    lo, hi = rank * BATCH // n, (rank + 1) * BATCH // n
    model.zero_grad()
    loss = ((model(x[lo:hi]) - y[lo:hi]) ** 2).sum()
    loss.backward()
    return [p.grad for p in model.parameters()]


def main(a):
    dist.init_process_group("hccl", timeout=timedelta(seconds=30))
    me = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1).double()
    step = 0
    while step < a.steps:
        grads = step_grads(model, step)
        if me == a.kill_rank and step == a.kill_step:
            print("killed at %.3f" % time.time(), flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            for g in grads:
                dist.all_reduce(g)
        except Exception as e:  # the dead peer: shrink and redo this step
            if a.kill_rank < 0:
                raise
            print("step %d failed at %.3f: %s" % (step, time.time(), str(e).splitlines()[0]),
                  flush=True)
            dist.shrink_group([a.kill_rank], shrink_flags=c10d.SHRINK_ABORT)
            print("shrunk: rank %d of %d at %.3f" % (dist.get_rank(), dist.get_world_size(),
                                                     time.time()), flush=True)
            a.kill_rank = -1
            continue
        with torch.no_grad():
            for p, g in zip(model.parameters(), grads):
                p -= 0.05 * g / BATCH
        step += 1
    params = [v for p in model.parameters() for v in p.detach().flatten().tolist()]
    print("final %s" % json.dumps(params), flush=True)
    print("done at %.3f" % time.time(), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(args))
