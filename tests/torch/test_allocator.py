#!/usr/bin/python3
"""test_allocator.py - torch_hccl's shared-memory CPU allocator (torch_hccl/csrc/allocator.cpp)
in one process. Each case runs in a fresh process of its own, under a deadline.

  rss flat     100,000 allocate/free cycles of mixed sizes (64 KiB - 4 MiB, every page
               written, some below the threshold), 8 alive at a time: after a warm-up the
               resident size grows by less than 4 MiB and no arena is added
  threads      4 threads allocate, fill, check and free (a third of them freed by another
               thread) while torch runs without the GIL; every value checked, the counts
               balance at the end
  stats        memory_stats() after known requests: rounding to 512 bytes, peak, delegated
               requests, arenas and reserved bytes as _allocator_arenas() lists them,
               alignment; empty_cache() gives the freed pages back (resident size drops)
               and the memory is usable afterwards
  min bytes    TORCH_HCCL_ALLOCATOR_MIN_BYTES=1M delegates a 512 KiB tensor, serves 1 MiB
  fallback     no arena can be made (no file descriptor left): large tensors come from torch's
               allocator, counted as fallbacks, with one warning and no second attempt
  off          TORCH_HCCL_ALLOCATOR=0: torch's allocator stays, nothing is counted; then, in
               the same process, every accepted spelling of the settings read as meant and
               each malformed one refused with a ValueError naming the variable, the value
               and the rule (settings.cpp's reader, which the import calls)
  settings     a malformed spelling through the import itself fails it with that ValueError
               (an accepted one: unknown's first import)
  unknown      a misspelled TORCH_HCCL_* name warns (did you mean ...?) and is ignored, the
               known ones still read
"""
import os
import random
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dist_harness as H  # noqa: E402

KIB, MIB = 1 << 10, 1 << 20
# The settings' defaults, whatever the environment the tests run in says (an empty value is
# the same as unset).
DEFAULTS = {"TORCH_HCCL_ALLOCATOR": "", "TORCH_HCCL_ALLOCATOR_MIN_BYTES": ""}


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def in_arena(ptr):
    import torch_hccl
    return any(lo <= ptr < lo + n for lo, n in torch_hccl._C._allocator_arenas())


def rss_flat_case():
    import torch
    import torch_hccl
    rng = random.Random(18)
    # float32 element counts: log-uniform from 64 KiB to 4 MiB, and every tenth one small.
    sizes = [int(2 ** rng.uniform(16, 22)) // 4 if i % 10 else rng.randrange(1, 4096)
             for i in range(4096)]
    live = [None] * 8

    def cycles(n, start):
        for i in range(start, start + n):
            t = torch.empty(sizes[i % len(sizes)])
            t[::1024].fill_(1.0)  # one write per 4 KiB page: every page becomes resident
            live[i % len(live)] = t

    cycles(10000, 0)
    s0, r0 = torch_hccl.memory_stats(), rss_bytes()
    cycles(100000, 10000)
    s1, r1 = torch_hccl.memory_stats(), rss_bytes()
    served = s1["allocations"] - s0["allocations"]
    print("rss after warm-up %.1f MiB, after 100000 more cycles %.1f MiB (growth %.2f MiB); "
          "arenas %d; served %d, delegated %d" % (r0 / MIB, r1 / MIB, (r1 - r0) / MIB,
                                                  s1["arenas"], served,
                                                  s1["delegated"] - s0["delegated"]))
    assert served >= 85000, "only %d of 100000 requests were served by the allocator" % served
    assert s1["arenas"] == s0["arenas"] and s1["reserved_bytes"] == s0["reserved_bytes"], (s0, s1)
    assert r1 - r0 < 4 * MIB, "resident size grew by %d bytes" % (r1 - r0)


