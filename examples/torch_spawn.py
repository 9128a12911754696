#!/usr/bin/python3
"""torch_spawn.py - data-parallel training started the way the Ascend PyTorch docs' ImageNet
script (main.py) starts it: one launch per server, torch.multiprocessing.spawn for one process
per device, and explicit ranks.

    /usr/bin/python3 examples/torch_spawn.py --device-list 0,1,2,3 \\
        --dist-url tcp://127.0.0.1:29688 --multiprocessing-distributed --world-size 1 --rank 0

As in main.py: --device-list is split, converted to ints and sorted, and process i drives
device sorted[i]; --world-size is the number of servers and --rank this server's index, both
multiplied out to ranks; each process calls torch_hccl.set_device (the role of
torch.npu.set_device) and dist.init_process_group(backend, init_method=--dist-url,
world_size, rank). Nothing is read from the environment, so it runs the same from a clean
shell, inside a Slurm allocation, under mpirun or a launcher, or with WORLD_SIZE exported.

The data are synthetic images (3x16x16, 10 classes, one pattern per class plus noise), made
from a fixed seed, so every device count sees the same global batches: DistributedSampler
(no shuffle) gives rank r the samples r, r+n, ..., which together are one device's batch of
n times the size. No batch norm, so the final loss matches across device counts (test_example).
"""
import argparse
import os
import sys
import time

# The flags are read before torch is imported (a second or more), so -h and a mistyped flag
# are answered at once.
if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="ImageNet-style training on backend hccl")
    parser.add_argument("--device-list", default="0,1,2,3,4,5,6,7", type=str)
    parser.add_argument("--dist-url", default="tcp://127.0.0.1:29688", type=str)
    parser.add_argument("--dist-backend", default="hccl", type=str)
    parser.add_argument("--world-size", default=1, type=int, help="number of servers")
    parser.add_argument("--rank", default=0, type=int, help="this server's index")
    parser.add_argument("--multiprocessing-distributed", action="store_true")
    parser.add_argument("--epochs", default=3, type=int)
    parser.add_argument("-b", "--batch-size", default=64, type=int, help="global batch")
    parser.add_argument("--lr", default=0.05, type=float)
    parser.add_argument("-j", "--workers", default=0, type=int, help="DataLoader workers")
    parser.add_argument("--samples", default=2048, type=int)
    parser.add_argument("--seed", default=0, type=int)
    args = parser.parse_args()

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import torch_hccl


def device_id_to_process_device_map(device_list):
    devices = sorted(int(x) for x in device_list.split(","))
    return {i: d for i, d in enumerate(devices)}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 4 * 4, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    patterns = torch.randn(10, 3, 16, 16, generator=g)
    labels = torch.randint(0, 10, (n,), generator=g)
    images = patterns[labels] + 1.5 * torch.randn(n, 3, 16, 16, generator=g)
    return TensorDataset(images, labels)


def main(args):
    args.process_device_map = device_id_to_process_device_map(args.device_list)
    ngpus_per_node = len(args.process_device_map)
    args.distributed = args.world_size > 1 or args.multiprocessing_distributed
    if args.multiprocessing_distributed:
        args.world_size = ngpus_per_node * args.world_size
        mp.spawn(main_worker, nprocs=ngpus_per_node, args=(ngpus_per_node, args))
    else:
        main_worker(0, ngpus_per_node, args)


def main_worker(gpu, ngpus_per_node, args):
    args.gpu = args.process_device_map[gpu]
    torch.set_num_threads(1)
    torch_hccl.set_device(args.gpu)
    if args.distributed:
        if args.multiprocessing_distributed:
            args.rank = args.rank * ngpus_per_node + gpu
        dist.init_process_group(backend=args.dist_backend, init_method=args.dist_url,
                                world_size=args.world_size, rank=args.rank)
    world = args.world_size if args.distributed else 1
    rank = args.rank if args.distributed else 0
    if args.batch_size % world:
        sys.exit("--batch-size %d is not a multiple of the %d ranks" % (args.batch_size, world))
    torch.manual_seed(args.seed)
    model = Net()
    if args.distributed:
        model = nn.parallel.DistributedDataParallel(model)
    data = make_data(args.samples, args.seed)
    sampler = DistributedSampler(data, world, rank, shuffle=False) if args.distributed else None
    loader = DataLoader(data, batch_size=args.batch_size // world, sampler=sampler,
                        num_workers=args.workers, drop_last=True)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    if rank == 0:
        print("training on %d devices (this server: %s), rank %d drives device %d"
              % (world, args.device_list, rank, torch_hccl.current_device()), flush=True)
    start = time.time()
    for epoch in range(args.epochs):
        total = torch.zeros(3)  # loss sum, correct, samples
        for images, labels in loader:
            out = model(images)
            loss = F.cross_entropy(out, labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += torch.tensor([loss.item() * len(labels),
                                   (out.argmax(1) == labels).sum().item(), len(labels)])
        if args.distributed:
            dist.all_reduce(total)
        if rank == 0:
            print("epoch %d loss %.6f accuracy %.4f (%.1f s)" % (
                epoch, total[0] / total[2], total[1] / total[2], time.time() - start),
                flush=True)
    if args.distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(args)
