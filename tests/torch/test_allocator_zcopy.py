#!/usr/bin/python3
"""test_allocator_zcopy.py - with torch_hccl's shared-memory allocator, plain torch tensors take
libhccl's zero-copy allreduce (hccl/src/algo/zcopy.c), on real ranks. Which algorithm ran is
read from each rank's HCCL_TRACE_FILE (docs/tracing.md: every call's "algo").

  allreduce   2 and 4 ranks: dist.all_reduce of a 4 MiB torch.ones, and of a 1 MiB slice at an
              offset inside a larger tensor, run zero-copy on every rank and are right
  off         TORCH_HCCL_ALLOCATOR=0: the same calls run the ring (and are right), so the
              trace tells the two apart
  ddp         2 ranks: DistributedDataParallel's gradient buckets (torch's own tensors) are
              reduced zero-copy, and the ranks' parameters stay equal
"""
import glob
import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dist_harness as H  # noqa: E402

MIB = 1 << 20


def allreduce_case():
    import torch
    import torch.distributed as dist
    rank, n = H.init()
    t = torch.ones(MIB)  # 4 MiB
    dist.all_reduce(t)
    assert bool(torch.eq(t, float(n)).all()), t[:4]
    big = torch.full((3 * MIB,), float(rank + 1))
    part = big[MIB + 5:2 * MIB + 5]  # an offset inside its block
    dist.all_reduce(part)
    assert bool(torch.eq(part, n * (n + 1) / 2).all()), part[:4]
    assert bool(torch.eq(big[:MIB + 5], rank + 1.0).all())
    assert bool(torch.eq(big[2 * MIB + 5:], rank + 1.0).all())
    dist.destroy_process_group()  # writes the trace


def ddp_case():
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    rank, n = H.init()
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                    torch.nn.Linear(512, 256)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(rank)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(16, 256, generator=g)).square().mean().backward()
        opt.step()
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    everyone = [torch.empty_like(flat) for _ in range(n)]
    dist.all_gather(everyone, flat)
    for r in range(n):
        assert torch.equal(everyone[r], flat), "rank %d's parameters differ from rank %d's" % (
            r, rank)
    del model, opt
    dist.destroy_process_group()


CASES = {"allreduce": allreduce_case, "ddp": ddp_case}


def allreduce_algos(paths):
    """{rank: [algo of each allreduce call]} from the ranks' trace files."""
    out = {}
    for p in paths:
        with open(p) as f:
            events = json.load(f)["traceEvents"]
        calls = [e for e in events if e.get("name") == "allreduce" and e.get("cat") == "collective"]
        assert all(e["args"]["result"] == "success" for e in calls), calls
        out[calls[0]["pid"] if calls else p] = [e["args"]["algo"] for e in calls]
    return out


class TestAllocatorZeroCopy(unittest.TestCase):
    def run_traced(self, case, n, env=None):
        d = tempfile.mkdtemp(prefix="torch_hccl_zcopy_")
        self.addCleanup(shutil.rmtree, d, True)
        e = {"HCCL_TRACE_FILE": os.path.join(d, "t.%r.json"), "TORCH_HCCL_ALLOCATOR": "",
             "TORCH_HCCL_ALLOCATOR_MIN_BYTES": "", "HCCL_ALGO": ""}
        e.update(env or {})
        r = H.run_ranks(__file__, case, n, timeout=180, env=e)
        self.assertEqual(r.codes, [0] * n, r.text())
        paths = sorted(glob.glob(os.path.join(d, "t.*.json")))
        self.assertEqual(len(paths), n, (paths, r.text()))
        return allreduce_algos(paths)

    def test_allreduce_zero_copy(self):
        for n in (2, 4):
            with self.subTest(ranks=n):
                algos = self.run_traced("allreduce", n)
                self.assertEqual(algos, {r: ["zero-copy", "zero-copy"] for r in range(n)})

    def test_allocator_off_runs_ring(self):
        algos = self.run_traced("allreduce", 2, env={"TORCH_HCCL_ALLOCATOR": "0"})
        self.assertEqual(algos, {r: ["ring", "ring"] for r in range(2)})

    def test_ddp_buckets_zero_copy(self):
        algos = self.run_traced("ddp", 2)
        for r in range(2):
            self.assertGreaterEqual(len(algos[r]), 3, algos)
            self.assertTrue(all(a == "zero-copy" for a in algos[r]), algos)


if __name__ == "__main__":
    H.worker_main(CASES)
    unittest.main(verbosity=2)