def threads_case():
    import queue
    import threading
    import torch
    import torch_hccl
    nthreads, iters = 4, 1500
    s0 = torch_hccl.memory_stats()
    handoff = queue.Queue()
    errors = []

    def check(t, v, who):
        if not bool(torch.eq(t, v).all()):
            errors.append("%s: tensor of %d elements filled with %r holds %r" % (
                who, t.numel(), v, t[torch.ne(t, v)][:4].tolist()))

    def work(tid):
        rng = random.Random(tid)
        mine = []
        try:
            for i in range(iters):
                v = float(tid * 100000 + i)
                t = torch.full((rng.randrange(16 * KIB, 256 * KIB),), v)  # 64 KiB - 1 MiB
                mine.append((t, v))
                if i % 3 == 0:
                    handoff.put(mine.pop())
                if len(mine) > 4:
                    check(*mine.pop(0), "thread %d" % tid)
                while True:
                    try:
                        t2, v2 = handoff.get_nowait()  # another thread's tensor, freed here
                    except queue.Empty:
                        break
                    check(t2, v2, "thread %d (handed over)" % tid)
            for t, v in mine:
                check(t, v, "thread %d" % tid)
        except BaseException as e:  # noqa: B902
            errors.append("thread %d: %r" % (tid, e))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(nthreads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    while not handoff.empty():
        check(*handoff.get(), "main")
    assert not errors, "\n".join(errors[:10])
    s1 = torch_hccl.memory_stats()
    assert s1["allocations"] - s0["allocations"] >= nthreads * iters, (s0, s1)
    assert s1["allocations"] - s0["allocations"] == s1["frees"] - s0["frees"], (s0, s1)
    assert s1["allocated_bytes"] == s0["allocated_bytes"], (s0, s1)
    assert s1["cached_bytes"] == s1["reserved_bytes"] - s1["allocated_bytes"], s1


def stats_case():
    import torch
    import torch_hccl
    s0 = torch_hccl.memory_stats()
    assert s0["enabled"] and s0["min_bytes"] == 64 * KIB, s0
    assert torch_hccl._C._allocator_is_current()
    a = torch.empty(100000)  # 400000 bytes: a block of 400384 (512-byte multiples)
    b = torch.empty(10)  # below the threshold: torch's allocator
    s1 = torch_hccl.memory_stats()
    assert s1["allocated_bytes"] - s0["allocated_bytes"] == 400384, (s0, s1)
    assert s1["requested_bytes"] - s0["requested_bytes"] == 400000, (s0, s1)
    assert s1["allocations"] - s0["allocations"] == 1, (s0, s1)
    assert s1["delegated"] - s0["delegated"] >= 1, (s0, s1)
    assert in_arena(a.data_ptr()) and not in_arena(b.data_ptr())
    assert a.data_ptr() % 512 == 0
    arenas = torch_hccl._C._allocator_arenas()
    assert s1["arenas"] == len(arenas) >= 1, (s1, arenas)
    assert s1["reserved_bytes"] == sum(n for _, n in arenas), (s1, arenas)
    assert s1["cached_bytes"] == s1["reserved_bytes"] - s1["allocated_bytes"], s1
    assert 0 < s1["largest_free_bytes"] <= s1["cached_bytes"], s1
    c = torch.empty(3 * MIB // 4)
    peak = torch_hccl.memory_stats()["peak_allocated_bytes"]
    del a, c
    s2 = torch_hccl.memory_stats()
    assert s2["allocated_bytes"] == s0["allocated_bytes"], (s0, s2)
    assert s2["peak_allocated_bytes"] == peak >= s0["allocated_bytes"] + 400384 + 3 * MIB, s2
    assert s2["frees"] - s1["frees"] == 2, (s1, s2)

    # empty_cache: 64 MiB written, freed (still resident, cached), then given back.
    big = torch.ones(64 * MIB // 4)
    del big
    r0 = rss_bytes()
    given = torch_hccl.empty_cache()
    r1 = rss_bytes()
    print("empty_cache gave back %d bytes; rss %.1f -> %.1f MiB" % (given, r0 / MIB, r1 / MIB))
    assert given >= 64 * MIB, given
    assert r0 - r1 >= 60 * MIB, (r0, r1)
    assert torch_hccl.memory_stats()["released_bytes"] - s2["released_bytes"] == given
    assert torch_hccl.empty_cache() == 0  # nothing resident is free any more
    again = torch.full((64 * MIB // 4,), 2.0)
    assert float(again.sum()) == 2.0 * again.numel()
    assert torch_hccl.memory_stats()["arenas"] == s2["arenas"]


def min_bytes_case():
    import torch
    import torch_hccl
    assert torch_hccl.memory_stats()["min_bytes"] == MIB
    small, large = torch.empty(128 * KIB), torch.empty(256 * KIB)  # 512 KiB, 1 MiB
    assert not in_arena(small.data_ptr()) and in_arena(large.data_ptr())


def fallback_case():
    import resource
    import warnings
    import torch
    import torch_hccl
    torch.ones(8).add_(1)  # torch's lazy start-up (cpuinfo reads /proc) before the limit
    nfd = len(os.listdir("/proc/self/fd"))  # one of them the listing's own, closed again
    resource.setrlimit(resource.RLIMIT_NOFILE, (nfd - 1, resource.getrlimit(
        resource.RLIMIT_NOFILE)[1]))  # memfd_create fails from here on
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ts = [torch.full((MIB,), float(k)) for k in range(3)]
    s = torch_hccl.memory_stats()
    assert s["fallbacks"] == 3 and s["allocations"] == 0 and s["arenas"] == 0, s
    assert [float(t.sum()) for t in ts] == [0.0, MIB, 2.0 * MIB]
    assert not any(in_arena(t.data_ptr()) for t in ts)
    said = [str(w.message) for w in caught if "cannot make a shared arena" in str(w.message)]
    assert len(said) == 1 and "Too many open files" in said[0], [str(w.message) for w in caught]


def off_case():
    import torch
    import torch_hccl
    t = torch.ones(MIB)
    s = torch_hccl.memory_stats()
    assert not torch_hccl._C._allocator_is_current()
    assert not s["enabled"] and s["allocations"] == 0 and s["arenas"] == 0, s
    assert torch_hccl._C._allocator_arenas() == [] and torch_hccl.empty_cache() == 0
    assert float(t.sum()) == MIB
    settings_table(torch_hccl)


# The settings' spellings: (variable, value, (enabled, min_bytes) read) accepted; (variable,
# value, part of the rule) refused.
GOOD = [("TORCH_HCCL_ALLOCATOR", "1", (True, 65536)), ("TORCH_HCCL_ALLOCATOR", "", (True, 65536)),
        ("TORCH_HCCL_ALLOCATOR", "0", (False, 65536)),
        ("TORCH_HCCL_ALLOCATOR_MIN_BYTES", "0", (True, 0)),
        ("TORCH_HCCL_ALLOCATOR_MIN_BYTES", "1000", (True, 1000)),
        ("TORCH_HCCL_ALLOCATOR_MIN_BYTES", "256k", (True, 262144)),
        ("TORCH_HCCL_ALLOCATOR_MIN_BYTES", "2G", (True, 2147483648))]
BAD = [("TORCH_HCCL_ALLOCATOR", "yes", "it must be 0 (torch's own CPU allocator) or 1"),
       ("TORCH_HCCL_ALLOCATOR", "2", "it must be 0"),
       ("TORCH_HCCL_ALLOCATOR_MIN_BYTES", "-1", "whole number of bytes from 0 to"),
       ("TORCH_HCCL_ALLOCATOR_MIN_BYTES", "64KB", "K, M or G suffix"),
       ("TORCH_HCCL_ALLOCATOR_MIN_BYTES", "2T", "from 0 to 1099511627776"),
       ("TORCH_HCCL_ALLOCATOR_MIN_BYTES", "99999999999999999999999", "from 0 to")]


def settings_table(torch_hccl):
    """Every spelling of GOOD and BAD through the reader the import calls
    (_C._allocator_settings, settings.cpp's read_allocator_settings), in this one process:
    a process importing torch for each took 12 starts (TestAllocator.test_settings imports
    with one of each, and test_min_bytes and test_off with 1M and 0)."""
    for var, value, want in GOOD:
        os.environ.update(DEFAULTS, **{var: value})
        got = torch_hccl._C._allocator_settings()
        assert got == want, (var, value, got, want)
    for var, value, rule in BAD:
        os.environ.update(DEFAULTS, **{var: value})
        try:
            got = torch_hccl._C._allocator_settings()
            raise AssertionError("%s=%r accepted: %s" % (var, value, got))
        except ValueError as e:
            msg = str(e)
        assert msg.startswith('%s="%s": ' % (var, value)) and rule in msg, (var, value, msg)
    os.environ.update(DEFAULTS)


CASES = {"rss_flat": rss_flat_case, "threads": threads_case, "stats": stats_case,
         "min_bytes": min_bytes_case, "fallback": fallback_case, "off": off_case}


class TestAllocator(unittest.TestCase):
    def run_case(self, case, env=None, timeout=180):
        r = H.run_ranks(__file__, case, 1, timeout=timeout, env=dict(DEFAULTS, **(env or {})))
        self.assertEqual(r.codes, [0], r.text())
        if r.outputs[0].strip():
            print(r.outputs[0].strip())

    def test_rss_flat(self):
        self.run_case("rss_flat", timeout=300)

    def test_threads(self):
        self.run_case("threads")

    def test_stats(self):
        self.run_case("stats")

    def test_min_bytes(self):
        self.run_case("min_bytes", env={"TORCH_HCCL_ALLOCATOR_MIN_BYTES": "1M"})

    def test_fallback(self):
        self.run_case("fallback")

    def test_off(self):
        self.run_case("off", env={"TORCH_HCCL_ALLOCATOR": "0"})

    def import_with(self, **env):
        e = dict(os.environ, PYTHONPATH=H.BUILD_PYTHON, **dict(DEFAULTS, **env))
        return subprocess.run([sys.executable, "-c", "import torch_hccl as t; "
                               "s = t.memory_stats(); print(s['enabled'], s['min_bytes'])"],
                              env=e, text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=120)

    def test_settings(self):
        # A refused spelling through the import itself (a malformed one fails it with the
        # ValueError); an accepted one in test_unknown_names' first import, and 0 and 1M in
        # test_off and test_min_bytes; every spelling of GOOD and BAD through the same reader
        # in test_off's process (settings_table).
        var, value, rule = BAD[0]
        p = self.import_with(**{var: value})
        self.assertNotEqual(p.returncode, 0, p.stdout)
        self.assertIn('ValueError: %s="%s": ' % (var, value), p.stdout)
        self.assertIn(rule, p.stdout)

    def test_unknown_names(self):
        # A misspelled TORCH_HCCL_* name warns (naming the nearest one) and is ignored, as
        # libhccl does for HCCL_*; HCCL_LOG_LEVEL=error silences it.
        # With a good spelling of a known one, which the import reads (test_settings').
        p = self.import_with(TORCH_HCCL_ALLOCATR="0", TORCH_HCCL_ALLOCATOR_MIN_BYTES="256k")
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertIn("WARN: TORCH_HCCL_ALLOCATR is not a setting of torch_hccl (did you mean "
                      "TORCH_HCCL_ALLOCATOR?); it is ignored", p.stdout)
        self.assertTrue(p.stdout.rstrip().endswith("True 262144"), p.stdout)  # still on
        p = self.import_with(TORCH_HCCL_FROBNICATE="1")
        self.assertIn("WARN: TORCH_HCCL_FROBNICATE is not a setting of torch_hccl; it is ignored",
                      p.stdout)
        p = self.import_with(TORCH_HCCL_ALLOCATOR_MIN_BYTE="4K", HCCL_LOG_LEVEL="error")
        self.assertEqual(p.stdout.strip(), "True 65536")


if __name__ == "__main__":
    H.worker_main(CASES)
    unittest.main(verbosity=2)
