#!/usr/bin/env python3
"""deepspeed_zero.py - DeepSpeed ZeRO stages 1, 2 and 3 in float32 on a chosen process-group
backend, on DeepSpeed's CPU accelerator, one stage after the other in the same processes, the
way a DeepSpeed user writes each: `import torch_hccl`,
deepspeed.init_distributed(dist_backend="hccl"), deepspeed.initialize with
{"zero_optimization": {"stage": N}}, then engine(x), engine.backward(loss), engine.step().

    DS_ACCELERATOR=cpu npu-launch --device-list 0,1 -- \\
        python3 deepspeed_zero.py --backend hccl --out result.json
    deepspeed --num_gpus 2 deepspeed_zero.py --backend hccl --out result.json

Every stage trains a fresh copy of bf16_common's small transformer (109,376 parameters) from
the same seed on the same data, with Adam. Rank 0 writes, per stage, the losses of every step
(averaged over the ranks), the median step time, each rank's sha256 of the whole float32 model
after the last step (for ZeRO-3, whose ranks hold a partition each, gathered with
deepspeed.zero.GatheredParameters), and the parameters themselves (OUT.stageN.pt).

Needs deepspeed (0.19.8 is the version tested); DS_ACCELERATOR defaults to cpu here.
"""
import hashlib
import json
import os
import sys

os.environ.setdefault("DS_ACCELERATOR", "cpu")  # before deepspeed is imported

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import bf16_common as common  # noqa: E402


def train(deepspeed, args, stage, rank, world):
    model = common.make_model(args)
    engine = common.deepspeed_engine(deepspeed, args, model,
                                     {"zero_optimization": {"stage": stage}})
    losses, clock = common.train_engine(engine, args, rank, world)
    params = list(engine.module.parameters())
    with deepspeed.zero.GatheredParameters(params, enabled=stage == 3):
        flat = torch.cat([p.detach().float().reshape(-1).clone() for p in params])
    shas = [None] * world
    dist.all_gather_object(shas, hashlib.sha256(flat.numpy().tobytes()).hexdigest())
    local = torch.tensor(losses, dtype=torch.float32)
    dist.all_reduce(local)
    step = torch.tensor([clock.median()], dtype=torch.float64)
    dist.all_reduce(step, op=dist.ReduceOp.MAX)
    engine.destroy()
    return {"losses": (local / world).tolist(), "step_time_s": float(step),
            "param_sha256": shas, "params": flat.numel()}, flat


def main():
    ap = common.parser(__doc__.split("\n\n")[0])
    ap.add_argument("--stages", default="1,2,3", help="ZeRO stages to train, in turn (1,2,3)")
    ap.add_argument("--local_rank", "--local-rank", type=int, default=-1,
                    help="passed by DeepSpeed's launcher; LOCAL_RANK, which it also sets, is used")
    args = common.check(ap, ap.parse_args())
    stages = [int(s) for s in args.stages.split(",")]
    if not stages or any(s not in (1, 2, 3) for s in stages):
        ap.error("--stages %r: a list of 1, 2 and 3" % args.stages)
    import deepspeed  # after the flags: --help works without it

    if args.backend == "hccl":
        import torch_hccl  # noqa: F401  registers backend "hccl"
    torch.set_num_threads(1)
    rank, world, _ = common.rank_env()
    deepspeed.init_distributed(dist_backend=args.backend, verbose=False)
    out = {"client": "deepspeed_zero", "backend": dist.get_backend(), "world_size": world,
           "steps": args.steps, "deepspeed": deepspeed.__version__, "torch": torch.__version__,
           "launcher": "deepspeed" if args.local_rank >= 0 else "other", "stages": {}}
    for stage in stages:
        r, flat = train(deepspeed, args, stage, rank, world)
        out["stages"][str(stage)] = r
        if rank == 0:
            print("deepspeed ZeRO-%d on %s, %d ranks: loss %.4f -> %.4f, %.1f ms a step" % (
                stage, out["backend"], world, r["losses"][0], r["losses"][-1],
                1e3 * r["step_time_s"]), flush=True)
            if args.out:
                torch.save(flat, "%s.stage%d.pt" % (args.out, stage))
    if rank == 0 and args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
