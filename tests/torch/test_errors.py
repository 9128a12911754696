#!/usr/bin/python3
"""test_errors.py - what goes wrong becomes a Python exception with libhccl's reason, on every
rank, within a bound, never a hang: unsupported dtypes and ops, mismatched calls, a peer that
misses a call (the group's timeout), a peer that is killed.
"""
import datetime
import os
import re
import signal
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dist_harness as H  # noqa: E402


def expect_error(fn, *words):
    try:
        fn()
    except RuntimeError as e:
        msg = str(e)
        for w in words:
            assert w in msg, "expected %r in: %s" % (w, msg)
        return msg
    raise AssertionError("no RuntimeError; expected one mentioning %s" % (words,))


def bad_args_case():
    import torch.distributed as dist
    rank, n = H.init()
    bad_args_checks(rank, n)
    dist.destroy_process_group()
    print("rank %d ok" % rank)


def bad_args_checks(rank, n):
    """Refused calls, each naming its value and the rule; then the group still works."""
    import torch
    import torch.distributed as dist
    from torch.distributed import ReduceOp
    # torch 2.x's float8 types are no type hccl reduces (torch 1.13 has no dtype left that hccl
    # does not reduce: test_ops' dtype sweep): refused by name, by each reduction.
    dt = getattr(torch, "float8_e4m3fn", None)
    if dt is not None:
        print(expect_error(lambda: dist.all_reduce(torch.zeros(4, dtype=dt)),
                           "torch.float8_e4m3fn", "is not supported for reductions",
                           "torch.bfloat16"))
        expect_error(lambda: dist.reduce(torch.zeros(4, dtype=dt), 0), "torch.float8_e4m3fn")
        expect_error(lambda: dist.reduce_scatter_tensor(torch.zeros(1, dtype=dt),
                                                        torch.zeros(n, dtype=dt)),
                     "torch.float8_e4m3fn")
    # (complex PRODUCT, MIN and MAX torch refuses itself, before the backend sees them)
    for op in ("BAND", "BOR", "BXOR"):
        print(expect_error(lambda: dist.all_reduce(torch.ones(4), op=getattr(ReduceOp, op)), op,
                           "torch.float32", "integer types"))
    print(expect_error(lambda: dist.all_reduce(torch.ones(4, dtype=torch.bool), op=ReduceOp.AVG),
                       "AVG", "torch.bool"))
    expect_error(lambda: dist.all_gather_into_tensor(torch.ones(3), torch.ones(2)), "elements")
    expect_error(lambda: dist.all_to_all_single(torch.ones(4), torch.ones(4), [1] * (n + 1),
                                                [1] * (n + 1)), "split sizes")
    # Nothing was started by a refused call: the group still works, on every rank.
    t = torch.ones(3)
    dist.all_reduce(t)
    assert t.tolist() == [float(n)] * 3
    print("rank %d bad arguments refused" % rank)


# The mismatch message, every rank's call as its user made it: "rank A called <call A> as call K
# while rank B called <call B> as call K (they differ in <fields>); every rank must ...".
MISMATCH = re.compile(r"mismatched collectives: rank (\d+) called (.+?) as call (\d+) while rank "
                      r"(\d+) called (.+?) as call (\d+) \(they differ in ([a-z ,]+)\); every "
                      r"rank must make the same collective calls, with the same arguments, in "
                      r"the same order")


def mismatch_calls(msg):
    """{rank: its call as named}, and the fields named as differing."""
    m = MISMATCH.search(msg)
    assert m, "no mismatch message in: %s" % msg
    assert m.group(3) == m.group(6), msg
    return {int(m.group(1)): m.group(2), int(m.group(4)): m.group(5)}, m.group(7)


def mismatch_case():
    import torch
    import torch.distributed as dist
    rank, n = H.init()
    t = torch.ones(1000 * (rank + 1))
    msg = expect_error(lambda: dist.all_reduce(t), "hccl allreduce failed")
    print("rank %d: %s" % (rank, msg))
    # The fingerprint names both calls as the user made them and the one field that differs,
    # on every rank.
    calls, fields = mismatch_calls(msg)
    for r, call in calls.items():
        assert call == "allreduce (count %d, torch.float32, sum)" % (1000 * (r + 1)), msg
    assert fields == "count", msg
    # The communicator is broken now: the next call says so at once.
    expect_error(lambda: dist.all_reduce(torch.ones(2)), "failed earlier")
    # A dtype that differs between ranks is named as one (float32 against float64).
    g = dist.new_group(list(range(n)))
    t = torch.ones(10, dtype=torch.float64 if rank == n - 1 else torch.float32)
    msg = expect_error(lambda: dist.all_reduce(t, group=g), "hccl allreduce failed")
    calls, fields = mismatch_calls(msg)
    for r, call in calls.items():
        dt = "torch.float64" if r == n - 1 else "torch.float32"
        assert call == "allreduce (count 10, %s, sum)" % dt, msg
    assert fields == "data type", msg
    # Another collective on one rank, in a fresh group: a broadcast of 1000 floats (which goes
    # to the library as 4000 bytes) against an all_reduce of 1000 floats differs only as a
    # collective, and is named in floats.
    g = dist.new_group(list(range(n)))
    t = torch.ones(1000)
    if rank == n - 1:
        msg = expect_error(lambda: dist.broadcast(t, src=0, group=g), "hccl broadcast failed")
    else:
        msg = expect_error(lambda: dist.all_reduce(t, group=g), "hccl allreduce failed")
    print("rank %d: %s" % (rank, msg))
    calls, fields = mismatch_calls(msg)
    assert n - 1 in calls, msg
    for r, call in calls.items():
        want = ("broadcast (count 1000, torch.float32, root 0)" if r == n - 1
                else "allreduce (count 1000, torch.float32, sum)")
        assert call == want, msg
    assert fields == "collective", msg
    print("rank %d ok" % rank)


