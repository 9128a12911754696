"""migrate_nccl_amp.py - an NCCL DDP script in torch 2.x's spellings, as it stands before moving to hccl.

torch.amp's autocast and GradScaler("cuda"), gradient clipping after unscale_, CUDA events for
timing, TF32 flags, a barrier with device_ids and CUDA's memory counters: the rows of
docs/pytorch.md's table ("Moving a CUDA script") that migrate_nccl.py does not show. It is here
to be compared with migrate_hccl_amp.py, the same script after those edits; it needs CUDA GPUs
and is not run here.

    torchrun --nproc_per_node 4 examples/migrate_nccl_amp.py
"""
import argparse
import os
import time

# The flags are read before torch is imported (a second or more), so -h and a mistyped flag
# are answered at once.
if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="DDP training with mixed precision")
    ap.add_argument("--steps", type=int, default=60)
    args = ap.parse_args()

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def batch(step, rank, device, n=64, features=32):
    """A batch of a linear target with noise, different on each rank and step."""
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(n, features, generator=g)
    w = torch.linspace(-1, 1, features)
    return x.to(device), (x @ w + 0.1 * torch.randn(n, generator=g)).unsqueeze(1).to(device)


def main(args):
    local_rank = int(os.environ["LOCAL_RANK"])
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.cuda.set_device(local_rank)
    dist.init_process_group(backend=backend, device_id=torch.device("cuda", local_rank))
    rank = dist.get_rank()
    torch.manual_seed(0)
    torch.cuda.manual_seed_all(0)

    model = nn.Sequential(nn.Linear(32, 1024), nn.ReLU(), nn.Linear(1024, 1)).to(local_rank)
    model = DDP(model, device_ids=[local_rank])
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    scaler = torch.amp.GradScaler("cuda")
    losses = []

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for step in range(args.steps):
        x, y = batch(step, rank, local_rank)
        optimizer.zero_grad(set_to_none=True)
        with torch.amp.autocast("cuda", dtype=torch.float16):
            loss = nn.functional.mse_loss(model(x).float(), y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end)
    peak = torch.cuda.max_memory_allocated()

    dist.barrier(device_ids=[local_rank])
    if rank == 0:
        print("loss %.4f -> %.4f in %d steps (%.2f ms/step, peak %d bytes)" % (
            losses[0], sum(losses[-5:]) / 5, args.steps, ms / args.steps, peak))
    torch.cuda.empty_cache()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(args)
