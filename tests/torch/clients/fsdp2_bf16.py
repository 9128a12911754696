#!/usr/bin/env python3
"""fsdp2_bf16.py - FSDP2 (torch.distributed.fsdp.fully_shard) training in bfloat16 on a chosen
process-group backend, written the way a user writes it: one process per rank, started by
npu-launch or torchrun, a CPU device mesh over the default group, each transformer block and
then the whole model sharded with MixedPrecisionPolicy(param_dtype=bfloat16,
reduce_dtype=bfloat16), Adam (or SGD) on the float32 shards.

    npu-launch --device-list 0,1 -- python3 fsdp2_bf16.py --backend hccl --out result.json
    torchrun --nproc_per_node 2 fsdp2_bf16.py --backend gloo --out result.json

So each step all-gathers the bf16 parameters of one block at a time (forward, and again in
backward), and reduce-scatters the bf16 gradients. Rank 0 writes the losses of every step
(averaged over the ranks), the median step time, and each rank's sha256 of the full float32
parameters after the last step (bf16_common.report). --reduce-dtype float32 reduces the
gradients in float32 instead.
"""
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

import bf16_common as common


def main():
    ap = common.parser(__doc__.split("\n\n")[0])
    ap.add_argument("--reduce-dtype", choices=["bfloat16", "float32"], default="bfloat16",
                    help="dtype FSDP2 reduce-scatters gradients in (default bfloat16)")
    args = common.check(ap, ap.parse_args())
    if args.backend == "hccl":
        import torch_hccl  # noqa: F401  registers backend "hccl"
    torch.set_num_threads(1)
    rank, world, _ = common.rank_env()
    dist.init_process_group(backend=args.backend)
    mesh = init_device_mesh("cpu", (world,))
    model = common.make_model(args)
    nparams = sum(p.numel() for p in model.parameters())
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16,
                              reduce_dtype=getattr(torch, args.reduce_dtype))
    for blk in model.blocks:
        fully_shard(blk, mesh=mesh, mp_policy=mp)
    fully_shard(model, mesh=mesh, mp_policy=mp)
    opt = common.optimizer(args, model.parameters())

    clock = common.Clock()
    losses = []
    for step in range(args.steps):
        x, y = common.batch(args, step, rank, world)
        t0 = time.perf_counter()
        loss = common.loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        clock.step(t0)
        losses.append(loss.item())
    elapsed = time.perf_counter() - clock.start

    # The full float32 parameters as every rank sees them (an all-gather of the shards).
    full = [p.full_tensor() for p in model.parameters()]
    hashes = [None] * world
    dist.all_gather_object(hashes, common.digest(full))
    common.report(args, dist, "fsdp2", {"reduce_dtype": args.reduce_dtype}, losses, clock,
                  nparams, hashes, elapsed)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
