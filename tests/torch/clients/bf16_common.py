"""bf16_common.py - what the two bf16 training clients share (fsdp2_bf16.py, deepspeed_bf16.py):
the model, the synthetic data, the flags, the rank variables, and the result file.

The model is a small decoder-only transformer (token and position embeddings, pre-norm blocks
of causal self-attention and a 4x MLP, a final norm and a vocabulary head); `--size small` is
109,376 parameters (the ctest), `--size 25m` 25,777,664 (bench/train_bf16.py). Every rank
builds it from the same seed, so every rank starts from the same weights.

The data are made, not loaded: at step s every rank draws the same global batch of token
sequences from a generator seeded with (seed, s) and takes its own slice of it (weak scaling:
--batch sequences per rank). The target of position t is perm[x[t-1]] for a fixed permutation
perm, which the model can learn only by attending to the previous token, so the loss falls from
ln(vocab) as it learns (with Adam at 1e-2, from 4.3 to under 0.1 in 60 steps at --size small).
"""
import argparse
import hashlib
import json
import math
import os
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SIZES = {
    # name: (dim, layers, heads, vocab, seq)
    "small": (64, 2, 4, 64, 16),
    "25m": (512, 8, 8, 512, 64),
}


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(
            2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Net(nn.Module):
    def __init__(self, dim, layers, heads, vocab, seq):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, x):
        h = self.tok(x) + self.pos(torch.arange(x.shape[1], device=x.device))
        for blk in self.blocks:
            h = blk(h)
        # (batch x seq, vocab): flattened before the head, so the output is not a view
        # (FSDP2 warns about a root module returning one).
        return self.head(self.ln(h).reshape(-1, h.shape[-1]))


def make_model(args):
    torch.manual_seed(args.seed)
    dim, layers, heads, vocab, seq = SIZES[args.size]
    return Net(dim, layers, heads, vocab, seq)


def batch(args, step, rank, world):
    """This rank's (inputs, targets) of step `step`: a slice of one global batch."""
    _, _, _, vocab, seq = SIZES[args.size]
    seq = args.seq or seq
    perm = torch.randperm(vocab, generator=torch.Generator().manual_seed(args.seed + 1))
    g = torch.Generator().manual_seed(args.seed * 1000003 + step)
    x = torch.randint(0, vocab, (world * args.batch, seq), generator=g)
    y = perm[torch.cat([torch.zeros_like(x[:, :1]), x[:, :-1]], dim=1)]
    lo = rank * args.batch
    return x[lo:lo + args.batch], y[lo:lo + args.batch]


def loss_fn(logits, y):
    """Cross-entropy in float32 whatever dtype the logits come in."""
    return F.cross_entropy(logits.float(), y.reshape(-1))


