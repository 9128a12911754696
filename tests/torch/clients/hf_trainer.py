#!/usr/bin/env python3
"""hf_trainer.py - the Hugging Face Trainer on a chosen process-group backend, on CPU, the way a
Trainer user writes it, with the one change hccl needs: the process group is made before
TrainingArguments, and TrainingArguments gets use_cpu=True.

    npu-launch --device-list 0,1 -- python3 hf_trainer.py --backend hccl --out result.json

Why both (docs/pytorch.md, "Hugging Face Trainer"): Accelerate, which the Trainer runs on,
replaces every backend but mpi with gloo on a CPU when it makes the group itself
(accelerate/state.py, _prepare_backend; TrainingArguments(ddp_backend="hccl") ends in
"ValueError: Your assigned backend hccl is not available"), and keeps a group that already
exists; without use_cpu=True it picks DistributedType.NO on a machine without CUDA and every
rank trains alone, without an error (on gloo too).

The model is a tiny GPT-2 built from a config (nothing downloaded: 2 layers, width 32, 64
tokens, 51,808 parameters); the data are made: sequences in which each token is a fixed
permutation of the one before, which the model learns. The Trainer logs its loss every step
(averaged over the ranks: it gathers it). Rank 0 writes those losses, the median step time,
every rank's sha256 of its parameters (gathered), and its parameters themselves (OUT.pt).
"""
import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist

VOCAB, SEQ = 64, 16


class Sequences(torch.utils.data.Dataset):
    """n sequences; token t+1 is perm[token t], the first token drawn at random."""

    def __init__(self, n, seed):
        perm = torch.randperm(VOCAB, generator=torch.Generator().manual_seed(1))
        g = torch.Generator().manual_seed(seed)
        x = torch.empty(n, SEQ, dtype=torch.long)
        x[:, 0] = torch.randint(0, VOCAB, (n,), generator=g)
        for t in range(1, SEQ):
            x[:, t] = perm[x[:, t - 1]]
        self.x = x

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"input_ids": self.x[i], "labels": self.x[i]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="hccl", help="process-group backend: hccl or gloo")
    ap.add_argument("--steps", type=int, default=20, help="optimizer steps (default 20)")
    ap.add_argument("--out", default="", help="rank 0 writes the result here (JSON)")
    args = ap.parse_args()

    from transformers import (GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback,
                              TrainingArguments)

    if args.backend == "hccl":
        import torch_hccl  # noqa: F401  registers backend "hccl"
    torch.set_num_threads(1)
    # The group first: Accelerate keeps it (and would put gloo in hccl's place otherwise).
    dist.init_process_group(backend=args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=SEQ, n_embd=32, n_layer=2,
                                       n_head=2, resid_pdrop=0.0, embd_pdrop=0.0,
                                       attn_pdrop=0.0))
    out_dir = tempfile.mkdtemp(prefix="hf_trainer_")
    targs = TrainingArguments(
        output_dir=out_dir, use_cpu=True,            # use_cpu: else every rank trains alone
        per_device_train_batch_size=8, max_steps=args.steps, learning_rate=3e-3,
        logging_steps=1, save_strategy="no", report_to=[], disable_tqdm=True, seed=0,
        dataloader_num_workers=0)
    assert targs.parallel_mode.value == "distributed", targs.parallel_mode
    assert targs.world_size == world, (targs.world_size, world)

    class Clock(TrainerCallback):
        def __init__(self):
            self.times, self.t0 = [], 0.0

        def on_step_begin(self, *_, **__):
            self.t0 = time.perf_counter()

        def on_step_end(self, *_, **__):
            self.times.append(time.perf_counter() - self.t0)

    clock = Clock()
    trainer = Trainer(model=model, args=targs, train_dataset=Sequences(512, seed=2),
                      callbacks=[clock])
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert dist.get_backend() == args.backend, dist.get_backend()

    flat = torch.cat([p.detach().reshape(-1) for p in trainer.model.parameters()])
    sha = hashlib.sha256(flat.numpy().tobytes()).hexdigest()
    shas = [None] * world
    dist.all_gather_object(shas, sha)
    step = torch.tensor([statistics.median(clock.times[1:] or clock.times)], dtype=torch.float64)
    dist.all_reduce(step, op=dist.ReduceOp.MAX)
    if rank == 0:
        print("hf_trainer on %s, %d ranks: loss %.4f -> %.4f, %.1f ms a step" % (
            dist.get_backend(), world, losses[0], losses[-1], 1e3 * float(step)))
        if args.out:
            torch.save(flat, args.out + ".pt")
            with open(args.out, "w") as f:
                json.dump({"client": "hf_trainer", "backend": dist.get_backend(),
                           "world_size": world, "losses": losses, "step_time_s": float(step),
                           "param_sha256": shas, "params": flat.numel(),
                           "transformers": sys.modules["transformers"].__version__,
                           "torch": torch.__version__}, f, indent=1)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
