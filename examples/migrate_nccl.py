"""migrate_nccl.py - a typical NCCL DDP training script, as it stands before moving to hccl.

It is here to be compared with migrate_hccl.py, the same script after the edits that
docs/pytorch.md's table lists ("Moving a CUDA script"); it needs CUDA GPUs and is not run here.

    torchrun --nproc_per_node 4 examples/migrate_nccl.py
"""
import argparse
import os
import time

# The flags are read before torch is imported (a second or more), so -h and a mistyped flag
# are answered at once.
if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="DDP training, one process per device")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64, help="per process")
    args = ap.parse_args()

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def dataset(n=8192, features=32, classes=4):
    """Points around one centre per class, the same on every rank."""
    g = torch.Generator().manual_seed(0)
    centres = torch.randn(classes, features, generator=g) * 0.6
    y = torch.randint(0, classes, (n,), generator=g)
    return TensorDataset(centres[y] + torch.randn(n, features, generator=g) * 1.5, y)


def main(args):
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)
    dist.init_process_group(backend="nccl")
    rank = dist.get_rank()
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True

    data = dataset()
    sampler = DistributedSampler(data, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler, num_workers=2,
                        pin_memory=True)
    model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 4)).cuda()
    model = DDP(model, device_ids=[local_rank], output_device=local_rank)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = torch.cuda.amp.GradScaler()
    criterion = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        start = time.time()
        total = torch.zeros(2, device=device)  # loss sum, samples
        for x, y in loader:
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            optimizer.zero_grad(set_to_none=True)
            with torch.cuda.amp.autocast(dtype=torch.float16):
                loss = criterion(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            total += torch.stack([loss.detach().float() * len(y),
                                  torch.tensor(float(len(y)), device=device)])
        torch.cuda.synchronize()
        dist.all_reduce(total)
        if rank == 0:
            print("epoch %d: loss %.4f over %d samples (%.2f s)" % (
                epoch + 1, total[0] / total[1], int(total[1]), time.time() - start))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(args)
