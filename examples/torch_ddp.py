#!/usr/bin/python3
"""torch_ddp.py - a small model trained with torch DistributedDataParallel on backend "hccl",
in the shape of the Ascend PyTorch docs' training script: one process per device, started by a
launcher that sets RANK, WORLD_SIZE, LOCAL_RANK, DEVICE_ID, MASTER_ADDR and MASTER_PORT.

    build/bin/npu-launch --device-list 0,1,2,3 -- /usr/bin/python3 examples/torch_ddp.py
    (from a build tree: PYTHONPATH=build/python; after `cmake --install`, nothing to set)

From gloo or NCCL the move is two lines: `import torch_hccl`, and backend="hccl".
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch_hccl  # noqa: F401  registers backend "hccl"
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def synthetic_dataset(n=8192, features=32, classes=4, seed=0):
    """Points around one centre per class: learnable, deterministic, the same on every rank."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(classes, features, generator=g) * 0.6
    y = torch.randint(0, classes, (n,), generator=g)
    x = centres[y] + torch.randn(n, features, generator=g) * 1.5
    return TensorDataset(x, y)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64, help="per process")
    ap.add_argument("--lr", type=float, default=0.05)
    args = ap.parse_args()

    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device_id = int(os.environ.get("DEVICE_ID", local_rank))
    torch.set_num_threads(1)
    dist.init_process_group(backend="hccl")  # env://: the launcher's variables
    rank, world = dist.get_rank(), dist.get_world_size()

    dataset = synthetic_dataset()
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                          nn.Linear(128, 4))
    model = DDP(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    if rank == 0:
        print("training on %d devices (rank 0 drives device %d), backend %s" % (
            world, device_id, dist.get_backend()))

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        start = time.time()
        stats = torch.zeros(3)  # loss sum, correct, samples
        for x, y in loader:
            optimizer.zero_grad()
            out = model(x)
            loss = criterion(out, y)
            loss.backward()
            optimizer.step()
            stats += torch.tensor([loss.item() * len(y), (out.argmax(1) == y).sum().item(), len(y)])
        dist.all_reduce(stats)  # every rank's share of the epoch
        if rank == 0:
            print("epoch %d: loss %.4f accuracy %.3f (%d samples, %.2f s)" % (
                epoch + 1, stats[0] / stats[2], stats[1] / stats[2], int(stats[2]),
                time.time() - start))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
