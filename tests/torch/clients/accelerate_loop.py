#!/usr/bin/env python3
"""accelerate_loop.py - a training loop written for Hugging Face Accelerate, on a chosen
process-group backend, on CPU: the group made first, then Accelerator(cpu=True), prepare,
accelerator.backward, and the collectives Accelerate gives a loop: reduce (the loss averaged
over the ranks), gather (every rank's count of samples), gather_for_metrics (the evaluation's
predictions, without the samples the last uneven batch repeats), wait_for_everyone.

    npu-launch --device-list 0,1 -- python3 accelerate_loop.py --backend hccl --out result.json

Why the group first and cpu=True: see hf_trainer.py (Accelerate puts gloo in place of any
backend but mpi on CPU when it makes the group itself; without cpu=True on a machine without
CUDA it picks DistributedType.NO and each rank trains alone).

The model is an MLP over four Gaussian blobs (lightning_train.py's data); 301 evaluation
samples, so the last batch is uneven and gather_for_metrics must drop what the sampler padded.
Rank 0 writes the per-step losses (reduced), the evaluation's accuracy and sample count, the
median step time, every rank's sha256 of its parameters, and its parameters (OUT.pt).
"""
import argparse
import hashlib
import json
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

EVAL_N = 301


def blobs(n, seed):
    centers = torch.randn(4, 16, generator=torch.Generator().manual_seed(0)) * 0.6
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 4, (n,), generator=g)
    return torch.utils.data.TensorDataset(centers[y] + torch.randn(n, 16, generator=g) * 1.6, y)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="hccl", help="process-group backend: hccl or gloo")
    ap.add_argument("--epochs", type=int, default=2, help="epochs of 1024 samples (default 2)")
    ap.add_argument("--out", default="", help="rank 0 writes the result here (JSON)")
    args = ap.parse_args()

    from accelerate import Accelerator, DistributedType
    from accelerate.utils import set_seed

    if args.backend == "hccl":
        import torch_hccl  # noqa: F401  registers backend "hccl"
    torch.set_num_threads(1)
    dist.init_process_group(backend=args.backend)     # first: Accelerate keeps it
    accelerator = Accelerator(cpu=True)               # cpu=True: else each rank trains alone
    assert accelerator.distributed_type == DistributedType.MULTI_CPU, accelerator.distributed_type
    assert accelerator.num_processes == dist.get_world_size()
    set_seed(0)

    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    train = torch.utils.data.DataLoader(blobs(1024, 1), batch_size=16, shuffle=True)
    evals = torch.utils.data.DataLoader(blobs(EVAL_N, 2), batch_size=16)
    model, opt, train, evals = accelerator.prepare(model, opt, train, evals)

    losses, times, seen = [], [], 0
    for _ in range(args.epochs):
        model.train()
        for x, y in train:
            t0 = time.perf_counter()
            loss = F.cross_entropy(model(x), y)
            accelerator.backward(loss)
            opt.step()
            opt.zero_grad()
            losses.append(accelerator.reduce(loss.detach(), reduction="mean").item())
            times.append(time.perf_counter() - t0)
            seen += len(y)
    accelerator.wait_for_everyone()
    per_rank = accelerator.gather(torch.tensor([seen])).tolist()

    model.eval()
    preds, labels = [], []
    with torch.no_grad():
        for x, y in evals:
            p, l = accelerator.gather_for_metrics((model(x).argmax(-1), y))
            preds.append(p)
            labels.append(l)
    preds, labels = torch.cat(preds), torch.cat(labels)
    accuracy = (preds == labels).float().mean().item()

    flat = torch.cat([p.detach().reshape(-1)
                      for p in accelerator.unwrap_model(model).parameters()])
    shas = [None] * accelerator.num_processes
    dist.all_gather_object(shas, hashlib.sha256(flat.numpy().tobytes()).hexdigest())
    step = torch.tensor([statistics.median(times[1:] or times)], dtype=torch.float64)
    dist.all_reduce(step, op=dist.ReduceOp.MAX)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        print("accelerate on %s, %d ranks: loss %.4f -> %.4f, accuracy %.4f of %d, %.2f ms a "
              "step" % (dist.get_backend(), accelerator.num_processes, losses[0], losses[-1],
                        accuracy, len(labels), 1e3 * float(step)))
        if args.out:
            torch.save(flat, args.out + ".pt")
            with open(args.out, "w") as f:
                json.dump({"client": "accelerate", "backend": dist.get_backend(),
                           "world_size": accelerator.num_processes, "losses": losses,
                           "accuracy": accuracy, "eval_samples": len(labels),
                           "samples_per_rank": per_rank, "step_time_s": float(step),
                           "param_sha256": shas,
                           "accelerate": sys.modules["accelerate"].__version__,
                           "torch": torch.__version__}, f, indent=1)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