def parser(description):
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--backend", default="hccl", help="process-group backend: hccl or gloo")
    ap.add_argument("--steps", type=int, default=20, help="optimizer steps (default 20)")
    ap.add_argument("--size", choices=sorted(SIZES), default="small",
                    help="model size: small (~0.1M parameters) or 25m (~25.8M)")
    ap.add_argument("--batch", type=int, default=4, help="sequences per rank and step (4)")
    ap.add_argument("--seq", type=int, default=0,
                    help="tokens per sequence, at most the size's (default: the size's, 16 or 64)")
    ap.add_argument("--optimizer", choices=["adam", "sgd"], default="adam",
                    help="adam (default), or sgd with momentum 0.9; Adam's step does not change "
                    "when every gradient is scaled by one factor, SGD's does")
    ap.add_argument("--lr", type=float, default=None,
                    help="learning rate (default 1e-2 for adam, 0.3 for sgd)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="", help="rank 0 writes the result here (JSON)")
    return ap


def check(ap, args):
    """Refuses (exit 2) flags the model cannot take."""
    if not 0 <= args.seq <= SIZES[args.size][4]:
        ap.error("--seq %d: the %s model takes 1 to %d tokens" % (args.seq, args.size,
                                                                   SIZES[args.size][4]))
    if args.steps < 1 or args.batch < 1:
        ap.error("--steps and --batch must be at least 1")
    return args


def optimizer(args, params):
    """The optimizer --optimizer names, over `params`."""
    if args.optimizer == "sgd":
        return torch.optim.SGD(params, lr=args.lr or 0.3, momentum=0.9)
    return torch.optim.Adam(params, lr=args.lr or 1e-2)


def deepspeed_engine(deepspeed, args, model, config):
    """deepspeed.initialize of model with this file's optimizer; config adds to (or overrides)
    what every client here sets: the batch, no accumulation, a torch optimizer allowed, quiet."""
    full = {
        "train_micro_batch_size_per_gpu": args.batch,
        "gradient_accumulation_steps": 1,
        "zero_allow_untested_optimizer": True,  # a torch optimizer, not DeepSpeed's fused ones
        "steps_per_print": 10 ** 9,
        "wall_clock_breakdown": False,
    }
    full.update(config)
    engine, _, _, _ = deepspeed.initialize(model=model,
                                           optimizer=optimizer(args, model.parameters()),
                                           config=full)
    return engine


def train_engine(engine, args, rank, world):
    """args.steps steps of a DeepSpeed engine on this file's data: (this rank's losses, Clock)."""
    clock = Clock()
    losses = []
    for step in range(args.steps):
        x, y = batch(args, step, rank, world)
        t0 = time.perf_counter()
        loss = loss_fn(engine(x), y)
        engine.backward(loss)
        engine.step()
        clock.step(t0)
        losses.append(loss.item())
    return losses, clock


def rank_env():
    """(rank, world size, local rank) from the variables npu-launch and torchrun set."""
    rank = int(os.environ.get("RANK", os.environ.get("RANK_ID", "0")))
    world = int(os.environ.get("WORLD_SIZE", os.environ.get("RANK_SIZE", "1")))
    local = int(os.environ.get("LOCAL_RANK", str(rank)))
    return rank, world, local


class Clock:
    """Wall time of each step; the step time reported is the median of all but the first
    (which also pays for lazy initialisation: FSDP2's first all-gathers, DeepSpeed's buffers)."""

    def __init__(self):
        self.times = []
        self.start = time.perf_counter()

    def step(self, t0):
        self.times.append(time.perf_counter() - t0)

    def median(self):
        rest = self.times[1:] or self.times
        return statistics.median(rest) if rest else float("nan")


def digest(tensors):
    """sha256 of the tensors' bytes, in order, and their float64 sum and sum of magnitudes."""
    h = hashlib.sha256()
    s = a = 0.0
    for t in tensors:
        t = t.detach().contiguous().cpu()
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
        s += float(t.double().sum())
        a += float(t.double().abs().sum())
    return h.hexdigest(), s, a


def report(args, dist, client, extra, local_losses, clock, params, hashes, elapsed):
    """Writes rank 0's JSON: the per-step losses averaged over the ranks (float32), step times,
    and every rank's parameter digest (gathered). Called by every rank."""
    world = dist.get_world_size()
    losses = torch.tensor(local_losses, dtype=torch.float32)
    dist.all_reduce(losses)
    losses = (losses / world).tolist()
    times = torch.tensor([clock.median(), elapsed], dtype=torch.float64)
    dist.all_reduce(times, op=dist.ReduceOp.MAX)
    if dist.get_rank() != 0:
        return
    out = {
        "client": client,
        "backend": dist.get_backend(),
        "world_size": world,
        "size": args.size,
        "params": params,
        "steps": args.steps,
        "optimizer": args.optimizer,
        "batch_per_rank": args.batch,
        "seq": args.seq or SIZES[args.size][4],
        "losses": losses,
        "step_time_s": float(times[0]),
        "elapsed_s": float(times[1]),
        "param_sha256": [h[0] for h in hashes],
        "param_sum": hashes[0][1],
        "param_abs_sum": hashes[0][2],
        "torch": torch.__version__,
    }
    out.update(extra)
    if all(math.isfinite(v) for v in losses):
        print("%s on %s, %d ranks: loss %.4f -> %.4f, %.1f ms a step" % (
            client, out["backend"], world, losses[0], losses[-1], 1e3 * out["step_time_s"]))
    if args.out:
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(out, f, indent=1, sort_keys=True)
        os.replace(tmp, args.out)