def timeout_case():
    import torch
    import torch.distributed as dist
    rank, n = H.init(timeout=datetime.timedelta(seconds=3))
    if rank == 1:
        time.sleep(8)  # misses the call for longer than the group's timeout
    start = time.monotonic()
    try:
        dist.all_reduce(torch.ones(10))
        raise AssertionError("rank %d: no error" % rank)
    except RuntimeError as e:
        msg = str(e)
        # torch 2.x: the type torch's own backends raise, which code catching them catches.
        if hasattr(dist, "DistBackendError"):
            assert isinstance(e, dist.DistBackendError), type(e)
    took = time.monotonic() - start
    print("rank %d: after %.1f s: %s" % (rank, took, msg))
    assert "hccl allreduce" in msg, msg
    if rank == 0:
        # torch's tests and users match " (Timed out|closed|timeout) " in a timeout's message.
        assert re.search(" (Timed out|closed|timeout) ", msg), msg
        # The timeout is named as the user set it, not as the library's config field.
        assert ("allreduce timed out after 3 s waiting for rank 1 (timeout= of "
                "init_process_group / new_group); rank 1 is behind" in msg), msg
        assert "execTimeoutMs" not in msg, msg
        assert 2.5 < took < 7, took
    else:
        assert took < 3, took  # the peer's failure is already known
    print("rank %d ok" % rank)


def killed_case():
    import torch
    import torch.distributed as dist
    rank, n = H.init()
    t = torch.ones(1 << 18)
    dist.all_reduce(t)
    dist.barrier()
    if rank == 2:
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGKILL)
    start = time.monotonic()
    try:
        for _ in range(100000):
            w = dist.all_reduce(t, async_op=True)
            w.get_future().wait()  # the error comes through the future too
        raise AssertionError("rank %d: no error after rank 2 died" % rank)
    except RuntimeError as e:
        took = time.monotonic() - start
        print("rank %d: after %.2f s: %s" % (rank, took, e))
        assert "rank 2" in str(e), str(e)
        assert took < 10, took
    print("rank %d ok" % rank)


def monitored_case():
    """The group's monitored_barrier (gloo's contract: rank 0 names who did not come): all
    ranks pass one; then the last rank stays away and rank 0 names it, the others hear that
    rank 0 did not answer, each within the barrier's timeout. bad_args_case's checks come
    first, in the same group (one start of n ranks for both)."""
    import torch
    import torch.distributed as dist
    rank, n = H.init()
    bad_args_checks(rank, n)
    pg = dist.distributed_c10d._get_default_group()
    pg.monitored_barrier(datetime.timedelta(seconds=10))
    t = torch.ones(2)
    dist.all_reduce(t)  # the group still works after it
    assert t.tolist() == [float(n)] * 2
    if rank == n - 1:
        time.sleep(4)
        print("rank %d ok (stayed away)" % rank)
        return
    start = time.monotonic()
    try:
        pg.monitored_barrier(datetime.timedelta(seconds=1.5), wait_all_ranks=True)
        raise AssertionError("rank %d: no error" % rank)
    except RuntimeError as e:
        took, msg = time.monotonic() - start, str(e)
    print("rank %d: after %.1f s: %s" % (rank, took, msg))
    if rank == 0:
        assert "Rank %d failed to pass monitoredBarrier in 1500 ms" % (n - 1) in msg, msg
    else:
        assert "Rank 0 did not answer" in msg, msg
    assert 1.4 < took < 4, took
    print("rank %d ok" % rank)


CASES = {"monitored": monitored_case, "bad_args": bad_args_case, "mismatch": mismatch_case, "timeout": timeout_case,
         "killed": killed_case}


class TestErrors(unittest.TestCase):
    def test_bad_arguments_raise_on_every_rank(self):
        # at 2 and 4 ranks in test_monitored_barrier_names_the_missing_rank's groups
        res = H.run_ranks(__file__, "bad_args", 1, timeout=120)
        self.assertEqual(res.codes, [0], res.text())
        self.assertIn("rank 0 bad arguments refused", res.outputs[0])

    def test_monitored_barrier_names_the_missing_rank(self):
        for n in (2, 4):
            res = H.run_ranks(__file__, "monitored", n, timeout=60)
            self.assertEqual(res.codes, [0] * n, res.text())
            for r in range(n):
                self.assertIn("rank %d bad arguments refused" % r, res.outputs[r])

    def test_mismatched_counts(self):
        res = H.run_ranks(__file__, "mismatch", 2, timeout=60, env={"HCCL_EXEC_TIMEOUT": "20"})
        self.assertEqual(res.codes, [0, 0], res.text())

    def test_missed_call_times_out(self):
        res = H.run_ranks(__file__, "timeout", 2, timeout=60)
        self.assertEqual(res.codes, [0, 0], res.text())

    def test_killed_rank(self):
        res = H.run_ranks(__file__, "killed", 4, timeout=90)
        self.assertEqual(res.codes[2], -signal.SIGKILL, res.text())
        self.assertEqual([res.codes[r] for r in (0, 1, 3)], [0, 0, 0], res.text())


if __name__ == "__main__":
    H.worker_main(CASES)
    unittest.main(verbosity=2)
