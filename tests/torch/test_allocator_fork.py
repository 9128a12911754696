#!/usr/bin/python3
"""test_allocator_fork.py - the shared-memory CPU allocator across fork (torch_hccl/csrc/
allocator.cpp, hccl/src/base/mem_region.c): a child behaves as with torch's own allocator. Each case
runs in a fresh process of its own, under a deadline.

  os.fork      the child sees the inherited tensors' values; its writes to them do not reach
               the parent; it allocates from a new arena of its own (never inside one of the
               parent's) and counts the inherited blocks, which it can free; the parent's live
               tensors and its counters are untouched
  threads      fork while another thread allocates and frees: the child can still allocate
  DataLoader   num_workers=2 (fork) reading a TensorDataset the parent made: every batch is
               right; each worker writes an inherited tensor and allocates large tensors of
               its own, and the parent sees none of it while it allocates and frees meanwhile
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dist_harness as H  # noqa: E402

MIB = 1 << 20
ALLOCATOR_DEFAULTS = {"TORCH_HCCL_ALLOCATOR": "", "TORCH_HCCL_ALLOCATOR_MIN_BYTES": ""}


def in_any(ptr, arenas):
    return any(lo <= ptr < lo + n for lo, n in arenas)


def wait_child(pid, what):
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    assert code == 0, "%s: the child exited with %d" % (what, code)


def child_checks(held, parent_arenas):
    """In the forked child. Returns 0 when every check holds, else prints why and returns 1."""
    import torch
    import torch_hccl
    a, keep = held["a"], held["keep"]
    try:
        s = torch_hccl.memory_stats()
        assert s["inherited_blocks"] == 2 and s["arenas"] == 0 and s["allocated_bytes"] == 0, s
        assert float(a[0]) == 7.0 and bool(torch.eq(a, 7.0).all())
        a.fill_(-1.0)  # copy-on-write: the parent keeps its 7s
        b = torch.full((MIB,), 5.0)
        assert not in_any(b.data_ptr(), parent_arenas), "child block inside a parent arena"
        assert in_any(b.data_ptr(), torch_hccl._C._allocator_arenas())
        assert bool(torch.eq(keep, 3.0).all()) and bool(torch.eq(a, -1.0).all())
        del a, held["a"]  # the last references: the child frees an inherited block
        s = torch_hccl.memory_stats()
        assert s["inherited_blocks"] == 1 and s["arenas"] == 1 and s["allocations"] >= 1, s
        return 0
    except BaseException:  # noqa: B902
        import traceback
        traceback.print_exc()
        return 1


def fork_case():
    import torch
    import torch_hccl
    held = {"a": torch.full((MIB,), 7.0), "keep": torch.full((MIB // 4,), 3.0)}
    torch.ones(MIB // 2)  # freed at once: a free block the child must not hand out
    parent_arenas = torch_hccl._C._allocator_arenas()
    before = torch_hccl.memory_stats()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        code = child_checks(held, parent_arenas)
        sys.stdout.flush()
        os._exit(code)
    wait_child(pid, "os.fork")
    assert torch_hccl.memory_stats() == before  # the child's allocations are its own
    a = held["a"]
    assert bool(torch.eq(a, 7.0).all()), "the child's writes reached the parent"
    assert bool(torch.eq(held["keep"], 3.0).all())
    c = torch.full((MIB,), 9.0)  # the parent allocates as before
    assert in_any(c.data_ptr(), parent_arenas) and bool(torch.eq(a, 7.0).all())


def fork_threads_case():
    import threading
    import torch
    stop, warm = threading.Event(), threading.Event()

    def churn():
        n = 0
        while not stop.is_set():
            torch.empty(MIB // 4).fill_(1.0)
            n += 1
            if n == 20:
                warm.set()

    # Both threads run their torch calls once before the first fork: the first call of a torch
    # function registers its parser's destructor with atexit, under glibc's exit-functions lock,
    # which a fork at that moment leaves locked in the child for good (a glibc limitation, not
    # the allocator's; seen as a hang under load). The forks then meet the churn in steady state.
    float(torch.full((MIB // 4,), 2.0).sum())
    t = threading.Thread(target=churn)
    t.start()
    warm.wait(60)
    try:
        for _ in range(20):
            pid = os.fork()
            if pid == 0:
                ok = float(torch.full((MIB // 4,), 2.0).sum()) == 2.0 * (MIB // 4)
                os._exit(0 if ok else 1)
            wait_child(pid, "fork while another thread allocates")
    finally:
        stop.set()
        t.join()


def dataloader_case():
    import torch
    import torch_hccl
    from torch.utils.data import DataLoader, TensorDataset
    n, d, batch = 4096, 64, 64
    x = torch.arange(n * d, dtype=torch.float32).reshape(n, d)  # 1 MiB: in an arena
    y = torch.arange(n)
    scratch = torch.zeros(MIB // 4)
    parent_arenas = torch_hccl._C._allocator_arenas()
    assert in_any(x.data_ptr(), parent_arenas) and in_any(scratch.data_ptr(), parent_arenas)

    def worker_init(wid):
        scratch.fill_(wid + 1.0)  # an inherited tensor, written in the worker
        mine = [torch.full((MIB // 2,), float(wid)) for _ in range(3)]
        for t in mine:
            if in_any(t.data_ptr(), parent_arenas):
                raise AssertionError("worker %d got a block inside a parent arena" % wid)
        s = torch_hccl.memory_stats()
        if s["arenas"] != 1 or s["inherited_blocks"] != 2:  # x and scratch (y is small)
            raise AssertionError("worker %d: %s" % (wid, s))

    loader = DataLoader(TensorDataset(x, y), batch_size=batch, num_workers=2,
                        worker_init_fn=worker_init, multiprocessing_context="fork", timeout=60)
    seen = 0
    for epoch in range(2):
        for i, (bx, by) in enumerate(loader):
            assert torch.equal(bx, x[i * batch:(i + 1) * batch]), "epoch %d batch %d" % (epoch, i)
            assert torch.equal(by, y[i * batch:(i + 1) * batch])
            junk = torch.full((MIB // 4 + i,), -5.0)  # the parent allocates and frees meanwhile
            del junk
            seen += 1
    assert seen == 2 * n // batch, seen
    assert bool(torch.eq(scratch, 0.0).all()), "a worker's writes reached the parent"
    assert torch.equal(x, torch.arange(n * d, dtype=torch.float32).reshape(n, d))


CASES = {"fork": fork_case, "fork_threads": fork_threads_case, "dataloader": dataloader_case}


class TestAllocatorFork(unittest.TestCase):
    def run_case(self, case):
        r = H.run_ranks(__file__, case, 1, timeout=180, env=ALLOCATOR_DEFAULTS)
        self.assertEqual(r.codes, [0], r.text())

    def test_os_fork(self):
        self.run_case("fork")

    def test_fork_while_allocating(self):
        self.run_case("fork_threads")

    def test_dataloader(self):
        self.run_case("dataloader")


if __name__ == "__main__":
    H.worker_main(CASES)
    unittest.main(verbosity=2)
