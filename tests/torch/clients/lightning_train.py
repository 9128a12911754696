#!/usr/bin/env python3
"""lightning_train.py - a small Lightning training job on a chosen process-group backend, the
way a Lightning user writes one: Trainer(accelerator="cpu", devices=N,
strategy=DDPStrategy(process_group_backend=...)), metrics logged with sync_dist=True, a
torchmetrics Accuracy synced across ranks, EarlyStopping and ModelCheckpoint.

    python3 lightning_train.py --backend hccl --devices 4 --out result.json

Lightning starts the other ranks itself (it runs this script again with its rank variables).
Rank 0 writes what the run ended with: the epoch it stopped at, the early-stopping and
checkpoint callbacks' state, the final logged metrics and a checksum of the parameters.
"""
import argparse
import json
import os
import sys
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

import lightning as L
import torchmetrics
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint
from lightning.pytorch.strategies import DDPStrategy

import torch_hccl  # noqa: F401  registers "hccl" (in the ranks Lightning starts too)


def data(n, seed):
    """Four Gaussian blobs in 16 dimensions with some label noise: learnable, not trivially."""
    centers = torch.randn(4, 16, generator=torch.Generator().manual_seed(0)) * 0.6
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 4, (n,), generator=g)
    x = centers[y] + torch.randn(n, 16, generator=g) * 1.6
    return torch.utils.data.TensorDataset(x, y)


class Net(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
        self.val_acc = torchmetrics.classification.MulticlassAccuracy(num_classes=4)

    def training_step(self, batch, _):
        x, y = batch
        loss = F.cross_entropy(self.body(x), y)
        self.log("train_loss", loss, sync_dist=True, on_epoch=True, on_step=False)
        return loss

    def validation_step(self, batch, _):
        x, y = batch
        logits = self.body(x)
        self.log("val_loss", F.cross_entropy(logits, y), sync_dist=True)
        self.val_acc(logits, y)
        self.log("val_acc", self.val_acc, on_epoch=True)  # torchmetrics syncs its states

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="hccl")
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument("--max-epochs", type=int, default=30)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dir", default="")
    args = ap.parse_args()
    torch.set_num_threads(1)
    L.seed_everything(7, workers=True, verbose=False)
    root = args.dir or tempfile.mkdtemp(prefix="lightning_%s_" % args.backend)
    train = torch.utils.data.DataLoader(data(2048, 1), batch_size=32, shuffle=True)
    val = torch.utils.data.DataLoader(data(512, 2), batch_size=64)
    stop = EarlyStopping(monitor="val_loss", min_delta=0.002, patience=2, mode="min")
    ckpt = ModelCheckpoint(dirpath=os.path.join(root, "ckpt"), monitor="val_acc", mode="max")
    trainer = L.Trainer(accelerator="cpu", devices=args.devices, max_epochs=args.max_epochs,
                        strategy=DDPStrategy(process_group_backend=args.backend),
                        callbacks=[stop, ckpt], logger=False, enable_progress_bar=False,
                        enable_model_summary=False, deterministic=True,
                        default_root_dir=root)
    model = Net()
    trainer.fit(model, train, val)
    import torch.distributed as dist
    backend = dist.get_backend() if dist.is_initialized() else "none"
    if trainer.global_rank == 0:
        params = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        out = {
            "backend": backend,
            "world_size": trainer.world_size,
            "stopped_epoch": stop.stopped_epoch,
            "epochs_run": trainer.current_epoch,
            "best_score": float(ckpt.best_model_score),
            "best_model": os.path.basename(ckpt.best_model_path),
            "metrics": {k: float(v) for k, v in sorted(trainer.callback_metrics.items())},
            "param_sum": float(params.double().sum()),
            "param_abs_sum": float(params.double().abs().sum()),
        }
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1, sort_keys=True)
        print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    sys.exit(main())
