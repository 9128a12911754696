#!/usr/bin/python3
"""test_ddp.py - torch's own DistributedDataParallel on backend hccl trains a small model to
the same parameters as on gloo, in the same processes and from the same start: plain, with
find_unused_parameters, and with the fp16 compression communication hook (futures). Its
tensors are all below the shared-memory allocator's threshold, so this is DDP over the ring
(checked at the end of each rank); DDP over the zero-copy allreduce is test_allocator_zcopy's.
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dist_harness as H  # noqa: E402


def ddp_case():
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP
    rank, n = H.init()
    gloo = dist.new_group(backend="gloo")
    torch.set_num_threads(1)

    def make():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(32, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 64),
                             nn.ReLU(), nn.Linear(64, 10))

    def train(group, variant):
        model = make()
        if rank != 0:  # DDP must broadcast rank 0's start to everyone
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(1.0)
        ddp = DDP(model, process_group=group, find_unused_parameters=(variant == "unused"))
        if variant == "fp16":
            ddp.register_comm_hook(group, default_hooks.fp16_compress_hook)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
        per = 32 // n
        for step in range(8):
            g = torch.Generator().manual_seed(step)
            x = torch.randn(32, 32, generator=g)
            y = torch.randint(0, 10, (32,), generator=g)
            xs, ys = x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1) * per]
            opt.zero_grad()
            loss = nn.functional.cross_entropy(ddp(xs), ys)
            loss.backward()
            opt.step()
        return [p.detach().clone() for p in model.parameters()] + \
               [b.detach().clone() for b in model.buffers()]

    for variant in ("plain", "unused", "fp16"):
        a = train(None, variant)  # default group: hccl
        b = train(gloo, variant)
        tol = 1e-3 if variant == "fp16" else 1e-5
        worst = 0.0
        for x, y in zip(a, b):
            if x.is_floating_point():
                worst = max(worst, ((x - y).abs() / (y.abs() + 1e-3)).max().item())
                assert torch.allclose(x, y, rtol=tol, atol=tol), (variant, (x - y).abs().max())
            else:
                assert torch.equal(x, y), (variant, x, y)
        print("rank %d %s: hccl and gloo agree (worst relative difference %.2e)" % (rank, variant, worst))
    # Every tensor here is below TORCH_HCCL_ALLOCATOR_MIN_BYTES (64 KiB; the model's 7050
    # parameters are 28 KB, so is a bucket): torch's allocator serves them all, and hccl's
    # calls take the ring, as with TORCH_HCCL_ALLOCATOR=0. That is why no twin of this test
    # runs with the allocator off; DDP's buckets zero-copy are test_allocator_zcopy's.
    import torch_hccl
    stats = torch_hccl.memory_stats()
    assert stats["allocations"] == 0, ("the shared-memory allocator served this test (a twin "
                                       "with TORCH_HCCL_ALLOCATOR=0 would take another path)",
                                       stats)
    dist.destroy_process_group()
    print("rank %d ok" % rank)


CASES = {"ddp": ddp_case}


class TestDDP(unittest.TestCase):
    def test_ddp_matches_gloo(self):
        for n in (2, 4, 8):
            with self.subTest(n=n):
                res = H.run_ranks(__file__, "ddp", n, timeout=300)
                self.assertEqual(res.codes, [0] * n, res.text())
                print("\n".join(l for l in res.outputs[0].splitlines() if "agree" in l))


if __name__ == "__main__":
    H.worker_main(CASES)
    unittest.main(verbosity=2)
