#!/usr/bin/env python3
"""deepspeed_bf16.py - DeepSpeed ZeRO stage 2 training in bfloat16 on a chosen process-group
backend, on DeepSpeed's CPU accelerator, written the way a DeepSpeed user writes it: one
process per rank (npu-launch, torchrun, or DeepSpeed's launcher, `deepspeed --num_gpus 2
deepspeed_bf16.py ...`), `import torch_hccl`, then
deepspeed.init_distributed(dist_backend="hccl") and deepspeed.initialize with
{"bf16": {"enabled": true}, "zero_optimization": {"stage": 2}}.

    DS_ACCELERATOR=cpu npu-launch --device-list 0,1 -- \\
        python3 deepspeed_bf16.py --backend hccl --out result.json

DeepSpeed keeps the model in bf16 on every rank and the float32 master weights and optimizer
state partitioned; each step reduces the bf16 gradients to the rank that owns their partition
and all-gathers the updated bf16 parameters. Rank 0 writes the losses of every step (averaged
over the ranks), the median step time, and each rank's sha256 of its whole bf16 model after the
last step (bf16_common.report): with ZeRO-2 every rank holds all of it, so the hashes must
agree. --communication-dtype float32 reduces the gradients in float32 instead.

Needs deepspeed (0.19.8 is the version tested: pip install deepspeed==0.19.8, DS_BUILD_OPS=0
is enough); DS_ACCELERATOR defaults to cpu here.
"""
import os
import sys
import time

os.environ.setdefault("DS_ACCELERATOR", "cpu")  # before deepspeed is imported

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import bf16_common as common  # noqa: E402


def main():
    ap = common.parser(__doc__.split("\n\n")[0])
    ap.add_argument("--communication-dtype", choices=["bfloat16", "float32"], default="bfloat16",
                    help="dtype DeepSpeed reduces gradients in (default: bfloat16, bf16's own)")
    ap.add_argument("--local_rank", "--local-rank", type=int, default=-1,
                    help="passed by DeepSpeed's launcher; LOCAL_RANK, which it also sets, is used")
    args = common.check(ap, ap.parse_args())
    import deepspeed  # after the flags: --help works without it

    if args.backend == "hccl":
        import torch_hccl  # noqa: F401  registers backend "hccl"
    torch.set_num_threads(1)
    rank, world, _ = common.rank_env()
    deepspeed.init_distributed(dist_backend=args.backend, verbose=False)
    model = common.make_model(args)
    nparams = sum(p.numel() for p in model.parameters())
    engine = common.deepspeed_engine(deepspeed, args, model, {
        "bf16": {"enabled": True},
        "zero_optimization": {"stage": 2},
        "communication_data_type": {"bfloat16": "bf16", "float32": "fp32"}[
            args.communication_dtype],
    })
    losses, clock = common.train_engine(engine, args, rank, world)
    elapsed = time.perf_counter() - clock.start

    hashes = [None] * world
    dist.all_gather_object(hashes, common.digest(list(engine.module.parameters())))
    common.report(args, dist, "deepspeed",
                  {"communication_dtype": args.communication_dtype,
                   "deepspeed": deepspeed.__version__,
                   "param_dtype": str(next(engine.module.parameters()).dtype)},
                  losses, clock, nparams, hashes, elapsed)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
