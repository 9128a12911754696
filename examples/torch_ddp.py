#!/usr/bin/python3
"""torch_ddp.py - a small model trained with torch DistributedDataParallel on backend "hccl",
in the shape of the Ascend PyTorch docs' training script: one process per device, started by a
launcher that sets RANK, WORLD_SIZE, LOCAL_RANK, DEVICE_ID, MASTER_ADDR and MASTER_PORT.

    build/bin/npu-launch --device-list 0,1,2,3 -- /usr/bin/python3 examples/torch_ddp.py
    (from a build tree: PYTHONPATH=build/python; after `cmake --install`, nothing to set)

From gloo or NCCL the move is two lines: `import torch_hccl`, and backend="hccl".

Restarts, as with torchrun: with --checkpoint FILE, rank 0 saves the model and the optimizer
(momentum included) after every epoch, and every rank resumes from FILE when it exists; under
`npu-launch --max-restarts N` a failed group starts again and picks up at the next epoch.
--fail-at-epoch K makes rank 1 exit at the start of epoch K on the first start
(TORCHELASTIC_RESTART_COUNT 0), to try it.
"""
import argparse
import os
import time

# The flags are read before torch is imported (a second or more), so -h and a mistyped flag
# are answered at once.
if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64, help="per process")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--checkpoint", help="save after every epoch; resume from it when present")
    ap.add_argument("--fail-at-epoch", type=int, default=-1,
                    help="rank 1 exits at the start of this epoch (1, 2, ...) on the first start")
    args = ap.parse_args()

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


def main(args):
    first_start = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) == 0

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
    start_epoch, saved = 0, None
    if args.checkpoint and os.path.exists(args.checkpoint):
        saved = torch.load(args.checkpoint)
        model.load_state_dict(saved["model"])
        start_epoch = saved["epoch"]
        if rank == 0:
            print("resuming at epoch %d from %s" % (start_epoch + 1, args.checkpoint))
    model = DDP(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    if saved:
        optimizer.load_state_dict(saved["optimizer"])
    criterion = nn.CrossEntropyLoss()
    if rank == 0:
        print("training on %d devices (rank 0 drives device %d), backend %s" % (
            world, device_id, dist.get_backend()))

    for epoch in range(start_epoch, args.epochs):
        if epoch + 1 == args.fail_at_epoch and rank == 1 and first_start:
            raise SystemExit("rank 1 fails at epoch %d (--fail-at-epoch)" % (epoch + 1))
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
        if args.checkpoint and rank == 0:  # a whole file or the last one: never half of one
            torch.save({"epoch": epoch + 1, "model": model.module.state_dict(),
                        "optimizer": optimizer.state_dict()}, args.checkpoint + ".tmp")
            os.replace(args.checkpoint + ".tmp", args.checkpoint)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(args)
