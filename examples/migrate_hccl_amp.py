"""migrate_hccl_amp.py - migrate_nccl_amp.py, an NCCL DDP script in torch 2.x's spellings, moved to hccl.

torch.amp's autocast and GradScaler("cuda"), gradient clipping after unscale_, CUDA events for
timing, TF32 flags, a barrier with device_ids and CUDA's memory counters: the rows of
docs/pytorch.md's table ("Moving a CUDA script") that migrate_nccl.py does not show, after their
edits; tests/torch/test_migrate.py runs this file as it stands.

    build/bin/npu-launch --device-list 0,1,2,3 -- python3 examples/migrate_hccl_amp.py
    (from a build tree: PYTHONPATH=build/python; torchrun --nproc_per_node 4 works too)
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
import torch_hccl  # registers backend "hccl"
from torch.nn.parallel import DistributedDataParallel as DDP


def batch(step, rank, device, n=64, features=32):
    """A batch of a linear target with noise, different on each rank and step."""
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(n, features, generator=g)
    w = torch.linspace(-1, 1, features)
    return x.to(device), (x @ w + 0.1 * torch.randn(n, generator=g)).unsqueeze(1).to(device)


def main(args):
    local_rank = int(os.environ["LOCAL_RANK"])
    backend = "nccl" if torch.cuda.is_available() else "hccl"
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    device = torch_hccl.set_device(local_rank)  # torch.device("cpu"): where tensors live
    dist.init_process_group(backend=backend)
    rank = dist.get_rank()
    torch.manual_seed(0)
    torch.cuda.manual_seed_all(0)

    model = nn.Sequential(nn.Linear(32, 1024), nn.ReLU(), nn.Linear(1024, 1)).to(device)
    model = DDP(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []

    t0 = time.perf_counter()
    for step in range(args.steps):
        x, y = batch(step, rank, device)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = nn.functional.mse_loss(model(x).float(), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
    ms = (time.perf_counter() - t0) * 1e3
    peak = torch_hccl.memory_stats()["peak_allocated_bytes"]

    dist.barrier()
    if rank == 0:
        print("loss %.4f -> %.4f in %d steps (%.2f ms/step, peak %d bytes)" % (
            losses[0], sum(losses[-5:]) / 5, args.steps, ms / args.steps, peak))
    torch_hccl.empty_cache()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(args)
